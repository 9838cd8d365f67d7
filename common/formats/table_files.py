"""A document's tables as files: CSV (one table, or a zip of one CSV a table) and XLSX (one sheet a table).

XLSX cells that are a plain number in the table's own notation are written as numbers. The notation (which of
`.` and `,` is the decimal mark) is read from the table's cells, since a page says nothing of its locale:
`1.234,56` or `12,5` votes for a decimal comma (German, French, Spanish...), `1,234.56` or `12.50` for a
decimal point; a cell that fits either (`1.234`) takes the table's majority, a point on a tie.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile

from common.formats.tables import Table

# Thousands groups with ' ', a no-break or thin space, or an apostrophe (Swiss) are the same in both notations.
_SPACES = "[ \u00a0\u202f\u2009']"
_POINT = re.compile(rf"^[-+−]?(\d{{1,3}}(,\d{{3}})+|\d{{1,3}}({_SPACES}\d{{3}})+|\d+)(\.\d+)?$")
_COMMA = re.compile(rf"^[-+−]?(\d{{1,3}}(\.\d{{3}})+|\d{{1,3}}({_SPACES}\d{{3}})+|\d+)(,\d+)?$")
_SURELY_POINT = re.compile(r"\d,\d{3}\.\d|\.\d{1,2}$|\.\d{4,}$|\d,\d{3},\d{3}")
_SURELY_COMMA = re.compile(r"\d\.\d{3},\d|,\d{1,2}$|,\d{4,}$|\d\.\d{3}\.\d{3}")


def decimal_mark(table: Table) -> str:
    """`.` or `,`: the decimal mark the table's numbers are written with."""
    point = comma = 0
    for cell in table.cells:
        text = cell.text.strip()
        if _POINT.match(text) and _SURELY_POINT.search(text):
            point += 1
        elif _COMMA.match(text) and _SURELY_COMMA.search(text):
            comma += 1
    return "," if comma > point else "."


def number(text: str, mark: str) -> int | float | None:
    """The cell's value when it is a plain number written with decimal `mark`, else None (text stays text)."""
    text = text.strip()
    if not text or len(text) > 32 or not (_POINT if mark == "." else _COMMA).match(text):
        return None
    if len(text.lstrip("-+−")) > 1 and text.lstrip("-+−")[0] == "0" and text.lstrip("-+−")[1].isdigit():
        return None  # a leading zero: a code (postcode, article number), not a quantity
    digits = re.sub(_SPACES, "", text).replace("−", "-")
    digits = digits.replace(",", "") if mark == "." else digits.replace(".", "").replace(",", ".")
    value = float(digits)
    return int(value) if "." not in digits and abs(value) < 2 ** 53 else value


def csv_text(table: Table) -> str:
    """The table's grid as CSV (RFC 4180, CRLF line ends); a spanning cell's text in its first slot."""
    out = io.StringIO()
    csv.writer(out).writerows(table.grid())
    return out.getvalue()


def csv_body(tables: list[Table]) -> tuple[bytes, str]:
    """One table: its CSV; several (or none): a zip of one CSV a table named by page and index. With the media
    type."""
    if len(tables) == 1:
        return csv_text(tables[0]).encode("utf-8"), "text/csv; charset=utf-8"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for table in tables:
            archive.writestr(f"{table.name()}.csv", csv_text(table).encode("utf-8"))
    return out.getvalue(), "application/zip"


# Excel's limit on a sheet's name, and the characters it refuses in one.
_SHEET_NAME = 31
_NOT_IN_SHEET_NAME = re.compile(r"[\[\]:*?/\\]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def xlsx_body(tables: list[Table]) -> bytes:
    """One sheet a table (an empty sheet where there is none), spans merged, numbers as numbers."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    book = Workbook()
    book.remove(book.active)
    if not tables:
        book.create_sheet("no tables")
    for table in tables:
        sheet = book.create_sheet(_NOT_IN_SHEET_NAME.sub("_", table.name())[:_SHEET_NAME])
        mark = decimal_mark(table)
        taken: set[tuple[int, int]] = set()
        for cell in table.cells:
            if cell.row >= table.rows or cell.col >= table.columns or (cell.row, cell.col) in taken:
                continue  # outside the grid, or under another cell's span: openpyxl refuses to write there
            last_row, last_col = min(cell.row + cell.row_span, table.rows), min(cell.col + cell.col_span, table.columns)
            taken |= {(r, c) for r in range(cell.row, last_row) for c in range(cell.col, last_col)}
            value = None if cell.header else number(cell.text, mark)
            # Control characters make a file Excel will not open.
            target = sheet.cell(row=cell.row + 1, column=cell.col + 1,
                                value=value if value is not None else _CONTROL.sub("", cell.text))
            if value is None:
                target.data_type = "s"  # text read off a page is never a formula, even one that starts with "="
            if cell.header:
                target.font = Font(bold=True)
            if last_row - cell.row > 1 or last_col - cell.col > 1:
                sheet.merge_cells(start_row=cell.row + 1, start_column=cell.col + 1, end_row=last_row,
                                  end_column=last_col)
        if table.caption:
            sheet.oddHeader.center.text = table.caption[:200]
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
