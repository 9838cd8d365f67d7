"""The pictures of a page read from its text (TextLayer.pictures): each region cut from the rendered page for the
job's engine, and the lines it reads mapped back into the page's pixels, where worker.engines.text_layer merges
them with the text layer's lines (the page's source is then `mixed`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from common.documents.text_layer import TextLayer
from common.formats.structure import estimated
from worker.engines.base import PageText

# A margin around a region, its own edge pixels repeated: a detector misses a line that touches the image's edge,
# and a white margin draws an edge of its own around a tinted picture, read back as "_" or "|".
PAD = 32
# A region shorter than this is read at twice its size (a line in it is at most this tall). Not more often: a
# 132 px sign read at twice its size came back "FEES" for "FERRY TIMES", right at its own size (bench/mixed_pages.py).
UPSCALE_BELOW = 64
# A picture line lying this much on the text layer's lines is text drawn over the picture, already read exactly.
OVERLAP = 0.5


@dataclass(frozen=True)
class Region:
    box: tuple[int, int, int, int]  # in the rendered page's pixels
    image: Image.Image  # what the engine reads: the region, scaled, padded
    scale: int


def regions(page: Image.Image, layer: TextLayer) -> list[Region]:
    """The page's pictures as images for the engine, in the order of layer.pictures."""
    out = []
    for box in layer.pictures:
        x0, y0, x1, y1 = max(box[0], 0), max(box[1], 0), min(box[2], page.width), min(box[3], page.height)
        if x1 <= x0 or y1 <= y0:
            continue
        crop = page.crop((x0, y0, x1, y1))
        scale = 2 if min(crop.size) < UPSCALE_BELOW else 1
        if scale > 1:
            crop = crop.resize((crop.width * scale, crop.height * scale), Image.LANCZOS)
        padded = np.pad(np.asarray(crop.convert("RGB")), ((PAD, PAD), (PAD, PAD), (0, 0)), mode="edge")
        out.append(Region((x0, y0, x1, y1), Image.fromarray(padded), scale))
    return out


def lines(region: Region, result: PageText, text_lines: list[dict]) -> list[dict]:
    """The engine's lines for one region, {"text", "box"[, "words"], "confidence"} in the page's pixels; lines that
    lie on the text layer's own lines are left out (the layer's text wins), as are lines of no letter or digit (a
    frame or a drawing's strokes read as "_" or "|")."""
    if not result.blocks or estimated(result.blocks):
        return [line for line in _spread(region, result) if not _covered(line["box"], text_lines)]
    found = []
    for block in result.blocks:
        for line in block.get("lines", []):
            if not _wordy(line.get("text")):
                continue
            box = _to_page(region, line["box"], result.rotation or 0)
            if box[2] <= box[0] or box[3] <= box[1] or _covered(box, text_lines):
                continue
            mapped = {"text": line["text"].strip(), "box": box, "confidence": _score(line)}
            if line.get("words"):
                mapped["words"] = [w | {"box": _to_page(region, w["box"], result.rotation or 0)}
                                   for w in line["words"]]
            found.append(mapped)
    return found


def _spread(region: Region, result: PageText) -> list[dict]:
    """An engine read without measured boxes: its lines spread down the region, in its order."""
    texts = [line["text"].strip() for block in result.blocks or [] for line in block.get("lines", [])] \
        or result.text.splitlines()
    texts = [t.strip() for t in texts if _wordy(t)]
    x0, y0, x1, y1 = region.box
    step = (y1 - y0) / max(len(texts), 1)
    return [{"text": t, "box": [x0, int(y0 + i * step), x1, max(int(y0 + (i + 1) * step), int(y0 + i * step) + 1)],
             "confidence": 1.0} for i, t in enumerate(texts)]


def _wordy(text: str | None) -> bool:
    return any(ch.isalnum() for ch in text or "")


def _score(line: dict) -> float:
    return line["confidence"] if line.get("confidence") is not None else 1.0


def _to_page(region: Region, box, rotation: int) -> list[int]:
    """A box in the engine's upright image of the region, back in the rendered page's pixels."""
    width, height = region.image.size  # the padded region as sent; the engine turned it by rotation
    corners = [(box[0], box[1]), (box[2], box[3])]
    back = [_unturn(x, y, rotation, width, height) for x, y in corners]
    xs, ys = [x for x, _ in back], [y for _, y in back]
    x0, y0, x1, y1 = region.box

    def place(v: float, lo: int, hi: int) -> int:
        return int(min(max(lo + (v - PAD) / region.scale, lo), hi))

    return [place(min(xs), x0, x1), place(min(ys), y0, y1), place(max(xs), x0, x1), place(max(ys), y0, y1)]


def _unturn(x: float, y: float, rotation: int, width: int, height: int) -> tuple[float, float]:
    """A point of the image turned counter-clockwise by rotation (numpy.rot90), in the image as it was sent."""
    if rotation == 90:
        return width - y, x
    if rotation == 180:
        return width - x, height - y
    if rotation == 270:
        return y, height - x
    return x, y


def _covered(box: list[int], text_lines: list[dict]) -> bool:
    area = max((box[2] - box[0]) * (box[3] - box[1]), 1)
    on = 0
    for line in text_lines:
        b = line["box"]
        w, h = min(box[2], b[2]) - max(box[0], b[0]), min(box[3], b[3]) - max(box[1], b[1])
        if w > 0 and h > 0:
            on += w * h
    return on >= OVERLAP * area
