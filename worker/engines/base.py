"""The interface every OCR engine implements, so the worker never knows which one it drives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from PIL import Image


class EngineError(Exception):
    """A page could not be read; `kind` says why (e.g. overloaded, oom, timeout, repetition, invalid)."""

    retryable = False

    def __init__(self, message: str, *, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


class EngineOverloaded(EngineError):
    """The engine refused for capacity (503, 429, OOM, timeout): retry the page alone, later."""

    retryable = True


@dataclass(frozen=True)
class PageText:
    """One page read. `rotation` (0, 90, 180, 270) is how far the engine turned the image counter-clockwise
    to read it upright; `blocks` are the page's blocks in reading order, boxes in pixels of that upright
    image: [{"kind", "box": [x0, y0, x1, y1], "lines": [{"text", "box", "confidence"}]}] (the vLLM engine's
    lines also carry "words", its blocks a "confidence", its tables the cells of common/formats/tables.py). Both are None for an
    engine run without a layout. `confidence` is the page's (0-1), where the engine measures one."""

    text: str
    engine: str
    model: str
    seconds: float
    details: dict = field(default_factory=dict)
    rotation: int | None = None
    blocks: list[dict] | None = None
    confidence: float | None = None


class Engine(Protocol):
    name: str
    model: str

    def read(self, images: list[Image.Image]) -> list[PageText | EngineError]:
        """OCR each normalised RGB page; one result or error per image, in order."""
        ...

    def ping(self) -> bool:
        """True when the engine can take work now."""
        ...

    def close(self) -> None: ...
