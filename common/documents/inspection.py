"""Submit-time inspection: what a document is and whether it can be taken, cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import images, pdf
from .errors import DocumentRejected
from .isolation import run_isolated
from .kinds import MIME_TYPES, sniff_file
from .limits import Limits


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A document's kind by content, its page count and MIME type."""

    kind: str
    page_count: int
    mime: str


def inspect(path: Path, *, limits: Limits) -> DocumentInfo:
    """Kind and page count of the file at path, or DocumentRejected for what can be refused cheaply."""
    if Path(path).stat().st_size == 0:
        raise DocumentRejected("empty_file", "The file is empty.")
    kind = sniff_file(path)
    count = run_isolated(
        _page_count,
        Path(path),
        kind,
        limits,
        timeout_s=limits.render_timeout_s,
        max_pixels=limits.max_page_pixels,
        what="inspecting the document",
    )
    return DocumentInfo(kind=kind, page_count=count, mime=MIME_TYPES[kind])


def _page_count(path: Path, kind: str, limits: Limits) -> int:
    if kind == "pdf":
        with pdf.open_pdf(path) as document:
            return pdf.check_document(document, limits=limits)
    return images.check_image(path, kind, limits=limits)
