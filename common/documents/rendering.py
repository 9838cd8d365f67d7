"""Rendering one page of a document to a normalised RGB image."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from . import images, pdf
from .errors import DocumentRejected
from .isolation import RawPixels, run_isolated
from .kinds import sniff_file
from .limits import Limits


@dataclass(frozen=True, slots=True)
class RenderedPage:
    """A page ready for an OCR engine: RGB, longest side at most limits.longest_side."""

    image: Image.Image
    width: int
    height: int
    source_kind: str


def render_page(path: Path, index: int, *, limits: Limits) -> RenderedPage:
    """Page index (0-based) of the document at path, rendered in a child process under limits."""
    if index < 0:
        raise DocumentRejected("page_out_of_range", f"Page index {index} is negative.")
    kind = sniff_file(path)
    image = run_isolated(
        _render,
        Path(path),
        kind,
        index,
        limits,
        timeout_s=limits.render_timeout_s,
        max_pixels=limits.max_page_pixels,
        what=f"rendering page {index + 1}",
        shared_bytes=3 * limits.longest_side**2,
    )
    return RenderedPage(image=image, width=image.width, height=image.height, source_kind=kind)


def _render(
    path: Path, kind: str, index: int, limits: Limits, *, shared: mmap.mmap | None = None
) -> Image.Image | RawPixels:
    if kind == "pdf":
        return pdf.render_pdf_page(path, index, limits=limits, shared=shared)
    return images.render_image_page(path, kind, index, limits=limits)
