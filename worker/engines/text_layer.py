"""A born-digital page read from its own text (common.documents.text_layer): characters grouped into words and
lines by their boxes, then the same reading order, blocks and markdown as an OCR'd page. Lines an engine read in
the page's pictures (worker.engines.pictures) join them there, marked `"picture": true`."""

from __future__ import annotations

import time

from common.documents.text_layer import Char, TextLayer
from worker.engines import reading_order
from worker.engines.base import PageText

NAME = "text_layer"
# A blank wider than this many character heights inside a run of characters ends the line there: a column's
# gutter or a table's cell gap, which the reading order must see as two lines.
GAP_HEIGHTS = 1.5


def read(layer: TextLayer, picture_lines: list[dict] | None = None) -> PageText:
    """The page as the text layer gives it, with picture_lines ({"text", "box"[, "words", "confidence"]} in the
    page's pixels) among its own: blocks in reading order, each line with its words' boxes."""
    started = time.perf_counter()
    own = text_lines(layer)
    lines = own + [line | {"picture": True} for line in picture_lines or []]
    quads = [[(b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])] for b in (line["box"] for line in lines)]
    ordered = reading_order.lines_from_quads(quads, [line["text"] for line in lines],
                                             [line.get("confidence", 1.0) for line in lines])
    by_box = {tuple(map(int, line["box"])): line for line in lines}
    blocks = reading_order.order_blocks(ordered, height=layer.height)
    for block in blocks:
        # A picture's lettering is big, but it is not the document's heading.
        if block.kind == "title" and all(by_box.get(tuple(map(int, ln.box)), {}).get("picture") for ln in block.lines):
            block.kind = "text"
    as_json = [block.as_json() for block in blocks]
    for block in as_json:
        for line in block["lines"]:
            if (found := by_box.get(tuple(line["box"]))) is not None:
                if found.get("words"):
                    line["words"] = found["words"]
                if found.get("picture"):
                    line["picture"] = True
    pictures = len(lines) - len(own)
    return PageText(text=reading_order.to_markdown(blocks), engine=NAME, model="pdf",
                    confidence=1.0 if not pictures else None, seconds=time.perf_counter() - started, rotation=0,
                    blocks=as_json, details={"lines": len(own), "picture_lines": pictures} | layer.counts)


def text_lines(layer: TextLayer) -> list[dict]:
    """The layer's own lines, {"text", "box", "words"} in the rendered page's pixels."""
    return _lines(layer.chars)


def _lines(chars: list[Char]) -> list[dict]:
    """Runs of drawn characters on one baseline, cut at line breaks, at jumps back or down, and at wide blanks;
    words end at spaces, drawn or inferred by pdfium (a glyph's tight box is no guide: "11" has a gap)."""
    lines: list[list[list[Char]]] = []  # lines of words of characters
    current: list[list[Char]] = []
    word: list[Char] = []
    last: Char | None = None

    def end_word() -> None:
        nonlocal word
        if word:
            current.append(word)
        word = []

    def end_line() -> None:
        nonlocal current, last
        end_word()
        if current:
            lines.append(current)
        current, last = [], None

    for char in chars:
        if char.generated:
            end_line() if char.text == "\n" else end_word()
            continue
        if last is not None:
            # The font's size, not the glyph's tight box: an underscore, an apostrophe or a leader dot has a box far
            # smaller than the line's, and "asn1_der" or "doesn't" was cut into lines of their own at it.
            height = max(_em(last), _em(char), 1.0)
            centre, previous = (char.box[1] + char.box[3]) / 2, (last.box[1] + last.box[3]) / 2
            gap = char.box[0] - last.box[2]
            if abs(centre - previous) > 0.6 * height or gap < -height or gap > GAP_HEIGHTS * height:
                end_line()
        word.append(char)
        last = char
    end_line()
    return [_line(words) for words in lines]


def _em(char: Char) -> float:
    """The character's font size in pixels, or its box's height where pdfium's size is smaller (a font set at
    size 1 and scaled by the text matrix)."""
    return max(char.size, char.box[3] - char.box[1])


def _line(words: list[list[Char]]) -> dict:
    boxes = [_union([c.box for c in w]) for w in words]
    texts = ["".join(c.text for c in w) for w in words]
    return {"text": " ".join(texts), "box": _union(boxes),
            "words": [{"text": t, "box": b, "confidence": 1.0} for t, b in zip(texts, boxes, strict=True)]}


def _union(boxes) -> list[int]:
    return [int(min(b[0] for b in boxes)), int(min(b[1] for b in boxes)), int(max(b[2] for b in boxes) + 0.999),
            int(max(b[3] for b in boxes) + 0.999)]
