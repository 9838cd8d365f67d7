"""Submit-time inspection: what a document is and whether it can be taken, cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import images, office, pdf
from .errors import DocumentRejected
from .isolation import run_isolated
from .kinds import MIME_TYPES, sniff_file
from .limits import Limits


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A document's kind by content, its page count, MIME type, and each page's size once rendered."""

    kind: str
    page_count: int
    mime: str
    page_sizes: tuple[tuple[int, int], ...] = field(default=(), compare=False)


def inspect(path: Path, *, limits: Limits) -> DocumentInfo:
    """Kind and page count of the file at path, or DocumentRejected for what can be refused cheaply."""
    if Path(path).stat().st_size == 0:
        raise DocumentRejected("empty_file", "The file is empty.")
    kind = sniff_file(path)
    if kind in office.OFFICE_KINDS:  # its pages are known once a worker has converted it
        office.check_converter()
        return DocumentInfo(kind=kind, page_count=0, mime=MIME_TYPES[kind])
    sizes = run_isolated(
        _page_sizes,
        Path(path),
        kind,
        limits,
        timeout_s=limits.render_timeout_s,
        max_pixels=limits.max_page_pixels,
        what="inspecting the document",
    )
    return DocumentInfo(kind=kind, page_count=len(sizes), mime=MIME_TYPES[kind], page_sizes=sizes)


def _page_sizes(path: Path, kind: str, limits: Limits) -> tuple[tuple[int, int], ...]:
    """Each page's rendered size, after the checks; the count is their number."""
    if kind == "pdf":
        with pdf.open_pdf(path) as document:
            pdf.check_document(document, limits=limits)
            return tuple(pdf.rendered_size(*document.get_page_size(i), longest_side=limits.longest_side)
                         for i in range(len(document)))
    return images.check_image(path, kind, limits=limits)
