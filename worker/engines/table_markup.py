"""Tables the model wrote, as cells: HTML tables (LightOnOCR's) and markdown pipe tables.

HTML goes through the stdlib's html.parser, which never raises on broken markup; what it cannot make sense of
is dropped, never the page: unclosed cells and rows are closed by the next one, a table never closed by the end
of the text, a table nested in a cell reads as that cell's text, `<br>` (and the end of a paragraph) is a line
break inside the cell, other markup is dropped and its text kept. Cells go on the grid as a browser puts them:
each row's next free slot, a cell's row span and column span taking slots below and to the right.

Each cell keeps the offsets of its content in the text, so the words laid on the page (gpu_blocks) can be found
in it again.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from html.parser import HTMLParser

# No table is this wide or long; a span of 10**9 in hostile markup must not make a grid of that size.
MAX_SPAN = 100
MAX_CELLS = 20_000


@dataclass
class ParsedCell:
    row: int
    col: int
    text: str
    start: int  # its content's offsets in the text given
    end: int
    row_span: int = 1
    col_span: int = 1
    header: bool = False


@dataclass
class ParsedTable:
    rows: int
    columns: int
    cells: list[ParsedCell] = field(default_factory=list)
    caption: str | None = None


@dataclass
class _Raw:
    text: list[str]
    start: int
    end: int
    row_span: int
    col_span: int
    header: bool


class _TableParser(HTMLParser):
    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self._starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == "\n"]
        self._length = len(source)
        self.rows: list[list[_Raw]] = []
        self.caption: list[str] | None = None
        self._depth = 0  # tables open
        self._row: list[_Raw] | None = None
        self._cell: _Raw | None = None
        self._in_caption = False
        self._in_head = False

    def _at(self) -> int:
        line, column = self.getpos()
        return self._starts[line - 1] + column if line - 1 < len(self._starts) else self._starts[-1] + column

    def _close_cell(self) -> None:
        if self._cell is not None:
            self._cell.end = max(self._cell.start, self._at())
            self._cell = None

    def _close_row(self) -> None:
        self._close_cell()
        if self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "table":
            self._depth += 1
            if self._depth > 1:
                self._break()
            return
        if self._depth != 1:
            if tag == "br":
                self._break()
            return
        if tag == "caption":
            self._in_caption, self.caption = True, self.caption or []
        elif tag == "thead":
            self._in_head = True
        elif tag in ("tbody", "tfoot"):
            self._in_head = False
        elif tag == "tr":
            self._close_row()
            self._row = []
        elif tag in ("td", "th"):
            self._close_cell()
            if self._row is None:
                self._row = []
            values = dict(attrs)
            start = self._at() + len(self.get_starttag_text() or "")
            self._cell = _Raw([], start, start, _span(values.get("rowspan")), _span(values.get("colspan")),
                              tag == "th" or self._in_head)
            self._row.append(self._cell)
        elif tag == "br":
            self._break()

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag == "br":
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            if self._depth == 1:
                self._close_row()
            else:
                self._break()
            self._depth = max(0, self._depth - 1)
            return
        if self._depth != 1:
            if tag in ("tr", "p", "div", "li"):
                self._break()
            elif tag in ("td", "th") and self._cell is not None:
                self._cell.text.append(" ")  # an inner table's cells stay apart as words
            return
        if tag == "caption":
            self._in_caption = False
        elif tag == "thead":
            self._in_head = False
        elif tag in ("td", "th"):
            self._close_cell()
        elif tag == "tr":
            self._close_row()
        elif tag in ("p", "div", "li"):
            self._break()

    def handle_data(self, data: str) -> None:
        if self._in_caption and self.caption is not None:
            self.caption.append(data)
        elif self._cell is not None:
            self._cell.text.append(data)

    def _break(self) -> None:
        if self._cell is not None:
            self._cell.text.append("\n")

    def finish(self) -> None:
        self.close()
        if self._cell is not None:  # never closed: its content runs to the end of the text
            self._cell.end = self._length
            self._cell = None
        self._close_row()


def _span(value: str | None) -> int:
    match = re.match(r"\s*(\d{1,6})", value or "")
    return max(1, min(int(match.group(1)), MAX_SPAN)) if match else 1


def _clean(parts: list[str]) -> str:
    """A cell's text: each line's blanks collapsed, empty lines dropped, lines kept apart by a newline."""
    lines = (" ".join(line.split()) for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


def _place(rows: list[list[_Raw]], caption: str | None) -> ParsedTable | None:
    """The raw rows on the grid: each cell at its row's next free slot, spans clipped to the table."""
    taken: set[tuple[int, int]] = set()
    placed: list[tuple[int, int, _Raw]] = []
    for r, row in enumerate(rows):
        col = 0
        for raw in row:
            while (r, col) in taken:
                col += 1
            if len(placed) >= MAX_CELLS:
                break
            # Spans that would run into a slot another cell's span holds stop short of it (browsers overlap them).
            raw.col_span = next((n for n in range(1, raw.col_span) if (r, col + n) in taken), raw.col_span)
            raw.row_span = next((n for n in range(1, raw.row_span)
                                 if any((r + n, col + c) in taken for c in range(raw.col_span))), raw.row_span)
            for dr in range(raw.row_span):
                for dc in range(raw.col_span):
                    taken.add((r + dr, col + dc))
            placed.append((r, col, raw))
            col += raw.col_span
    if not placed:
        return None
    n_rows = len(rows)
    n_cols = max(col + raw.col_span for _, col, raw in placed)
    # A row span past the last row (or a column span past the widest row) ends at the table's edge.
    cells = [ParsedCell(row=r, col=c, text=_clean(raw.text), start=raw.start, end=raw.end,
                        row_span=min(raw.row_span, n_rows - r), col_span=min(raw.col_span, n_cols - c),
                        header=raw.header) for r, c, raw in placed]
    return ParsedTable(rows=n_rows, columns=n_cols, cells=cells, caption=caption)


