"""Office files and web pages, converted by LibreOffice and read from their text; hostile packages refused, and a
web page's linked picture never fetched."""

from __future__ import annotations

import io
import re
import shutil
import socket
import subprocess
import threading
import time
import zipfile
from pathlib import Path

import docx
import docx.shared
import openpyxl
import openpyxl.drawing.image
import openpyxl.worksheet.pagebreak
import pptx
import pptx.util
import pytest

from common.documents import office
from tests.documents import hostile
from tests.support.stack import wait_for_job

pytestmark = pytest.mark.timeout(300)


def _docx(path: Path, picture: Path | None = None) -> Path:
    """A heading, a paragraph and a table; with `picture`, the picture and a closing line below them."""
    document = docx.Document()
    document.add_heading("Harbour dues for the winter season", level=1)
    document.add_paragraph("Every vessel pays its dues before it leaves the quay.")
    table = document.add_table(rows=3, cols=2)
    for r, (name, amount) in enumerate([("Vessel", "Dues"), ("Schooner", "120"), ("Trawler", "340")]):
        table.cell(r, 0).text, table.cell(r, 1).text = name, amount
    if picture is not None:
        document.add_picture(str(picture), width=docx.shared.Cm(8))
        document.add_paragraph("Signed by the harbour master.")
    document.save(path)
    return path


def _xlsx(path: Path, picture: Path | None = None) -> Path:
    """A sheet of three rows; with `picture`, the picture below them."""
    book = openpyxl.Workbook()
    sheet = book.active
    for row in [("Cargo", "Tonnes"), ("Granite", 420), ("Timber", 95)]:
        sheet.append(row)
    if picture is not None:
        image = openpyxl.drawing.image.Image(str(picture))
        image.width, image.height = 300, 300 * image.height // image.width
        sheet.add_image(image, "A6")
    book.save(path)
    return path


def _pptx(path: Path) -> Path:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Tide tables"
    slide.placeholders[1].text = "High water comes at dawn in March."
    deck.save(path)
    return path


def _submit(client, path: Path, **data) -> dict:
    response = client.post("/jobs", files={"file": (path.name, path.read_bytes())}, data=data)
    assert response.status_code == 202, response.text
    return wait_for_job(client, response.json()["id"], timeout=180)


def _text(client, job: dict) -> str:
    return client.get(f"/jobs/{job['id']}/result", params={"format": "text"}).text


def _reads_in_order(client, path: Path, expected: list[str], *, sources: list[str]) -> None:
    """The office file's job succeeds with every expected piece in its text, in order (a table's cells, a picture
    in its place), each page read from the source named."""
    job = _submit(client, path)
    assert job["status"] == "succeeded", job
    text = _text(client, job)
    positions = [text.find(piece) for piece in expected]
    assert -1 not in positions, (path.name, text)
    assert positions == sorted(positions), (path.name, text)
    pages = client.get(f"/jobs/{job['id']}/result", params={"format": "json"}).json()["pages"]
    assert [p["source"] for p in pages] == sources, path.name


def test_docx_xlsx_and_pptx_read_their_text_with_the_table_in_order(client, tmp_path):
    cases = [(_docx(tmp_path / "dues.docx"), ["Harbour dues for the winter season", "Every vessel pays its dues",
                                               "Vessel", "Dues", "Schooner", "120", "Trawler", "340"]),
             (_xlsx(tmp_path / "cargo.xlsx"), ["Cargo", "Tonnes", "Granite", "420", "Timber", "95"]),
             (_pptx(tmp_path / "tides.pptx"), ["Tide tables", "High water comes at dawn in March."])]
    for path, expected in cases:
        _reads_in_order(client, path, expected, sources=["text_layer"])


def _lettered(path: Path, words: str) -> Path:
    hostile.lettered(words).save(path)
    return path


