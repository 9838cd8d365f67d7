"""Born-digital PDF pages read from their own text (ocr=auto), never reaching the engine; and every trust rule
with a page built to break it, which must be OCR'd instead (its text right, not the layer's)."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from PIL import Image
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import ImageReader
from reportlab.pdfgen import canvas

from common.documents.limits import Limits
from common.documents.text_layer import read_text_layer
from tests.conftest import KEY_A
from tests.documents import hostile
from tests.support.stack import wait_for_job
from worker.engines import text_layer

LEFT = ["The quay was built of granite blocks", "laid in lime mortar and faced with oak", "along its edge by masons."]
RIGHT = ["Ships of deep draught came in on the", "morning tide and left before the", "evening ebb began in winter."]
BODY = [f"Line {i + 1} of the ledger lists tides, ropes and cargo weights." for i in range(25)]


def _born_digital(path: Path) -> Path:
    """A title and two columns on page 1, one column of 25 lines on page 2 (reportlab's standard fonts)."""
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica-Bold", 20)
    c.drawString(72, 780, "Harbour Survey")
    c.setFont("Times-Roman", 11)
    for i, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        c.drawString(72, 740 - i * 14, a)
        c.drawString(320, 740 - i * 14, b)
    c.showPage()
    c.setFont("Times-Roman", 12)
    for i, line in enumerate(BODY):
        c.drawString(72, 780 - i * 16, line)
    c.save()
    return path


def _words(text: str) -> list[str]:
    return [w for w in text.replace("#", " ").split() if w]


def _pdftotext(path: Path) -> list[str]:
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout.split()


def _f1(ours: list[str], theirs: list[str]) -> float:
    from collections import Counter

    common = sum((Counter(ours) & Counter(theirs)).values())
    return 2 * common / (len(ours) + len(theirs)) if ours or theirs else 1.0


def test_a_born_digital_page_reads_as_its_text_in_reading_order(tmp_path):
    pdf = _born_digital(tmp_path / "doc.pdf")
    first, second = (text_layer.read(read_text_layer(pdf, i, limits=Limits())) for i in (0, 1))
    assert first.text.startswith("# Harbour Survey\n")  # the heading, from its size
    paragraphs = first.text.split("\n\n")
    assert paragraphs[1] == " ".join(LEFT) and paragraphs[2] == " ".join(RIGHT)  # column by column
    assert _f1(_words(first.text + " " + second.text), _pdftotext(pdf)) >= 0.999
    line = second.blocks[0]["lines"][0]
    assert line["text"] == BODY[0] and [w["text"] for w in line["words"]] == BODY[0].split()
    assert all(w["box"][0] < v["box"][0] for w, v in zip(line["words"], line["words"][1:]))  # measured word boxes


def test_underscores_apostrophes_and_a_line_end_hyphen_stay_inside_their_words(tmp_path):
    """Glyphs whose tight boxes sit low, high or small (an underscore, an apostrophe, a leader dot) belong to the
    line of the letters beside them, as in the C manuals Debian ships (libtasn1.pdf read "asn1_" "der")."""
    lines = ["asn1_der_coding() doesn\u2019t return ASN1_SUCCESS here", "Contents .......... 12",
             "the element\u2019s value is read at declara-", "tion time, once"]

    def draw(c):
        for i, (font, line) in enumerate(zip(["Courier", "Times-Roman", "Times-Roman", "Times-Roman"], lines,
                                             strict=True)):
            c.setFont(font, 11)
            c.drawString(72, 760 - i * 14, line)

    pdf = _page_with(tmp_path / "p.pdf", draw)
    read = text_layer.read(read_text_layer(pdf, 0, limits=Limits()))
    texts = [line["text"] for block in read.blocks for line in block["lines"]]
    assert texts[0] == lines[0] and texts[2] == lines[2], texts
    assert "<td>" not in read.text and texts[1] == lines[1]  # leader dots are not cells
    # The hyphen is the document's, and stays as pdftotext gives it ("declara-" "tion").
    assert "declara- tion time" in read.text and sorted(_words(read.text)) == sorted(_pdftotext(pdf))


def test_a_bullet_stays_the_documents_glyph(tmp_path):
    items = ["\u2022 Ropes are counted at dawn", "\u2022 Cargo is weighed before it is loaded,", "  and sealed after",
             "\u2022 Tickets are signed by the pilot"]

    def draw(c):
        c.setFont("Helvetica", 11)
        c.drawString(72, 780, "The rules of the quay:")
        for i, item in enumerate(items):
            c.drawString(84 if item.startswith(" ") else 72, 760 - i * 14, item.strip())

    pdf = _page_with(tmp_path / "p.pdf", draw)
    read = text_layer.read(read_text_layer(pdf, 0, limits=Limits()))
    assert "\u2022 Cargo is weighed before it is loaded, and sealed after\n" in read.text, read.text
    assert sorted(_words(read.text)) == sorted(_pdftotext(pdf))


def test_a_listing_in_a_fixed_pitch_font_is_code_not_a_table(tmp_path):
    listing = ["PKIX1 DEFINITIONS ::= BEGIN", "Version    ::=  INTEGER   { v1(0) }", "Serial     ::=  INTEGER",
               "Name       ::=  CHOICE    { rdnSequence }", "Time       ::=  CHOICE    { utcTime }", "END"]

    def draw(c):
        c.setFont("Times-Roman", 11)
        c.drawString(72, 790, "The module reads as follows.")
        c.setFont("Courier", 10)
        for i, line in enumerate(listing):
            c.drawString(90, 770 - i * 12, line)

    pdf = _page_with(tmp_path / "p.pdf", draw)
    read = text_layer.read(read_text_layer(pdf, 0, limits=Limits()))
    assert "<td>" not in read.text and "```\nPKIX1 DEFINITIONS ::= BEGIN\n" in read.text, read.text
    assert sorted(w for w in _words(read.text) if w != "```") == sorted(_pdftotext(pdf))


def _submit(client, path: Path, **data) -> dict:
    response = client.post("/jobs", files={"file": (path.name, path.read_bytes())}, data=data)
    assert response.status_code == 202, response.text
    return wait_for_job(client, response.json()["id"], timeout=120)


def _scan_with_stamp(path: Path) -> Path:
    """A scanned page (a picture of text) with a stamped page number in real text."""
    image = hostile.text_page("Minutes of the harbour board meeting held in March", size=(850, 1100), font_size=40)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    c = canvas.Canvas(str(path), pagesize=A4)
    c.drawImage(ImageReader(io.BytesIO(buffer.getvalue())), 0, 0, width=A4[0], height=A4[1])
    c.setFont("Helvetica", 9)
    c.drawString(A4[0] / 2, 20, "17")
    c.save()
    return path


def test_through_the_stack_text_pages_never_reach_the_engine_and_scans_do(gpu_stack, tmp_path):
    stack, server = gpu_stack
    client = stack.client(KEY_A)
    server.reset()
    pdf = _born_digital(tmp_path / "doc.pdf")
    job = _submit(client, pdf)
    assert job["status"] == "succeeded" and job["ocr"] == "auto"
    assert server.requests() == []  # not one page went to the engine
    result = client.get(f"/jobs/{job['id']}/result", params={"format": "json"}).json()
    assert [p["source"] for p in result["pages"]] == ["text_layer", "text_layer"]
    assert [p["engine"] for p in result["pages"]] == ["text_layer", "text_layer"]
    text = " ".join(p["text"] for p in result["pages"])
    assert _f1(_words(text), _pdftotext(pdf)) >= 0.999
    listed = client.get(f"/jobs/{job['id']}/pages").json()
    assert [p["source"] for p in listed["pages"]] == ["text_layer", "text_layer"]

    always = _submit(client, pdf, ocr="always")
    assert always["status"] == "succeeded" and len(server.requests()) == 2  # today's behaviour, on request
    forced = client.get(f"/jobs/{always['id']}/result", params={"format": "json"}).json()
    assert [p["source"] for p in forced["pages"]] == ["ocr", "ocr"]

    server.reset()
    scan = _submit(client, _scan_with_stamp(tmp_path / "scan.pdf"))
    assert scan["status"] == "succeeded" and len(server.requests()) == 1
    page = client.get(f"/jobs/{scan['id']}/result", params={"format": "json"}).json()["pages"][0]
    assert page["source"] == "ocr" and "harbour" in page["text"].lower()

    never = _submit(client, tmp_path / "scan.pdf", ocr="never")
    assert never["status"] == "failed" and len(server.requests()) == 1
    assert "no text layer to read (ocr=never)" in never["page_errors"][0]["error"]
    assert client.post("/jobs", files={"file": ("x.pdf", pdf.read_bytes())}, data={"ocr": "sometimes"}).status_code == 422


def _page_with(path: Path, draw) -> Path:
    c = canvas.Canvas(str(path), pagesize=A4)
    draw(c)
    c.save()
    return path


def _invisible(c):
    """What an OCR program's layer looks like: render mode 3 text (here wrong) over a picture of the page."""
    image = hostile.text_page("The tide tables for April", size=(850, 1100), font_size=40)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    c.drawImage(ImageReader(io.BytesIO(buffer.getvalue())), 0, 0, width=A4[0], height=A4[1])
    text = c.beginText(72, 700)
    text.setTextRenderMode(3)
    text.setFont("Helvetica", 30)
    text.textLine("Tho tiolo tablos far Aqril")
    c.drawText(text)


def _white(c):
    c.setFont("Helvetica", 14)
    c.drawString(72, 760, "Visible words of the notice")
    c.setFillColorRGB(1, 1, 1)
    for i in range(10):
        c.drawString(72, 700 - i * 16, f"hidden keyword stuffing line {i}")


def _clipped(c):
    c.setFont("Helvetica", 14)
    c.drawString(72, 760, "On the page")
    for i in range(10):
        c.drawString(-2000, 700 - i * 16, f"off the page entirely {i}")


@pytest.mark.parametrize(("draw", "reason"), [
    (_invisible, "an invisible text layer (another program's OCR)"),
    (_white, "white text on the page"),
    (_clipped, "text clipped off the page"),
])
def test_each_untrusted_layer_sends_the_page_to_ocr(tmp_path, draw, reason):
    layer = read_text_layer(_page_with(tmp_path / "p.pdf", draw), 0, limits=Limits())
    assert not layer.trusted and layer.reason == reason, layer.counts


def test_white_text_on_a_dark_fill_is_seen_and_trusted(tmp_path):
    def banner(c):
        c.setFont("Helvetica", 14)
        c.drawString(72, 760, "Visible words of the notice")
        c.setFillColorRGB(0.1, 0.2, 0.5)
        c.rect(60, 690, 300, 40, fill=1, stroke=0)
        c.setFillColorRGB(1, 1, 1)
        c.drawString(72, 705, "A table's header row in white on blue")

    layer = read_text_layer(_page_with(tmp_path / "p.pdf", banner), 0, limits=Limits())
    assert layer.trusted and layer.counts["white"] == 0, layer.counts


def test_a_scan_with_a_stamped_page_number_is_not_trusted(tmp_path):
    layer = read_text_layer(_scan_with_stamp(tmp_path / "scan.pdf"), 0, limits=Limits())
    assert layer.counts["chars"] == 2 and layer.counts["picture_share"] > 0.9
    assert not layer.trusted and "scan" in layer.reason


def test_an_image_pdf_has_no_text_layer(tmp_path):
    pdf = hostile.pdf_of([Image.new("RGB", (400, 500), "white")], tmp_path / "blank.pdf")
    assert read_text_layer(pdf, 0, limits=Limits()).reason == "no text layer"


def test_a_comma_after_a_typewriter_word_and_a_quote_before_a_comma_break_words_as_pdftotext_does(tmp_path):
    """Texinfo sets an argument in typewriter type and the comma after it in the text face, a little apart
    (nettle.pdf: "*ctx ,"); and a closing quote's tight box and a comma's share no height ("xdg", in
    fontconfig-user.pdf was cut into two lines there)."""

    def draw(c):
        c.setFont("Times-Roman", 11)
        c.drawString(72, 760, "void aes_encrypt (struct aes_ctx")
        x = 72 + c.stringWidth("void aes_encrypt (struct aes_ctx ", "Times-Roman", 11)
        c.setFont("Courier-Bold", 12)
        c.drawString(x, 760, "*ctx")
        x += c.stringWidth("*ctx", "Courier-Bold", 12) + 0.15 * 11
        c.setFont("Times-Roman", 11)
        c.drawString(x, 760, ", size_t length)")
        c.drawString(72, 740, 'If \u2019prefix\u2019 is set to "xdg", the value in the variable is used.')

    pdf = _page_with(tmp_path / "p.pdf", draw)
    read = text_layer.read(read_text_layer(pdf, 0, limits=Limits()))
    texts = [line["text"] for block in read.blocks for line in block["lines"]]
    assert texts[1] == 'If \u2019prefix\u2019 is set to "xdg", the value in the variable is used.', texts
    assert "*ctx , size_t" in texts[0] and sorted(_words(read.text)) == sorted(_pdftotext(pdf))


def test_a_character_beyond_the_bmp_is_one_character_with_its_box(tmp_path):
    """pdfium asked glyph by glyph gives a code point beyond the BMP (TeX's math italic, an emoji) as two UTF-16
    halves: a page of ACM's sample paper stored them as lone surrogates, and its write failed on every attempt.
    Chromium prints the page (reportlab's ToUnicode map cuts such code points to 16 bits)."""
    line = "Let \U0001d465 and \U0001d466 be in \U0001d538 for every round of the game."
    html = tmp_path / "p.html"
    html.write_text(f"<html><body style=\"font-family:'Noto Sans Math';font-size:16px\">"
                    + f"<p>{line}</p>" * 6 + "</body></html>", encoding="utf-8")
    pdf = tmp_path / "p.pdf"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", html.as_uri()], check=True, capture_output=True, timeout=60)
    layer = read_text_layer(pdf, 0, limits=Limits())
    read = text_layer.read(layer)
    assert layer.trusted, layer.reason
    assert not any("\ud800" <= c <= "\udfff" for c in read.text), ascii(read.text)
    assert read.text.count("\U0001d465") == 6 and read.text.count("\U0001d538") == 6, ascii(read.text)
    words = [w for block in read.blocks for ln in block["lines"] for w in ln["words"]]
    x, the = (next(w for w in words if w["text"] == t) for t in ("\U0001d465", "the"))
    assert x["box"][0] < x["box"][2] < the["box"][0]  # its own box, on the line before "the"


def test_a_lone_surrogate_from_an_engine_is_stored_as_a_replacement_character():
    from common.jobs.states import storable

    assert storable("a\ud835b") == "a\ufffdb"
    assert storable({"lines": [{"text": "\ud835\udc65"}]}) == {"lines": [{"text": "\U0001d465"}]}
    assert storable(["plain", 3]) == ["plain", 3]


def test_two_columns_with_superscripts_and_an_equation_number_read_column_by_column(tmp_path):
    """A TeX paper's left column: a formula whose superscripts pdfium breaks into lines of a glyph each, and its
    number "(1)" flush right, a gutter from the right column's line. The glyphs were read as a table's cells and
    the number as a list marker of the right column's line, both across the gutter (apssamp.pdf page 3)."""
    left = [f"The left column's line {i + 1:02} tells of tides and ropes." for i in range(14)]
    right = [f"The right column's line {i + 1} counts the cargo in." for i in range(16)]

    def draw(c):
        c.setFont("Times-Roman", 10)
        edge = 60 + c.stringWidth(left[0], "Times-Roman", 10)  # the left column's lines all end here
        for i, line in enumerate(left):
            c.drawString(60, 780 - i * 12 - (36 if i >= 7 else 0), line)
        for i, line in enumerate(right):
            c.drawString(edge + 20, 780 - i * 12, line)
        formula = c.beginText(90, 780 - 7 * 12 - 6)
        for base in ("g", "g", "g", "q", "q"):
            formula.setFont("Times-Roman", 10)
            formula.setRise(0)
            formula.textOut(base)
            formula.setFont("Times-Roman", 7)
            formula.setRise(4)
            formula.textOut("+")
            formula.setRise(0)
            formula.setFont("Times-Roman", 10)
            formula.textOut(" \u2192 " if base == "g" else " ")
        c.drawText(formula)
        c.drawRightString(edge, 780 - 9 * 12, "(1)")  # on the baseline of a line of the right column

    pdf = _page_with(tmp_path / "p.pdf", draw)
    read = text_layer.read(read_text_layer(pdf, 0, limits=Limits()))
    flat = " ".join(read.text.split())
    assert "<td>" not in read.text, read.text
    at = [flat.find(line) for line in left + right]
    assert all(a >= 0 for a in at) and at == sorted(at), read.text  # the left column whole, then the right
    assert "g+ \u2192 g+" in flat, read.text  # the formula on one line, as pdftotext reads it
    assert 0 <= flat.find("(1)") < at[len(left)], read.text  # the number is the left column's, not a list's marker


def test_a_column_that_goes_on_past_a_break_beside_a_short_column_is_read_first(tmp_path):
    """The left column's references, a section break, then appendix A under them; appendix B beside them in the
    right column, which ends early: the break runs across the page, and the page read A after B (sample-sigconf.pdf
    page 6)."""
    references = [f"[{i + 1}] A reference to the harbour records of year {1900 + i}." for i in range(12)]
    appendix_a = [f"Appendix A's line {i + 1} tells of tides and ropes here." for i in range(6)]
    appendix_b = [f"Appendix B's line {i + 1} counts the cargo in here." for i in range(6)]

    def draw(c):
        c.setFont("Times-Roman", 10)
        for i, line in enumerate(references):
            c.drawString(60, 780 - i * 12, line)
        c.setFont("Times-Bold", 12)
        c.drawString(60, 780 - 12 * 12 - 48, "A RESEARCH METHODS")
        c.drawString(320, 780, "B ONLINE RESOURCES")
        c.setFont("Times-Roman", 10)
        for i, line in enumerate(appendix_a):
            c.drawString(60, 780 - 12 * 12 - 66 - i * 12, line)
        for i, line in enumerate(appendix_b):
            c.drawString(320, 762 - i * 12, line)

    pdf = _page_with(tmp_path / "p.pdf", draw)
    read = text_layer.read(read_text_layer(pdf, 0, limits=Limits()))
    flat = " ".join(read.text.split())
    at = [flat.find(line) for line in references + ["A RESEARCH METHODS"] + appendix_a + ["B ONLINE RESOURCES"]
          + appendix_b]
    assert all(a >= 0 for a in at) and at == sorted(at), read.text
