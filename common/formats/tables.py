"""Tables as data: the one model both engines' table blocks are written in, and the document's tables read back.

A table block in a page's JSON is a block of kind "table" with, beside its box and lines:
`rows` and `columns` (counts), `cells` (each with row, col, row_span, col_span, text, box, confidence, header)
and `caption` (or None). Cells are listed row by row; a spanned-over slot has no cell of its own.

Pages stored before this model carry `rows` as a list of rows of cells ({text, box, confidence}); they are
read as the same grid without spans (from_block).

A table that runs over a page break is joined into one (joined): the first table on a page continues the last
table of the page before when both have the same number of columns at the same places across the page, and the
later part starts with no header row, or with the same header again (which is dropped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# A table's caption: a short line just above it that names it (in the service's languages).
_CAPTION = re.compile(r"^\s*(Table|Tab\.|Tabelle|Tableau|Tabla|Tabella|Tabel|Tabell|Tabela|表)\s*[\dIVX]*\b", re.I)


@dataclass
class Cell:
    row: int
    col: int
    text: str = ""
    row_span: int = 1
    col_span: int = 1
    box: list[int] | None = None  # pixels of the upright page image
    confidence: float | None = None
    header: bool = False
    page: int | None = None  # 1-based page, in a document's (joined) tables

    def as_json(self) -> dict:
        out = {"row": self.row, "col": self.col, "row_span": self.row_span, "col_span": self.col_span,
               "text": self.text, "box": self.box, "confidence": self.confidence, "header": self.header}
        return out | ({"page": self.page} if self.page is not None else {})


@dataclass
class Table:
    rows: int
    columns: int
    cells: list[Cell] = field(default_factory=list)
    box: list[int] | None = None
    caption: str | None = None
    pages: list[int] = field(default_factory=list)  # the pages it spans (a document's tables)
    index: int = 1  # its place among the tables that start on its first page, from 1
    width: int | None = None  # its first page's width, which its boxes are in

    def grid(self) -> list[list[str]]:
        """The cells' texts as a rectangle; a spanning cell's text in its top left slot, the slots it covers empty."""
        out = [["" for _ in range(self.columns)] for _ in range(self.rows)]
        for cell in self.cells:
            if cell.row < self.rows and cell.col < self.columns:
                out[cell.row][cell.col] = cell.text
        return out

    def header_rows(self) -> int:
        """How many rows at the top are all header cells."""
        n = 0
        for row in range(self.rows):
            cells = [c for c in self.cells if c.row == row]
            if not cells or not all(c.header for c in cells):
                break
            n += 1
        return n

    def as_json(self) -> dict:
        out = {"rows": self.rows, "columns": self.columns, "cells": [c.as_json() for c in self.cells],
               "box": self.box, "caption": self.caption}
        if self.pages:
            out = {"page": self.pages[0], "pages": self.pages, "index": self.index} | out
        return out

    def name(self) -> str:
        """Its file name in a zip of tables: the page (or pages) and its index there."""
        pages = f"page-{self.pages[0]}" if len(self.pages) < 2 else f"pages-{self.pages[0]}-{self.pages[-1]}"
        return f"{pages}-table-{self.index}" if self.pages else f"table-{self.index}"


def caption_in(text: str) -> str | None:
    """The text, when it reads as a table's caption ("Table 3: Arrivals", "Tabelle 2", "表 1"), else None."""
    text = " ".join(text.split())
    return text if text and len(text) <= 200 and _CAPTION.match(text) else None


def table_fields(table: Table) -> dict:
    """The table's part of its block in a page's JSON: rows, columns, cells, caption."""
    return {"rows": table.rows, "columns": table.columns, "cells": [c.as_json() for c in table.cells],
            "caption": table.caption}


def from_grid(rows: list[list[dict]], *, header_rows: int = 0) -> Table:
    """A table from rows of cells without spans ({text, box, confidence}), ragged rows padded on the right."""
    columns = max((len(r) for r in rows), default=0)
    cells = [Cell(row=r, col=c, text=cell.get("text") or "", box=cell.get("box"), confidence=cell.get("confidence"),
                  header=r < header_rows)
             for r, row in enumerate(rows) for c, cell in enumerate(row)]
    return Table(rows=len(rows), columns=columns, cells=cells)


