"""The document's tables out: CSV (one, or a zip of one a table), XLSX (one sheet a table, numbers as numbers in
the table's notation), a `tables` array in format=json, and a table over a page break joined; read back by the
csv module and openpyxl."""

from __future__ import annotations

import csv
import io
import json
import zipfile

from openpyxl import load_workbook

from common.formats.table_files import decimal_mark, number
from common.formats.tables import Cell, Table, from_block, table_fields
from common.jobs import results
from common.jobs.models import Job, Page

HEAD = ["Artikel", "Menge", "Betrag"]


def _table(rows: list[list[str]], *, header: bool, left: int = 100, top: int = 100) -> dict:
    """A table block as the engines write it, its columns 300 px apart."""
    cells = [Cell(row=r, col=c, text=text, box=[left + 300 * c, top + 40 * r, left + 300 * c + 200, top + 40 * r + 30],
                  confidence=0.99, header=header and r == 0)
             for r, row in enumerate(rows) for c, text in enumerate(row)]
    table = Table(rows=len(rows), columns=len(rows[0]), cells=cells)
    box = [left, top, left + 300 * len(rows[0]), top + 40 * len(rows)]
    return {"kind": "table", "box": box, "confidence": 0.99, "lines": []} | table_fields(table)


def _page(index: int, *blocks: dict) -> Page:
    return Page(index=index, status="succeeded", text="", width=1200, height=1600, engine="cpu", rotation=0,
                blocks=list(blocks), confidence=0.99)


def _text(index: int) -> dict:
    return {"kind": "text", "box": [100, 50, 900, 80], "lines": [{"text": "Rechnung", "box": [100, 50, 900, 80],
                                                                 "confidence": 0.99}]}


JOB = Job(id="job-tables", filename="rechnung.pdf")


