"""From a job's page rows to what each page puts into the PDF."""

from __future__ import annotations

from pathlib import Path

from common.documents.limits import Limits
from common.formats.placement import place_words
from common.formats.plain import markdown_to_text
from common.formats.structure import blocks_placed
from common.jobs import results
from common.jobs.models import Job, Page

from .assemble import build_pdf
from .text_layer import Line, PageLayer


def layer_of(page: Page) -> PageLayer:
    """The page's lines: the engine's own blocks, the detector's boxes (vLLM), or a page-level block; for a page
    read from its text with its pictures OCR'd, the pictures' lines alone (its own text is in the page already)."""
    size = {"index": page.index, "width": page.width, "height": page.height}
    if page.status != "succeeded":
        return PageLayer(**size, error=page.error or f"page {page.index + 1} was not read")
    read = results.page_json(page)
    if page.source == "mixed":
        lines = [line for block in read.get("blocks") or [] for line in block["lines"] if line.get("picture")]
        return PageLayer(**size, lines=_lines(lines), beside_own_text=True)
    if blocks_placed(read.get("blocks"), page.text_layer):
        lines = [line for block in read["blocks"] for line in block["lines"]]
        return PageLayer(**size, rotation=read.get("rotation") or 0, lines=_lines(lines))
    if page.text_layer:
        return PageLayer(**size, rotation=page.text_layer.get("rotation") or 0, lines=_lines(page.text_layer["lines"]))
    text = markdown_to_text(page.text or "")
    return PageLayer(**size, lines=_lines({"text": t, "box": b} for t, b in
                                          place_words(text, [], size=(page.width or 1, page.height or 1))))


def _lines(rows) -> list[Line]:
    return [Line(text=row["text"], box=tuple(int(v) for v in row["box"])) for row in rows if row.get("text")]


def job_pdf(job: Job, pages: list[Page], *, source: Path, limits: Limits) -> bytes:
    """The job's searchable PDF: every page it read, in document order, failed ones without text."""
    layers = [layer_of(page) for page in sorted(pages, key=lambda p: p.index)]
    return build_pdf(source, layers, limits=limits, title=job.filename)