def from_block(block: dict) -> Table | None:
    """The table a stored block holds, or None for a block that is not a table (or holds no cells)."""
    if block.get("kind") != "table":
        return None
    rows = block.get("rows")
    if isinstance(rows, list):  # stored before the model: rows of cells
        table = from_grid([[c for c in row if isinstance(c, dict)] for row in rows if isinstance(row, list)])
    elif isinstance(block.get("cells"), list) and isinstance(rows, int):
        cells = [Cell(row=int(c["row"]), col=int(c["col"]), text=c.get("text") or "",
                      row_span=int(c.get("row_span") or 1), col_span=int(c.get("col_span") or 1), box=c.get("box"),
                      confidence=c.get("confidence"), header=bool(c.get("header")))
                 for c in block["cells"] if isinstance(c, dict) and "row" in c and "col" in c]
        table = Table(rows=rows, columns=int(block.get("columns") or 0), cells=cells, caption=block.get("caption"))
    else:
        return None
    if not table.rows or not table.columns:
        return None
    table.box = block.get("box")
    return table


def page_tables(number: int, blocks: list[dict] | None, *, width: int | None = None) -> list[Table]:
    """The tables of one page (1-based `number`), in reading order, each cell marked with the page."""
    tables = []
    for block in blocks or []:
        table = from_block(block)
        if table is None:
            continue
        table.pages, table.index, table.width = [number], len(tables) + 1, width
        for cell in table.cells:
            cell.page = number
        tables.append(table)
    return tables


def document_tables(pages) -> list[Table]:
    """The document's tables from its stored pages (in any order), a table continued over a page break joined."""
    tables: list[Table] = []
    for page in sorted(pages, key=lambda p: p.index):
        if page.status == "succeeded":
            tables += page_tables(page.index + 1, page.blocks, width=page.width)
    return joined(tables)


# Column edges of two parts of one table lie within this share of the page's width of each other.
SAME_PLACE = 0.03


def joined(tables: list[Table]) -> list[Table]:
    """The tables with each one that continues the one before it (over a page break) appended to it."""
    out: list[Table] = []
    for table in tables:
        prev = out[-1] if out else None
        if prev is not None and _continues(prev, table):
            _append(prev, table)
        else:
            out.append(table)
    return out


def _continues(prev: Table, table: Table) -> bool:
    last_page, page = prev.pages[-1], table.pages[0]
    # prev is the last table on its last page: any table after it there would stand between them.
    if page != last_page + 1 or table.index != 1 or prev.columns != table.columns:
        return False
    heads = table.header_rows()
    if heads and _header_texts(table, heads) != _header_texts(prev, prev.header_rows() or heads):
        return False  # a header of its own: a new table
    a, b = _spans(prev, last_page), _spans(table, page)
    if a is None or b is None:
        return True  # no boxes to compare: same columns and no new header is enough
    slack = SAME_PLACE * max(prev.width or 1, table.width or 1)
    # Text in a column is aligned left, right or centred: the columns' extents overlap, their edges need not match.
    return all(min(x1, y1) - max(x0, y0) > -slack for (x0, x1), (y0, y1) in zip(a, b, strict=True))


def _header_texts(table: Table, rows: int) -> list[list[str]]:
    return [[" ".join(t.split()).lower() for t in row] for row in table.grid()[:rows]]


def _spans(table: Table, page: int) -> list[tuple[float, float]] | None:
    """Each column's extent across the page, from the cells on `page` that span one column and have a box."""
    boxes: list[list[list[int]]] = [[] for _ in range(table.columns)]
    for cell in table.cells:
        if cell.col_span == 1 and cell.box and cell.page in (page, None) and cell.col < table.columns:
            boxes[cell.col].append(cell.box)
    if not all(boxes):
        return None
    spans = [(min(b[0] for b in col), max(b[2] for b in col)) for col in boxes]
    # Neighbouring columns' extents must not overlap each other, or the check says nothing.
    return spans if all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) else None


def _append(prev: Table, table: Table) -> None:
    heads = table.header_rows()
    offset = prev.rows - heads
    for cell in table.cells:
        if cell.row >= heads:
            cell.row += offset
            prev.cells.append(cell)
    prev.rows += table.rows - heads
    prev.pages.append(table.pages[0])