def _csv(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8"), newline="")))


def test_one_table_is_one_csv_and_its_cells_read_back():
    pages = [_page(0, _text(0), _table([HEAD, ["Eiche, roh", "3", "1.234,56"]], header=True))]
    body = results.body(JOB, pages, "csv")
    assert results.media_type("csv", body).startswith("text/csv")
    assert _csv(body) == [HEAD, ["Eiche, roh", "3", "1.234,56"]]


def test_several_tables_are_a_zip_named_by_page_and_index():
    pages = [_page(0, _table([["a", "b"], ["1", "2"]], header=False), _table([["x", "y", "z"]], header=False)),
             _page(1, _text(1)), _page(2, _table([["p", "q"]], header=False))]
    body = results.body(JOB, pages, "csv")
    assert results.media_type("csv", body) == "application/zip" and results.extension("csv", body) == "csv.zip"
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert archive.namelist() == ["page-1-table-1.csv", "page-1-table-2.csv", "page-3-table-1.csv"]
        assert _csv(archive.read("page-1-table-2.csv")) == [["x", "y", "z"]]


def test_xlsx_has_a_sheet_a_table_with_numbers_in_the_tables_notation():
    german = _table([HEAD, ["Eiche", "3", "1.234,56"], ["Kalk", "12", "0,50"], ["PLZ", "01067", "=SUM(A1)"]],
                    header=True)
    english = _table([["Item", "Amount"], ["Oak", "1,234.56"], ["Lime", "1.234"]], header=True)
    body = results.body(JOB, [_page(0, german), _page(1, _text(1), english)], "xlsx")
    book = load_workbook(io.BytesIO(body))
    assert book.sheetnames == ["page-1-table-1", "page-2-table-1"]
    de, en = book["page-1-table-1"], book["page-2-table-1"]
    assert [c.value for c in de[1]] == HEAD and de["A1"].font.bold
    assert [c.value for c in de[2]] == ["Eiche", 3, 1234.56]
    assert de["C3"].value == 0.5
    assert de["B4"].value == "01067"  # a leading zero is a code, not a number
    assert de["C4"].value == "=SUM(A1)" and de["C4"].data_type == "s"  # text, never a formula
    assert [c.value for c in en[2]] == ["Oak", 1234.56] and en["B3"].value == 1.234


def test_numbers_follow_the_notation_the_table_is_written_in():
    assert number("1.234,56", ",") == 1234.56 and number("1 234,5", ",") == 1234.5
    assert number("1,234.56", ".") == 1234.56 and number("1'234.50", ".") == 1234.5
    assert number("−12", ".") == -12 and number("12 kg", ".") is None and number("1.234,56", ".") is None
    assert decimal_mark(Table(rows=1, columns=2, cells=[Cell(0, 0, "1.234,56"), Cell(0, 1, "7,5")])) == ","
    assert decimal_mark(Table(rows=1, columns=2, cells=[Cell(0, 0, "1,234"), Cell(0, 1, "7.50")])) == "."


def test_spans_are_merged_in_xlsx_and_their_text_is_in_the_first_slot_of_csv():
    cells = [Cell(0, 0, "Item", row_span=2, header=True), Cell(0, 1, "Amount", col_span=2, header=True),
             Cell(1, 1, "Net", header=True), Cell(1, 2, "Gross", header=True),
             Cell(2, 0, "Oak"), Cell(2, 1, "10"), Cell(2, 2, "12")]
    block = {"kind": "table", "box": None, "lines": []} | table_fields(Table(rows=3, columns=3, cells=cells))
    pages = [_page(0, block)]
    assert _csv(results.body(JOB, pages, "csv")) == [["Item", "Amount", ""], ["", "Net", "Gross"], ["Oak", "10", "12"]]
    sheet = load_workbook(io.BytesIO(results.body(JOB, pages, "xlsx"))).active
    assert sorted(str(r) for r in sheet.merged_cells.ranges) == ["A1:A2", "B1:C1"]


def test_a_table_continued_on_the_next_page_is_joined_with_the_pages_it_spans():
    first = _table([HEAD, ["Eiche", "3", "1.234,56"], ["Kalk", "12", "0,50"]], header=True, top=1300)
    repeated = _table([HEAD, ["Sand", "1", "9,99"]], header=True)  # the header again, then more rows
    bare = _table([["Teer", "2", "5,00"]], header=False)  # no header at all
    pages = [_page(0, _text(0), first), _page(1, repeated), _page(2, bare)]
    doc = json.loads(results.body(JOB, pages, "json"))
    assert len(doc["tables"]) == 1
    table = doc["tables"][0]
    assert (table["pages"], table["rows"], table["columns"]) == ([1, 2, 3], 5, 3)
    assert [c["page"] for c in table["cells"] if c["col"] == 0] == [1, 1, 1, 2, 3]
    assert _csv(results.body(JOB, pages, "csv")) == [HEAD, ["Eiche", "3", "1.234,56"], ["Kalk", "12", "0,50"],
                                                     ["Sand", "1", "9,99"], ["Teer", "2", "5,00"]]
    assert load_workbook(io.BytesIO(results.body(JOB, pages, "xlsx"))).sheetnames == ["pages-1-3-table-1"]


def test_tables_that_differ_are_not_joined():
    head = _table([HEAD, ["Eiche", "3", "1,00"]], header=True)
    other_header = _table([["Name", "Ort", "Land"], ["a", "b", "c"]], header=True)
    other_columns = _table([["a", "b"], ["c", "d"]], header=False)
    moved = _table([["x", "y", "z"]], header=False, left=400)  # its columns elsewhere across the page
    for later in (other_header, other_columns, moved):
        doc = json.loads(results.body(JOB, [_page(0, head), _page(1, later)], "json"))
        assert [t["pages"] for t in doc["tables"]] == [[1], [2]]
    # A page between them without the table: not a continuation.
    doc = json.loads(results.body(JOB, [_page(0, head), _page(1, _text(1)), _page(2, _table([["a", "b", "c"]],
                                                                                             header=False))], "json"))
    assert [t["pages"] for t in doc["tables"]] == [[1], [3]]


def test_a_page_stored_before_the_model_reads_as_a_grid():
    block = {"kind": "table", "box": [0, 0, 10, 10], "lines": [],
             "rows": [[{"text": "Vessel", "box": None, "confidence": None}, {"text": "Tons"}], [{"text": "Mary"}]]}
    table = from_block(block)
    assert (table.rows, table.columns, table.grid()) == (2, 2, [["Vessel", "Tons"], ["Mary", ""]])


def test_no_tables_is_an_empty_zip_and_an_empty_sheet():
    pages = [_page(0, _text(0))]
    body = results.body(JOB, pages, "csv")
    assert results.media_type("csv", body) == "application/zip" and results.extension("csv", body) == "csv.zip"
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert archive.namelist() == []
    assert load_workbook(io.BytesIO(results.body(JOB, pages, "xlsx"))).sheetnames == ["no tables"]
    assert json.loads(results.body(JOB, pages, "json"))["tables"] == []


def test_hocr_writes_a_table_block_as_an_ocr_table_holding_its_lines():
    import xml.etree.ElementTree as ET

    from common.formats import render_layout
    from tests.support.layout_checks import hocr_check

    table = _table([HEAD, ["Kalk", "12", "1.234,56"]], header=True)
    line = {"text": "Kalk 12 1.234,56", "box": [100, 140, 900, 170], "confidence": 0.99,
            "words": [{"text": t, "box": [100 + 300 * i, 140, 300 + 300 * i, 170], "confidence": 0.99}
                      for i, t in enumerate(["Kalk", "12", "1.234,56"])]}
    text = _text(0) | {"lines": [_text(0)["lines"][0] | {"words": [{"text": "Rechnung", "box": [100, 50, 900, 80],
                                                                    "confidence": 0.99}]}]}
    hocr = render_layout("hocr", JOB, [_page(0, text, table | {"lines": [line]})])
    hocr_check(hocr)
    root = ET.fromstring(hocr.split(b"\n", 2)[2])
    ns = "{http://www.w3.org/1999/xhtml}"
    classes = {e.get("class"): e for e in root.iter(f"{ns}div")}
    assert "ocr_table" in root.find(f".//{ns}meta[@name='ocr-capabilities']").get("content").split()
    words = [w.text for w in classes["ocr_table"].iter(f"{ns}span") if w.get("class") == "ocrx_word"]
    assert words == ["Kalk", "12", "1.234,56"]
    assert [w.text for w in classes["ocr_carea"].iter(f"{ns}span") if w.get("class") == "ocrx_word"] == ["Rechnung"]
