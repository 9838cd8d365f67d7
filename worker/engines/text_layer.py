"""A born-digital page read from its own text (common.documents.text_layer): its lines, grouped from the
characters' boxes where they were read (common.documents.text_lines), then the same reading order, blocks and
markdown as an OCR'd page. Lines an engine read in the page's pictures (worker.engines.pictures) join them there,
marked `"picture": true`."""

from __future__ import annotations

import time

from common.documents.text_layer import TextLayer
from worker.engines import reading_order
from worker.engines.base import PageText

NAME = "text_layer"


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
    return layer.lines
