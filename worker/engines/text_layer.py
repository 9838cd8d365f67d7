"""A born-digital page read from its own text (common.documents.text_layer): its lines, grouped from the
characters' boxes where they were read (common.documents.text_lines), then the same reading order, blocks and
markdown as an OCR'd page. Lines an engine read in the page's pictures (worker.engines.pictures) join them there,
marked `"picture": true`."""

from __future__ import annotations

import re
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
    # Lines all in a fixed-pitch font are a listing: its spaced columns are not a table's cells.
    code = {id(block) for block in blocks if block.kind in ("table", "text") and all(
        by_box.get(tuple(map(int, ln.box)), {}).get("mono") for ln in block.lines)}
    for block in blocks:
        if id(block) in code:
            block.lines = [ln for row in block.rows for ln in row] if block.rows else block.lines
            block.kind, block.rows = "text", None
    as_json = [block.as_json() for block in blocks]
    for block in as_json:
        for line in block["lines"]:
            if (found := by_box.get(tuple(line["box"]))) is not None:
                if found.get("words"):
                    line["words"] = found["words"]
                if found.get("picture"):
                    line["picture"] = True
    pictures = len(lines) - len(own)
    return PageText(text=to_markdown(blocks, code=code), engine=NAME, model="pdf",
                    confidence=1.0 if not pictures else None, seconds=time.perf_counter() - started, rotation=0,
                    blocks=as_json, details={"lines": len(own), "picture_lines": pictures} | layer.counts)


_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]")


def to_markdown(blocks: list[reading_order.Block], *, code: set[int] = frozenset()) -> str:
    """The OCR path's markdown, but paragraphs and list items keep the page's own words as pdftotext gives them: a
    word broken by a hyphen at a line's end stays broken (the hyphen is the document's), and a bullet stays the
    document's glyph ("• item", not "- item"); the blocks in `code` (ids: a listing in a fixed-pitch font) are code, line by line."""
    parts = []
    first_title = next((b for b in blocks if b.kind == "title"), None)
    for block in blocks:
        texts = [t for t in (ln.text.strip() for ln in block.lines) if t]
        if id(block) in code:
            parts.append("```\n" + "\n".join(texts) + "\n```")
        elif block.kind == "title":
            parts.append(f"{'#' if block is first_title else '##'} {_join(texts)}")
        elif block.kind == "list":
            parts.append("\n".join(_join(item) for item in reading_order.list_items(texts)))
        elif block.kind == "table":
            parts.append(reading_order.to_markdown([block]))
        else:
            parts.append(_join(texts))
    return "\n\n".join(p for p in parts if p)


def _join(texts: list[str]) -> str:
    """Lines joined by a space, CJK lines without one."""
    out = ""
    for text in texts:
        out += text if not out or _CJK.match(out[-1]) and _CJK.match(text[0]) else " " + text
    return out


def text_lines(layer: TextLayer) -> list[dict]:
    """The layer's own lines, {"text", "box", "words"} in the rendered page's pixels."""
    return layer.lines