def _pptx_with_picture(path: Path, picture: Path) -> Path:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Tide tables"
    # python-pptx's default table style: a header row in white on a dark fill.
    table = slide.shapes.add_table(3, 2, pptx.util.Cm(2), pptx.util.Cm(5), pptx.util.Cm(10), pptx.util.Cm(3)).table
    for r, (port, water) in enumerate([("Port", "High water"), ("Brest", "06:10"), ("Cherbourg", "07:45")]):
        table.cell(r, 0).text, table.cell(r, 1).text = port, water
    slide.shapes.add_picture(str(picture), pptx.util.Cm(14), pptx.util.Cm(5), width=pptx.util.Cm(9))
    deck.save(path)
    return path


def test_docx_xlsx_and_pptx_with_text_a_table_and_a_lettered_picture_read_all_of_it(client, tmp_path):
    picture = _lettered(tmp_path / "sign.png", "LIGHTHOUSE KEEPER")
    cases = [(_docx(tmp_path / "dues.docx", picture),
              ["Harbour dues for the winter season", "Every vessel pays its dues", "Vessel", "Dues", "Schooner",
               "120", "Trawler", "340", "LIGHTHOUSE KEEPER", "Signed by the harbour master."]),
             (_xlsx(tmp_path / "cargo.xlsx", picture),
              ["Cargo", "Tonnes", "Granite", "420", "Timber", "95", "LIGHTHOUSE KEEPER"]),
             (_pptx_with_picture(tmp_path / "tides.pptx", picture),
              ["Tide tables", "Port", "High water", "Brest", "06:10", "Cherbourg", "07:45", "LIGHTHOUSE KEEPER"])]
    for path, expected in cases:
        _reads_in_order(client, path, expected, sources=["mixed"])


