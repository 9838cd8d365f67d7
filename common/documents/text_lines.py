"""A text layer's characters grouped into words and lines by their boxes, in the child that read them: lines of
plain lists and strings pickle back to the worker in a fraction of the time the characters themselves took (each
page's ~2,800 characters cost ~45 ms to pickle and unpickle, more than reading them)."""

from __future__ import annotations

# A blank wider than this many character heights inside a run of characters ends the line there: a column's
# gutter or a table's cell gap, which the reading order must see as two lines.
GAP_HEIGHTS = 1.5
# Between two glyphs' advances, a blank wider than this share of the font size ends a word, and one this wide
# where the type size changes (a typewriter word, then a comma in the text face): pdftotext's word breaks
# (poppler's minWordBreakSpace and maxCharSpacing).
WORD_BREAK = 0.1
SIZE_CHANGE_BREAK = 0.03
# pdfium infers a line break where the baseline moves, a superscript's too ("g⁺ g⁺ → g⁺": five lines of one
# glyph, which the reading order took for a table's cells across both columns, apssamp.pdf page 3). Where the
# next glyph starts within this many character heights of the last one's end, at the same height, the line goes on.
SCRIPT_GAP = 0.5


# A drawn glyph: its text; x0, y0, x1, y1 in the rendered page's pixels (y down); its font size in pixels; in a
# fixed-pitch font or not; the glyph's advance (x0, x1) and the middle of the font's ascent and descent (y), in the
# same pixels: alike for every glyph on a line, where the tight box of a quote and of a comma share no height. A
# tuple, not an object: a page has ~2,600 of them, and building an object each took a tenth of the page's read.
Glyph = tuple[str, float, float, float, float, float, bool, float, float, float]
# What pdfium inferred between glyphs, not drawn.
SPACE, LINE_BREAK = " ", "\n"


def group_lines(chars: list[Glyph | str]) -> list[dict]:
    """Runs of drawn glyphs on one baseline, cut at line breaks, at jumps back or down, and at wide blanks;
    words end at spaces, drawn or inferred by pdfium (SPACE; a glyph's tight box is no guide: "11" has a gap).
    Each line is {"text", "box", "mono", "words": [{"text", "box", "confidence"}]} in the rendered page's pixels,
    mono when all of it is in a fixed-pitch font."""
    lines: list[list[list[Glyph]]] = []  # lines of words of glyphs
    current: list[list[Glyph]] = []
    word: list[Glyph] = []
    started = False  # a drawn glyph came before; the last one's right, middle, size, mono, advance end, em:
    last_x1 = last_middle = last_size = last_end = last_em = 0.0
    last_mono = False
    broken = False  # pdfium inferred a line break after the last glyph

    for char in chars:
        if char.__class__ is str:
            if char == LINE_BREAK:
                broken = started
            elif word:
                current.append(word)
                word = []
            continue
        _, x0, y0, x1, y1, size, mono, start, end, middle = char
        # The font's size, not the glyph's tight box: an underscore, an apostrophe or a leader dot has a box far
        # smaller than the line's, and "asn1_der" or "doesn't" was cut into lines of their own at it.
        em = max(size, y1 - y0)
        if started:
            height = max(last_em, em, 1.0)
            gap = x0 - last_x1
            if abs(middle - last_middle) > 0.6 * height or gap < -height or gap > GAP_HEIGHTS * height or (
                    broken and not -0.2 * height <= gap <= SCRIPT_GAP * height):
                if word:
                    current.append(word)
                    word = []
                if current:
                    lines.append(current)
                current = []
            elif word:
                blank = start - last_end
                if blank > WORD_BREAK * last_size and not (mono and last_mono) or blank >= SIZE_CHANGE_BREAK \
                        * last_size and abs(size - last_size) > 0.05 * last_size:
                    current.append(word)
                    word = []
        word.append(char)
        started, broken = True, False
        last_x1, last_middle, last_size, last_mono, last_end, last_em = x1, middle, size, mono, end, em
    if word:
        current.append(word)
    if current:
        lines.append(current)
    return [_line(words) for words in lines]


def _line(words: list[list[Glyph]]) -> dict:
    texts, boxes, mono = [], [], True
    for glyphs in words:
        # One min/max over each side's column, not four a glyph.
        text, x0, y0, x1, y1, _, monos, *_ = zip(*glyphs)
        texts.append("".join(text))
        boxes.append([int(min(x0)), int(min(y0)), int(max(x1) + 0.999), int(max(y1) + 0.999)])
        mono = mono and all(monos)
    x0, y0, x1, y1 = zip(*boxes)
    return {"text": " ".join(texts), "mono": mono,
            "box": [min(x0), min(y0), max(x1), max(y1)],
            "words": [{"text": t, "box": b, "confidence": 1.0} for t, b in zip(texts, boxes, strict=True)]}
