"""Assembling a job's pages into the result formats: markdown, text and per-page JSON here; hOCR, ALTO and PAGE
XML in common/formats; the tables as CSV and XLSX in common/formats/table_files.py; pdf in common/pdf_output."""

from __future__ import annotations

import json

from common.formats import render_layout
from common.formats.plain import markdown_to_text
from common.formats.structure import normalised
from common.formats.table_files import csv_body, xlsx_body
from common.formats.tables import document_tables
from common.jobs.models import Job, Page

TEXT_FORMATS = ("markdown", "text", "json")
LAYOUT_FORMATS = ("hocr", "alto", "page")  # common/formats; page is a zip of one PAGE XML file a page
TABLE_FORMATS = ("csv", "xlsx")  # the document's tables; csv is a zip of one CSV a table unless there is one
# Tables are built from the pages when asked for, never stored with the result: most jobs have none, few ask.
STORED_FORMATS = (*TEXT_FORMATS, *LAYOUT_FORMATS)
FORMATS = (*STORED_FORMATS, *TABLE_FORMATS, "pdf")  # every key a result may have had (older jobs stored tables)
MEDIA_TYPES = {"markdown": "text/markdown; charset=utf-8", "text": "text/plain; charset=utf-8",
               "json": "application/json", "pdf": "application/pdf",
               "hocr": "application/xhtml+xml; charset=utf-8", "alto": "application/xml; charset=utf-8",
               "page": "application/zip", "csv": "text/csv; charset=utf-8",
               "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}
EXTENSIONS = {"markdown": "md", "text": "txt", "json": "json", "pdf": "pdf", "hocr": "hocr", "alto": "alto.xml",
              "page": "page.zip", "csv": "csv", "xlsx": "xlsx"}
# A zip starts with a file's header, or (an empty zip: no table) with the end of its directory.
_ZIP = (b"PK\x03\x04", b"PK\x05\x06")


def media_type(fmt: str, body: bytes) -> str:
    """The body's media type: the format's, but a zip for a csv result of several tables (or none)."""
    return "application/zip" if fmt == "csv" and body[:4] in _ZIP else MEDIA_TYPES[fmt]


def extension(fmt: str, body: bytes) -> str:
    """The body's file extension, as media_type."""
    return "csv.zip" if fmt == "csv" and body[:4] in _ZIP else EXTENSIONS[fmt]


def object_key(prefix: str, fmt: str) -> str:
    return f"{prefix}.{EXTENSIONS[fmt]}"


def page_marker(number: int) -> str:
    return f"<!-- ocrq:page {number} -->"


def page_json(page: Page) -> dict:
    return {
        "page": page.index + 1,
        "status": page.status,
        "text": page.text,
        "width": page.width,
        "height": page.height,
        "engine": page.engine,
        "source": page.source,
        "model": page.model,
        "seconds": round(page.seconds, 4) if page.seconds is not None else None,
        "error": page.error,
        "rotation": page.rotation,
        "confidence": page.confidence,
        "blocks": normalised(page.blocks) if page.blocks else page.blocks,
    }


def page_text(page: Page, fmt: str) -> dict:
    """One finished page for `GET /jobs/{id}/pages`: its text in `fmt` (json: the engine's markdown with blocks)."""
    view = {"page": page.index + 1, "status": page.status, "error": page.error, "source": page.source,
            "text": markdown_to_text(page.text).strip() if fmt == "text" and page.text else page.text}
    if fmt == "json":
        view |= {"width": page.width, "height": page.height, "rotation": page.rotation, "blocks": page.blocks}
    return view


def render(job: Job, pages: list[Page], fmt: str, *, status: str | None = None) -> str:
    """The whole result in one format; pages in document order whatever order they finished in."""
    pages = sorted(pages, key=lambda p: p.index)
    if fmt == "json":
        body = {"job_id": job.id, "status": status or job.status, "metadata": job.meta,
                "pages": [page_json(p) for p in pages], "tables": [t.as_json() for t in document_tables(pages)]}
        return json.dumps(body, ensure_ascii=False)
    parts = []
    for page in pages:
        if fmt == "markdown":
            note = f" failed: {page.error}" if page.status == "failed" else ""
            header = page_marker(page.index + 1) if not note else f"<!-- ocrq:page {page.index + 1}{note} -->"
            parts.append(f"{header}\n\n{page.text or ''}".rstrip())
        else:
            parts.append(markdown_to_text(page.text or "").strip())
    return ("\n\n" if fmt == "markdown" else "\n\f\n").join(parts) + "\n"


def body(job: Job, pages: list[Page], fmt: str, *, status: str | None = None) -> bytes:
    """The result's bytes in any stored format: a text format, a layout format (hocr, alto, page) or a table one."""
    if fmt == "csv":
        return csv_body(document_tables(pages))[0]
    if fmt == "xlsx":
        return xlsx_body(document_tables(pages))
    if fmt in LAYOUT_FORMATS:
        return render_layout(fmt, job, pages)
    return render(job, pages, fmt, status=status).encode()
