"""The searchable PDF writer on pages the test draws: the text layer reads back, in order, where it was printed.

The lines come from rapidocr run here on each upright page, put in reading order by the test (column by
column), standing in for the CPU engine's blocks.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pikepdf
import pytest
from PIL import Image

from common.documents import Limits, render_page
from common.pdf_output import Line, PageLayer, build_pdf
from tests.common.hostile import FONT_CJK, pdf_of, text_pdf
from tests.support.pdf_checks import (
    draw_page,
    page_sizes,
    pdfium_texts,
    poppler_text,
    poppler_words,
    qpdf_check,
)
from tests.support.text import cer

LIMITS = Limits()
BODY = ["The invoice is due within thirty days.", "La facture est payable à réception.",
        "Die Rechnung ist binnen vierzehn Tagen fällig.", "Fakturaen forfalder inden for tredive dage."]

COLUMN_LEFT = ["Net revenue rose", "by nine percent", "over the quarter", "while costs fell", "in every region",
               "but one, where a", "new warehouse", "opened in March."]
COLUMN_RIGHT = ["Les ventes ont", "augmenté à Paris", "et à Lyon grâce", "aux nouveaux", "contrats signés",
                "avec les villes", "de la région en", "début d'année."]


@pytest.fixture(scope="module")
def ocr():
    from rapidocr import RapidOCR

    return RapidOCR(params={"Global.log_level": "warning"})


def lines_of(ocr, image: Image.Image, *, columns: int = 1) -> list[Line]:
    out = ocr(np.asarray(image.convert("RGB")))
    lines = [Line(text, (int(b[:, 0].min()), int(b[:, 1].min()), int(b[:, 0].max()), int(b[:, 1].max())))
             for b, text in zip(out.boxes, out.txts, strict=True)]
    column_width = image.width / columns
    title_bottom = min(line.box[3] for line in lines)
    return sorted(lines, key=lambda ln: (ln.box[3] > title_bottom, int((ln.box[0] + ln.box[2]) / 2 // column_width),
                                         ln.box[1]))


def png(image: Image.Image, path, dpi: int = 144):
    image.save(path, "PNG", dpi=(dpi, dpi))
    return path


def check_title(pdf_path, page, scale: float, box_px, *, rotated: bool = False) -> None:
    """Every title word pdftotext finds lies inside the printed title's ink box: within 4 pt along the line,
    within 8 pt across it (pdftotext's box runs from the font's ascent to its descent, not the ink)."""
    box_pt = tuple(v * scale for v in box_px)
    words = [w for w in poppler_words(pdf_path) if w.text in page.title.split()]
    assert len(words) == len(page.title.split()), words
    along, across = (8.0, 4.0) if rotated else (4.0, 8.0)
    for word in words:
        (x0, y0, x1, y1), (bx0, by0, bx1, by1) = word.box, box_pt
        assert x0 >= bx0 - along and x1 <= bx1 + along and y0 >= by0 - across and y1 <= by1 + across, (word, box_pt)


@pytest.mark.parametrize("columns", [1, 2])
def test_image_page_reads_back_in_order_with_the_title_in_place(ocr, tmp_path, columns):
    # Two columns of short lines with a wide gutter between them.
    body = [COLUMN_LEFT, COLUMN_RIGHT] if columns == 2 else [BODY]
    page = draw_page("Quarterly Report", body)
    source = png(page.image, tmp_path / "page.png")
    layer = PageLayer(index=0, width=page.image.width, height=page.image.height,
                      lines=lines_of(ocr, page.image, columns=columns))
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(source, [layer], limits=LIMITS))
    qpdf_check(out)
    assert page_sizes(out) == [(1190 * 0.5, 1540 * 0.5)]  # 144 dpi: half a point per pixel
    assert cer(page.truth, poppler_text(out)) <= 0.05, poppler_text(out)
    assert cer(page.truth, pdfium_texts(out)[0]) <= 0.05, pdfium_texts(out)
    check_title(out, page, 0.5, page.title_box)


def test_rotated_scan_gets_its_layer_turned_with_it(ocr, tmp_path):
    page = draw_page("Rotated Statement", [BODY])
    scanned = page.image.rotate(-90, expand=True)  # scanned sideways: the engine turns it back 90° CCW
    source = png(scanned, tmp_path / "sideways.png")
    layer = PageLayer(index=0, width=scanned.width, height=scanned.height, rotation=90,
                      lines=lines_of(ocr, page.image))
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(source, [layer], limits=LIMITS))
    qpdf_check(out)
    assert page_sizes(out) == [(1540 * 0.5, 1190 * 0.5)]
    assert cer(page.truth, poppler_text(out)) <= 0.05, poppler_text(out)
    assert cer(page.truth, pdfium_texts(out)[0]) <= 0.05
    u0, v0, u1, v1 = page.title_box
    check_title(out, page, 0.5, (scanned.width - v1, u0, scanned.width - v0, u1), rotated=True)


def test_cjk_page_extracts_as_unicode(ocr, tmp_path):
    page = draw_page("第一季度报告", [["发票应在交货后三十天内付款。", "請求書は納品後三十日以内にお支払いください。"]],
                     font=FONT_CJK)
    source = png(page.image, tmp_path / "cjk.png")
    layer = PageLayer(index=0, width=page.image.width, height=page.image.height, lines=lines_of(ocr, page.image))
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(source, [layer], limits=LIMITS))
    qpdf_check(out)
    assert cer(page.truth, poppler_text(out)) <= 0.05, poppler_text(out)
    assert cer(page.truth, pdfium_texts(out)[0]) <= 0.05, pdfium_texts(out)
    check_title(out, page, 0.5, page.title_box)


def test_pdf_source_keeps_its_pages_its_vector_text_and_a_failed_page(ocr, tmp_path):
    scan = draw_page("Scanned Cover", [BODY])
    pdf_of([scan.image], tmp_path / "scan.pdf", dpi=140)
    vector_text = "Terms and conditions apply to every order placed."
    text_pdf(tmp_path / "vector.pdf", [vector_text])
    pdf_of([draw_page("Unread Annex", [BODY[:1]]).image], tmp_path / "annex.pdf", dpi=200)
    source = pikepdf.new()
    for name in ("scan", "vector", "annex"):
        source.pages.extend(pikepdf.open(tmp_path / f"{name}.pdf").pages)
    source.save(tmp_path / "source.pdf")
    src = tmp_path / "source.pdf"

    rendered = [render_page(src, i, limits=LIMITS) for i in range(3)]
    layers = [PageLayer(index=i, width=r.width, height=r.height, lines=lines_of(ocr, r.image))
              for i, r in enumerate(rendered[:2])]
    layers.append(PageLayer(index=2, width=rendered[2].width, height=rendered[2].height,
                            error="engine: the page could not be read"))
    out = tmp_path / "out.pdf"
    out.write_bytes(build_pdf(src, layers[::-1], limits=LIMITS))
    qpdf_check(out)

    assert page_sizes(out) == page_sizes(src)
    assert cer(scan.truth, poppler_text(out, 1)) <= 0.05, poppler_text(out, 1)
    # The vector page is the source's page: its own text objects, once, and no second layer on it.
    with pikepdf.open(src) as before, pikepdf.open(out) as after:
        assert after.pages[1].Contents.read_bytes() == before.pages[1].Contents.read_bytes()
        assert "/XObject" not in after.pages[1].Resources or not any(
            str(k).startswith("/OcrqText") for k in after.pages[1].Resources.XObject)
        assert json.loads(str(after.docinfo["/OcrqFailedPages"])) == {"3": "engine: the page could not be read"}
    assert poppler_text(out, 2) == poppler_text(src, 2) and vector_text in poppler_text(out, 2)
    assert pdfium_texts(out)[2].strip() == ""
    assert io.BytesIO(out.read_bytes()).read(5) == b"%PDF-"
