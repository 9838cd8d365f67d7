"""The layout formats archives and OCR tools take: hOCR 1.2, ALTO v4 and PAGE XML 2019, built from the stored pages."""

from __future__ import annotations

from common.formats import alto, hocr, page_xml
from common.formats.structure import layout_of

RENDERERS = {"hocr": hocr.render, "alto": alto.render, "page": page_xml.render}


def render_layout(fmt: str, job, pages) -> bytes:
    """The job's pages (in document order) in hocr, alto or page."""
    return RENDERERS[fmt](job, [layout_of(page) for page in sorted(pages, key=lambda p: p.index)])
