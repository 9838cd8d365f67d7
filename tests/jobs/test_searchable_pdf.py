"""The searchable PDF writer on pages the test draws: the text layer reads back, in order, where it was printed.

The lines are the CPU engine's blocks (reading order, boxes in the upright page, the rotation it read at).
"""

from __future__ import annotations

import io
import json

import pikepdf
import pytest
from PIL import Image

from common.documents import Limits, render_page
from common.pdf_output import Line, PageLayer, build_pdf
from tests.documents.hostile import pdf_of, text_pdf
from tests.support.pages import CJK_PARAGRAPHS, PARAGRAPHS, SANS_CJK, column_page
from tests.support.pdf_checks import (
    page_sizes,
    pdfium_texts,
    poppler_text,
    poppler_words,
    qpdf_check,
    title_ink_box,
)
from tests.support.text import cer
from worker.engines.cpu import CpuEngine

LIMITS = Limits()


@pytest.fixture(scope="module")
def ocr():
    engine = CpuEngine()
    yield engine
    engine.close()


def read(ocr, image: Image.Image, index: int = 0) -> PageLayer:
    """The page as the CPU engine read it, as the PDF writer takes it."""
    [result] = ocr.read([image])
    lines = [Line(ln["text"], tuple(ln["box"])) for block in result.blocks for ln in block["lines"]]
    return PageLayer(index=index, width=image.width, height=image.height, rotation=result.rotation, lines=lines)


def png(image: Image.Image, path, dpi: int = 150):
    image.save(path, "PNG", dpi=(dpi, dpi))
    return path


SCALE = 72 / 150  # points per pixel of a 150 dpi page
PAGES = {
    "one column": lambda: column_page(1, paragraphs=PARAGRAPHS[:3]),
    "two columns": lambda: column_page(2, paragraphs=PARAGRAPHS[:4], header="Harbour Review, No. 12"),
    "CJK": lambda: column_page(1, paragraphs=CJK_PARAGRAPHS, title="北码头", font=SANS_CJK, title_font=SANS_CJK),
}


def check_title(pdf_path, title: str, box_px, *, rotated: bool = False) -> None:
    """Every title word pdftotext finds lies inside the printed title's ink box: along the line within 4 pt or a
    quarter of the line's height (the detector's box runs past the ink by more the larger the type: 3.8 pt
    before a 41 px CJK title), within 8 pt across it (pdftotext's box runs from the font's ascent to its
    descent, not the ink)."""
    bx0, by0, bx1, by1 = (v * SCALE for v in box_px)
    expected, found = title.split(), poppler_words(pdf_path)
    starts = [i for i in range(len(found)) if [w.text for w in found[i:i + len(expected)]] == expected]
    assert starts, found[:8]
    words = found[starts[0]:starts[0] + len(expected)]
    along, across = (8.0, 4.0) if rotated else (max(4.0, (by1 - by0) / 4), 8.0)
    for word in words:
        x0, y0, x1, y1 = word.box
        assert x0 >= bx0 - along and x1 <= bx1 + along and y0 >= by0 - across and y1 <= by1 + across, (word, box_px)


def check_text(pdf_path, truth: str, *, page: int = 1) -> None:
    """Both extractors give the page's text in reading order."""
    for extracted in (poppler_text(pdf_path, page), pdfium_texts(pdf_path)[page - 1]):
        assert cer(truth, extracted) <= 0.05, extracted


@pytest.mark.parametrize("name", list(PAGES))
def test_image_page_reads_back_in_order_with_the_title_in_place(ocr, tmp_path, name):
    page = PAGES[name]()
    source = png(page.image, tmp_path / "page.png")
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(source, [read(ocr, page.image)], limits=LIMITS))
    qpdf_check(out)
    assert page_sizes(out) == [(612.0, 792.0)]  # US Letter at 150 dpi
    check_text(out, page.truth)
    title = "北码头" if name == "CJK" else "The Northern Quay"
    box = title_ink_box(page.image, skip=name == "two columns")
    check_title(out, title, box)


def test_rotated_scan_gets_its_layer_turned_with_it(ocr, tmp_path):
    page = column_page(1, paragraphs=PARAGRAPHS[:3])
    scanned = page.image.rotate(-90, expand=True)  # scanned sideways: the engine turns it back 90° CCW
    layer = read(ocr, scanned)
    assert layer.rotation == 90
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(png(scanned, tmp_path / "sideways.png"), [layer], limits=LIMITS))
    qpdf_check(out)
    assert page_sizes(out) == [(792.0, 612.0)]
    check_text(out, page.truth)
    u0, v0, u1, v1 = title_ink_box(page.image)
    check_title(out, "The Northern Quay", (scanned.width - v1, u0, scanned.width - v0, u1), rotated=True)


def test_pdf_source_keeps_its_pages_its_vector_text_and_a_failed_page(ocr, tmp_path):
    scan = column_page(1, paragraphs=PARAGRAPHS[:2], title="Scanned Cover")
    pdf_of([scan.image], tmp_path / "scan.pdf", dpi=140)
    vector_text = "Terms and conditions apply to every order placed."
    text_pdf(tmp_path / "vector.pdf", [vector_text])
    pdf_of([column_page(1, paragraphs=PARAGRAPHS[2:3]).image], tmp_path / "annex.pdf", dpi=200)
    source = pikepdf.new()
    for name in ("scan", "vector", "annex"):
        source.pages.extend(pikepdf.open(tmp_path / f"{name}.pdf").pages)
    source.save(tmp_path / "source.pdf")
    src = tmp_path / "source.pdf"

    rendered = [render_page(src, i, limits=LIMITS) for i in range(3)]
    layers = [read(ocr, r.image, index=i) for i, r in enumerate(rendered[:2])]
    layers.append(PageLayer(index=2, width=rendered[2].width, height=rendered[2].height,
                            error="engine: the page could not be read"))
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(src, layers[::-1], limits=LIMITS))
    qpdf_check(out)

    assert page_sizes(out) == page_sizes(src)
    check_text(out, scan.truth)
    # The vector page is the source's page: its own text objects, once, and no second layer on it.
    with pikepdf.open(src) as before, pikepdf.open(out) as after:
        assert after.pages[1].Contents.read_bytes() == before.pages[1].Contents.read_bytes()
        assert "/XObject" not in after.pages[1].Resources or not any(
            str(k).startswith("/OcrqText") for k in after.pages[1].Resources.XObject)
        assert json.loads(str(after.docinfo["/OcrqFailedPages"])) == {"3": "engine: the page could not be read"}
    assert poppler_text(out, 2) == poppler_text(src, 2) and vector_text in poppler_text(out, 2)
    assert pdfium_texts(out)[2].strip() == ""
    assert io.BytesIO(out.read_bytes()).read(5) == b"%PDF-"
