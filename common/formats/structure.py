"""A stored page as the output formats read it: blocks, lines and words, each with a box and a confidence.

Both engines store blocks (worker.engines.base.PageText). The vLLM engine's lines already carry words
with their own confidence (from the tokens' log-probabilities); the CPU engine's lines carry a score only,
so their words are cut from the line's box in proportion to their characters and take the line's score.
A block's or page's confidence, where the engine gave none, is the geometric mean of its lines' weighted
by their characters: the same measure as the vLLM engine's per token, one level up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from common.formats.placement import page_block, split_box
from common.formats.plain import markdown_to_text


def combine(values: list[float | None], weights: list[int]) -> float | None:
    """The weighted geometric mean of the known values; None when none is known."""
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None and w > 0]
    if not pairs:
        return None
    total = sum(w for _, w in pairs)
    return round(math.exp(sum(w * math.log(max(v, 1e-9)) for v, w in pairs) / total), 4)


def estimated(blocks: list[dict] | None) -> bool:
    """Whether the blocks' boxes are the text spread down the page (a vLLM page read without a layout)."""
    return any(block.get("box_estimated") for block in blocks or [])


def blocks_placed(blocks: list[dict] | None, text_layer: dict | None) -> bool:
    """Whether the page's stored blocks are where to take its lines from: they are, unless their boxes are
    estimated and the detector's text layer has measured ones."""
    return bool(blocks) and not (estimated(blocks) and text_layer)


def page_confidence(blocks: list[dict] | None) -> float | None:
    """The page's confidence from its lines, by characters; None without lines that carry one."""
    lines = [line for block in blocks or [] for line in block.get("lines", [])]
    return combine([line.get("confidence") for line in lines], [len(line.get("text") or "") for line in lines])


def normalised(blocks: list[dict]) -> list[dict]:
    """The blocks with every line's words and every block's confidence filled in."""
    out = []
    for block in blocks:
        lines = [_with_words(line) for line in block.get("lines", [])]
        confidence = block.get("confidence")
        if confidence is None:
            confidence = combine([ln["confidence"] for ln in lines], [len(ln["text"]) for ln in lines])
        out.append(block | {"lines": lines, "confidence": confidence})
    return out


def _with_words(line: dict) -> dict:
    if "words" in line:
        return line
    words = line["text"].split()
    boxes = split_box(words, tuple(line["box"])) if words else []
    return line | {"words": [{"text": w, "box": list(b), "confidence": line.get("confidence")}
                             for w, b in zip(words, boxes, strict=True)]}


@dataclass
class PageLayout:
    """One page of a result: its place in the document and what was read on it, in the upright image."""

    number: int  # 1-based page of the source document
    width: int  # the upright image's size, in which every box is given
    height: int
    rotation: int
    confidence: float | None
    blocks: list[dict] = field(default_factory=list)
    error: str | None = None


def layout_of(page) -> PageLayout:
    """The page's blocks for a format: stored blocks with measured boxes, else the PDF text layer's lines,
    else stored blocks with estimated boxes, else its text spread down the page."""
    width, height = page.width or 1, page.height or 1
    rotation = page.rotation or 0
    if rotation in (90, 270):
        width, height = height, width
    layout = PageLayout(number=page.index + 1, width=width, height=height, rotation=rotation,
                        confidence=page.confidence, error=page.error if page.status != "succeeded" else None)
    if page.status != "succeeded":
        return layout
    if blocks_placed(page.blocks, page.text_layer):
        layout.blocks = normalised(page.blocks)
    else:
        if page.text_layer:
            layout.rotation = page.text_layer.get("rotation") or 0
            lines = page.text_layer["lines"]
        else:
            lines = [{"text": t, "box": list(b)} for t, b in
                     page_block(markdown_to_text(page.text or ""), (page.width or 1, page.height or 1))]
        lines = [line | {"confidence": None} for line in lines if line.get("text", "").strip()]
        layout.blocks = normalised([{"kind": "text", "box": _union([ln["box"] for ln in lines]), "lines": lines}]
                                   if lines else [])
    if layout.confidence is None:
        layout.confidence = page_confidence(layout.blocks)
    return layout


def _union(boxes: list[list[int]]) -> list[int]:
    return [min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)]
