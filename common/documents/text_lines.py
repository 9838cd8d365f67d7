"""A text layer's characters grouped into words and lines by their boxes, in the child that read them: lines of
plain lists and strings pickle back to the worker in a fraction of the time the characters themselves took (each
page's ~2,800 characters cost ~45 ms to pickle and unpickle, more than reading them)."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(slots=True)
class Char:
    text: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in the rendered page's pixels, y down
    size: float  # font size in pixels
    mono: bool  # in a fixed-pitch font
    generated: bool  # a space or line break pdfium inferred, not drawn
    # The glyph's advance (x0, x1) and the middle of the font's ascent and descent (y), in the same pixels: alike
    # for every glyph on a line, where the tight box of a quote and of a comma share no height.
    advance: tuple[float, float] = (0.0, 0.0)
    middle: float = 0.0


def group_lines(chars: list[Char]) -> list[dict]:
    """Runs of drawn characters on one baseline, cut at line breaks, at jumps back or down, and at wide blanks;
    words end at spaces, drawn or inferred by pdfium (a glyph's tight box is no guide: "11" has a gap). Each line
    is {"text", "box", "mono", "words": [{"text", "box", "confidence"}]} in the rendered page's pixels, mono when
    all of it is in a fixed-pitch font."""
    lines: list[list[list[Char]]] = []  # lines of words of characters
    current: list[list[Char]] = []
    word: list[Char] = []
    last: Char | None = None
    last_em = 0.0
    broken = False  # pdfium inferred a line break after `last`

    for char in chars:
        if char.generated:
            if char.text == "\n":
                broken = last is not None
            elif word:
                current.append(word)
                word = []
            continue
        box = char.box
        # The font's size, not the glyph's tight box: an underscore, an apostrophe or a leader dot has a box far
        # smaller than the line's, and "asn1_der" or "doesn't" was cut into lines of their own at it.
        em = max(char.size, box[3] - box[1])
        if last is not None:
            height = max(last_em, em, 1.0)
            previous = last.box
            gap = box[0] - previous[2]
            if abs(char.middle - last.middle) > 0.6 * height or gap < -height or gap > GAP_HEIGHTS * height or (
                    broken and not -0.2 * height <= gap <= SCRIPT_GAP * height):
                if word:
                    current.append(word)
                    word = []
                if current:
                    lines.append(current)
                current = []
            elif word:
                blank = char.advance[0] - last.advance[1]
                if blank > WORD_BREAK * last.size and not (char.mono and last.mono) or blank >= SIZE_CHANGE_BREAK \
                        * last.size and abs(char.size - last.size) > 0.05 * last.size:
                    current.append(word)
                    word = []
        word.append(char)
        last, last_em, broken = char, em, False
    if word:
        current.append(word)
    if current:
        lines.append(current)
    return [_line(words) for words in lines]


def _line(words: list[list[Char]]) -> dict:
    boxes = [_union(w) for w in words]
    texts = ["".join([c.text for c in w]) for w in words]
    x0, y0, x1, y1 = zip(*boxes)
    return {"text": " ".join(texts), "mono": all(c.mono for w in words for c in w),
            "box": [min(x0), min(y0), max(x1), max(y1)],
            "words": [{"text": t, "box": b, "confidence": 1.0} for t, b in zip(texts, boxes, strict=True)]}


def _union(chars: list[Char]) -> list[int]:
    # One min/max over each side's column, not four a glyph: this ran a tenth of a page's reading.
    x0, y0, x1, y1 = zip(*(c.box for c in chars))
    return [int(min(x0)), int(min(y0)), int(max(x1) + 0.999), int(max(y1) + 0.999)]
