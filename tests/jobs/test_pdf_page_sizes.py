"""Searchable PDFs of pages at the edges of what PDF allows (3 to 14,400 units a side): every page read gets its PDF."""

from __future__ import annotations

import pikepdf
import pytest
from PIL import Image

from common.documents import Limits
from common.pdf_output import Line, PageLayer, build_pdf
from tests.support.pdf_checks import page_sizes, pdfium_texts, poppler_text, qpdf_check


@pytest.mark.parametrize(("size", "text", "unit", "points"), [
    ((1, 1), None, None, (3.0, 3.0)),  # a 1-pixel image: raised to the floor
    ((20_000, 600), "wide drawing scale", 10, (1500.0, 45.0)),  # 208 inches at 96 dpi: on a /UserUnit of 10
    ((2, 20_000), None, 10, (3.0, 1500.0)),  # a thin strip: both at once
])
def test_page_of_any_size(tmp_path, size, text, unit, points):
    source = tmp_path / "page.png"
    Image.new("RGB", size, "white").save(source, dpi=(96, 96))
    lines = [Line(text, (100, 100, 1400, 160))] if text else []
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(source, [PageLayer(index=0, width=size[0], height=size[1], lines=lines)],
                              limits=Limits()))
    qpdf_check(out)
    assert page_sizes(out) == [points]
    with pikepdf.open(out) as pdf:
        page = pdf.pages[0].obj
        assert (float(page["/UserUnit"]) if "/UserUnit" in page else None) == unit
    if text:
        assert pdfium_texts(out)[0].split() == text.split()
        assert poppler_text(out).split() == text.split()