def parse_html(text: str, *, base: int = 0) -> ParsedTable | None:
    """The first table in the HTML text, offsets shifted by `base`; None when it holds no cell."""
    parser = _TableParser(text)
    try:
        parser.feed(text)
        parser.finish()
    except Exception:  # html.parser is lenient by design; whatever still escapes it must not fail the page
        return None
    caption = _clean(parser.caption) if parser.caption else None
    table = _place(parser.rows, caption or None)
    if table:
        for cell in table.cells:
            cell.start += base
            cell.end += base
    return table


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
_PIPE = re.compile(r"(?<!\\)\|")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


def is_separator(line: str) -> bool:
    """Whether the line is a pipe table's row of dashes under its header (`|---|:--:|`)."""
    return "-" in line and bool(_SEPARATOR.match(line))


def parse_pipes(text: str, *, base: int = 0) -> ParsedTable | None:
    """A markdown pipe table: its first row is a header where a row of dashes follows it; None without cells."""
    rows: list[list[ParsedCell]] = []
    header_rows = 0
    at = 0
    for line in text.splitlines(keepends=True):
        body, start = line.rstrip("\r\n"), at
        at += len(line)
        if not body.strip():
            continue
        if is_separator(body):
            header_rows = len(rows) if len(rows) == 1 else header_rows
            continue
        cuts = [m.start() for m in _PIPE.finditer(body)]
        stripped = body.strip()
        edges = [-1, *cuts, len(body)]
        cells = []
        for a, b in zip(edges, edges[1:]):
            piece = body[a + 1:b]
            if (a == -1 and stripped.startswith("|")) or (b == len(body) and stripped.endswith("|") and not piece.strip()):
                continue  # the blank outside a leading or trailing pipe
            content = _TAG.sub("", _BR.sub("\n", piece)).replace("\\|", "|")
            cells.append(ParsedCell(row=len(rows), col=len(cells), text=_clean([content]),
                                    start=base + start + a + 1, end=base + start + b, header=False))
        if cells:
            rows.append(cells)
        if sum(len(r) for r in rows) >= MAX_CELLS:
            break
    if not rows:
        return None
    for cell in (c for r in rows[:header_rows] for c in r):
        cell.header = True
    columns = max(len(r) for r in rows)
    return ParsedTable(rows=len(rows), columns=columns, cells=[c for r in rows for c in r])


def parse(text: str, *, base: int = 0) -> ParsedTable | None:
    """The table in a block's text, HTML or pipes; None when none can be read (the block stays text)."""
    if text.lstrip().startswith("|"):
        return parse_pipes(text, base=base)
    return parse_html(text, base=base)


def words_in(cells: list[ParsedCell], starts: list[int], ends: list[int]) -> list[list[int]]:
    """Each cell's words: the indices of the words (given by their offsets, in order) inside its content."""
    out = []
    for cell in cells:
        first = bisect_right(ends, cell.start)  # words ending before the content are not in it
        members = []
        for i in range(first, len(starts)):
            if starts[i] >= cell.end:
                break
            if cell.start <= starts[i] and ends[i] <= cell.end:
                members.append(i)
        out.append(members)
    return out