class _Listener:
    """A loopback port that records whether anything connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def test_a_web_page_reads_and_its_linked_picture_and_stylesheet_are_never_fetched(client, tmp_path):
    listener = _Listener()
    try:
        page = tmp_path / "notice.html"
        page.write_text(
            "<!DOCTYPE html><html><head>"
            f'<link rel="stylesheet" href="http://127.0.0.1:{listener.port}/style.css"></head><body>'
            "<h1>Notice to mariners</h1><p>The northern light is out of service until Friday.</p>"
            f'<img src="http://127.0.0.1:{listener.port}/track.png">'
            '<img src="http://169.254.169.254/latest/meta-data/">'
            '<img src="file:///etc/passwd"></body></html>')
        job = _submit(client, page)
        assert job["status"] == "succeeded", job
        text = _text(client, job)
        assert "Notice to mariners" in text and "out of service until Friday" in text
        assert "root:" not in text
    finally:
        listener.close()
    assert listener.connections == 0


def _package(content_types: bytes, parts: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", content_types)
        for name, body in parts.items():
            package.writestr(name, body)
    return buffer.getvalue()


DOCX_TYPES = (b'<?xml version="1.0"?><Types><Override PartName="/word/document.xml" ContentType="application/'
              b'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')


def test_hostile_office_files_are_refused_with_a_reason(client, tmp_path):
    macro = _package(DOCX_TYPES.replace(b"wordprocessingml.document.main", b"ms-word.document.macroEnabled.main"),
                     {"word/document.xml": b"<w:document/>", "word/vbaProject.bin": b"\x00" * 64})
    entities = _package(DOCX_TYPES, {"word/document.xml": b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa">'
                                                          b'<!ENTITY b "&a;&a;&a;&a;">]><d>&b;</d>'})
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", DOCX_TYPES)
        with package.open("word/document.xml", "w", force_zip64=True) as part:
            zeros = b"\x00" * (1 << 20)
            for _ in range(520):
                part.write(zeros)
    plain_zip = _package(b"<Types/>", {"notes.txt": b"just a zip"})
    for name, body, status, code in [("macro.docm", macro, 415, "macros_refused"),
                                     ("entities.docx", entities, 422, "xml_entities"),
                                     ("bomb.docx", bomb.getvalue(), 422, "decompression_bomb"),
                                     ("archive.zip", plain_zip, 415, "unsupported_type")]:
        response = client.post("/jobs", files={"file": (name, body)})
        assert response.status_code == status, (name, response.text)
        assert code in response.text, (name, response.text)
        assert "/tmp" not in response.text and "Traceback" not in response.text
    assert client.get("/healthz").status_code == 200


def _soffice_convert(path: Path, to: str, workdir: Path) -> Path:
    """The file as LibreOffice itself writes it in format `to` (its own private profile)."""
    subprocess.run([shutil.which("soffice"), "--headless", "--norestore", f"-env:UserInstallation="
                    f"{(workdir / 'profile').as_uri()}", "--convert-to", to, "--outdir", str(workdir), str(path)],
                   check=True, capture_output=True, timeout=120)
    return workdir / f"{path.stem}.{to}"


def test_files_libreoffice_writes_itself_read_their_text(client, tmp_path):
    made = tmp_path / "made"
    cases = [(_soffice_convert(_docx(tmp_path / "dues.docx"), "odt", made),
              ["Harbour dues for the winter season", "Vessel", "Dues", "Schooner", "120", "Trawler", "340"]),
             (_soffice_convert(_xlsx(tmp_path / "cargo.xlsx"), "ods", made),
              ["Cargo", "Tonnes", "Granite", "420", "Timber", "95"]),
             (_soffice_convert(_pptx(tmp_path / "tides.pptx"), "odp", made),
              ["Tide tables", "High water comes at dawn in March."])]
    for path, expected in cases:
        job = _submit(client, path)
        assert job["status"] == "succeeded", (path.name, job)
        text = _text(client, job)
        positions = [text.find(piece) for piece in expected]
        assert -1 not in positions and positions == sorted(positions), (path.name, text)


def _linked_picture_docx(path: Path, picture: Path, url: str) -> Path:
    """A DOCX whose picture is an external relationship (TargetMode="External") to url, not a part it holds."""
    embedded = _docx(tmp := path.with_suffix(".embedded.docx"), picture)
    with zipfile.ZipFile(embedded) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as linked:
        for part in source.infolist():
            if part.filename.startswith("word/media/"):
                continue
            body = source.read(part)
            if part.filename == "word/_rels/document.xml.rels":
                body = re.sub(rb'Target="media/[^"]+"', f'Target="{url}" TargetMode="External"'.encode(), body)
            elif part.filename == "word/document.xml":
                body = body.replace(b"r:embed=", b"r:link=")
            linked.writestr(part, body)
    tmp.unlink()
    return path


def test_a_docx_whose_picture_links_to_a_listener_reads_and_the_listener_sees_no_connection(client, tmp_path):
    listener = _Listener()
    try:
        path = _linked_picture_docx(tmp_path / "linked.docx", _lettered(tmp_path / "sign.png", "LIGHTHOUSE"),
                                    f"http://127.0.0.1:{listener.port}/sign.png")
        with zipfile.ZipFile(path) as package:
            assert b'TargetMode="External"' in package.read("word/_rels/document.xml.rels")
        job = _submit(client, path)
        assert job["status"] == "succeeded", job
        assert "Signed by the harbour master." in _text(client, job)
    finally:
        listener.close()
    assert listener.connections == 0


def _long_sheet(path: Path, pages: int) -> Path:
    """A spreadsheet of one short row a page: a manual page break after every row."""
    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(1, pages + 1):
        sheet.cell(row=row, column=1, value=f"Row {row}")
        sheet.row_breaks.append(openpyxl.worksheet.pagebreak.Break(id=row))
    book.save(path)
    return path


def test_a_conversion_stops_one_page_past_the_limit(tmp_path):
    pdf = office.convert_to_pdf(_long_sheet(tmp_path / "long.xlsx", 300), "xlsx", tmp_path, timeout_s=120,
                                max_pages=20)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"Pages:\s+21\n", info), info


def test_a_10000_page_spreadsheet_fails_with_a_reason_and_the_worker_lives(client, tmp_path):
    started = time.monotonic()
    job = _submit(client, _long_sheet(tmp_path / "long.xlsx", 10_000))
    assert job["status"] == "failed", job
    assert "more than 2000 pages once converted" in job["error"], job["error"]
    assert time.monotonic() - started < 60  # the conversion stopped at page 2,001, not 10,000
    after = _submit(client, _docx(tmp_path / "after.docx"))
    assert after["status"] == "succeeded", after
    assert "Harbour dues for the winter season" in _text(client, after)
