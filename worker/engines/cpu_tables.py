"""Tables on the CPU path: ruled ones from their rules, borderless ones from how the read lines line up; each
cell's text from the lines the engine already read.

Ruled: the page's long horizontal and vertical strokes (OpenCV morphological opening with a long thin kernel)
are its rules; a cluster of them with at least two of each way is a table's grid, and a rule missing between two
neighbouring slots of the grid joins them into one cell (a span). A line read across a rule is cut at it and
each part read again.

Borderless (or ruled only across): runs of rows in which several lines stand side by side, with blanks down
the run that almost no row crosses (the gutters between columns); a line that crosses one spans the columns
either side. Running text in two columns lines up the same way, so a run whose cells read as prose is no table.

The table replaces its lines in the page's blocks, where its first line was (with_tables).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from common.formats.tables import Cell, Table, caption_in, table_fields
from worker.engines.reading_order import Block, Line, join_lines, line_rows

# The engine's recogniser on parts of the page (quads of 4 corner points): their texts and scores.
Recognise = Callable[[list[np.ndarray]], tuple[list[str], list[float]]]

_RULE_TEXT = re.compile(r"^[\s|!lI_\-–—=.:·]*$")
_NUMERIC = re.compile(r"^[\s\d.,'%€$£¥+\-−/:()]*\d[\s\d.,'%€$£¥+\-−/:()]*$")


@dataclass
class TableBlock(Block):
    """A table found on the page: its lines (for the layout formats) and its cells."""

    table: Table | None = None
    source: list[Line] = field(default_factory=list)  # the page's lines it took (some cut into its `lines`)

    def as_json(self) -> dict:
        out = super().as_json() if self.lines else {"kind": "table", "box": self.table.box, "lines": []}
        return out | {"box": self.table.box} | table_fields(self.table)


def with_tables(array: np.ndarray, blocks: list[Block], *, recognise: Recognise | None = None) -> list[Block]:
    """The page's blocks with each table found on it in place of its lines."""
    lines = [ln for block in blocks for ln in block.lines]
    if len(lines) < 4:
        return blocks
    unit = statistics.median(ln.height for ln in lines)
    tables: list[TableBlock] = []
    taken: set[int] = set()
    for grid in ruled_grids(array, unit):
        inside = [ln for ln in lines if id(ln) not in taken and _inside(ln, grid.box)]
        table = _fill_grid(grid, inside, unit, recognise)
        if table is not None:
            tables.append(table)
            taken |= {id(ln) for ln in table.source}
    for table in borderless(array, [ln for ln in lines if id(ln) not in taken], unit, recognise):
        tables.append(table)
        taken |= {id(ln) for ln in table.source}
    if not tables:
        return blocks
    out = _replace(blocks, tables, unit)
    for before, block in zip(out, out[1:]):
        if isinstance(block, TableBlock) and not isinstance(before, TableBlock) and len(before.lines) <= 2:
            block.table.caption = caption_in(join_lines([ln.text for ln in before.lines]))
    return out


# --- ruled ----------------------------------------------------------------------------------------------


@dataclass
class Grid:
    xs: list[int]  # column boundaries, left to right
    ys: list[int]  # row boundaries, top to bottom
    # whether the rule between slot (r, c) and (r, c + 1), and between (r, c) and (r + 1, c), is there
    between_cols: np.ndarray
    between_rows: np.ndarray

    @property
    def box(self) -> list[int]:
        return [self.xs[0], self.ys[0], self.xs[-1], self.ys[-1]]


def _ink(array: np.ndarray) -> np.ndarray:
    import cv2

    gray = array if array.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(array), cv2.COLOR_RGB2GRAY)
    # Against the neighbourhood's mean, so grey rules and uneven light on a scan still show.
    ink = cv2.adaptiveThreshold(gray, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY_INV, 31, 12)
    # Only strokes thinner than STROKE_WIDTH, darker than the light on both sides: the edge of a photographed
    # page against the desk around it is dark on one side only, and no rule.
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (STROKE_WIDTH, STROKE_WIDTH))
    thin = cv2.morphologyEx(gray, cv2.MORPH_BLACKHAT, kernel) > STROKE_CONTRAST
    return np.where(thin, ink, 0).astype(np.uint8)


# A rule is at most this many pixels thick (a bold rule at 300 dpi is about 6), and darker than the paper around
# it by this much of 255.
STROKE_WIDTH = 15
STROKE_CONTRAST = 12


def ruled_grids(array: np.ndarray, unit: float) -> list[Grid]:
    """The grids of the page's ruled tables: clusters of rules with at least 2 x 2 slots."""
    import cv2

    ink = _ink(array)
    height, width = ink.shape
    # A rule is longer than any stroke of a letter: across, 3 line heights (a short cell's rule is longer); down,
    # one line height (a letter's stem is about 0.6 of its line's box).
    across = max(int(3 * unit), width // 50, 12)
    down = max(int(1.0 * unit), 10)
    horizontal = cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (across, 1)))
    vertical = cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (1, down)))
    # Rules broken by a scan's noise are joined again across a few pixels.
    horizontal = cv2.dilate(horizontal, cv2.getStructuringElement(cv2.MORPH_RECT, (5, 3)))
    vertical = cv2.dilate(vertical, cv2.getStructuringElement(cv2.MORPH_RECT, (3, 5)))
    joined = cv2.dilate(horizontal | vertical, np.ones((5, 5), np.uint8))
    count, _, stats, _ = cv2.connectedComponentsWithStats(joined, connectivity=8)
    grids = []
    for i in range(1, count):
        x, y, w, h, _ = stats[i]
        if w < 4 * unit or h < 2 * unit:
            continue
        grid = _grid(horizontal[y:y + h, x:x + w], vertical[y:y + h, x:x + w], x, y, unit)
        if grid is not None:
            grids.append(grid)
    return grids


def _positions(mask: np.ndarray, axis: int, least: int, merge: float) -> list[tuple[int, int, int]]:
    """The rules in a mask: (middle, start, end) of each run of rows (axis 0) or columns (axis 1) that holds a
    stretch of rule at least `least` long, neighbouring ones closer than `merge` taken as one."""
    import cv2

    count, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    found = []
    for i in range(1, count):
        x, y, w, h, _ = stats[i]
        length = w if axis == 0 else h
        if length >= least:
            found.append((y + h / 2, x, x + w) if axis == 0 else (x + w / 2, y, y + h))
    found.sort()
    out: list[list[float]] = []
    for middle, start, end in found:
        if out and middle - out[-1][0] < merge:
            out[-1] = [(out[-1][0] + middle) / 2, min(out[-1][1], start), max(out[-1][2], end)]
        else:
            out.append([middle, start, end])
    return [(round(m), int(s), int(e)) for m, s, e in out]


def _grid(horizontal: np.ndarray, vertical: np.ndarray, left: int, top: int, unit: float) -> Grid | None:
    height, width = horizontal.shape
    rows = _positions(horizontal, 0, max(int(3 * unit), 12), 0.6 * unit)
    cols = _positions(vertical, 1, max(int(1.0 * unit), 10), 0.6 * unit)
    if len(rows) < 2 or len(cols) < 2:
        return None  # rules one way only: a form's lines, an underline, a box; borderless() may still find it
    ys = [m for m, _, _ in rows]
    xs = [m for m, _, _ in cols]
    # Where the outer rules are missing (ruled inside only), the grid ends where the rules do.
    if xs[0] > 0.6 * unit:
        xs.insert(0, 0)
    if width - xs[-1] > 0.6 * unit:
        xs.append(width)
    if ys[0] > 0.6 * unit:
        ys.insert(0, 0)
    if height - ys[-1] > 0.6 * unit:
        ys.append(height)
    if len(xs) < 3 or len(ys) < 3:
        return None
    between_cols = np.zeros((len(ys) - 1, len(xs) - 2), dtype=bool)
    between_rows = np.zeros((len(ys) - 2, len(xs) - 1), dtype=bool)
    for r in range(len(ys) - 1):
        for c in range(1, len(xs) - 1):
            between_cols[r, c - 1] = _covered(vertical, xs[c], ys[r], ys[r + 1], axis=1)
    for r in range(1, len(ys) - 1):
        for c in range(len(xs) - 1):
            between_rows[r - 1, c] = _covered(horizontal, ys[r], xs[c], xs[c + 1], axis=0)
    # A grid of boxes with no rule inside them is a frame, not a table.
    if not between_cols.any() or not between_rows.any():
        return None
    # Plain ints: the boxes go into the page's JSON, which numpy's integers do not.
    return Grid([int(x + left) for x in xs], [int(y + top) for y in ys], between_cols, between_rows)


def _covered(mask: np.ndarray, at: int, lo: int, hi: int, *, axis: int) -> bool:
    """Whether a rule runs along most of the middle of the segment at `at` from lo to hi."""
    pad = (hi - lo) // 5
    lo, hi = lo + pad, hi - pad
    if hi <= lo:
        return True
    if axis == 1:
        strip = mask[lo:hi, max(0, at - 3):at + 4]
        along = strip.any(axis=1)
    else:
        strip = mask[max(0, at - 3):at + 4, lo:hi]
        along = strip.any(axis=0)
    return bool(along.size) and along.mean() >= 0.6


def _slots(grid: Grid) -> list[tuple[int, int, int, int]]:
    """The grid's cells as (row, col, row_span, col_span): slots joined where no rule parts them, each kept a
    rectangle (a join that would not be one is undone)."""
    n_rows, n_cols = len(grid.ys) - 1, len(grid.xs) - 1
    parent = list(range(n_rows * n_cols))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for r in range(n_rows):
        for c in range(n_cols):
            if c + 1 < n_cols and not grid.between_cols[r, c]:
                parent[find(r * n_cols + c)] = find(r * n_cols + c + 1)
            if r + 1 < n_rows and not grid.between_rows[r, c]:
                parent[find(r * n_cols + c)] = find((r + 1) * n_cols + c)
    groups: dict[int, list[tuple[int, int]]] = {}
    for r in range(n_rows):
        for c in range(n_cols):
            groups.setdefault(find(r * n_cols + c), []).append((r, c))
    out = []
    for members in groups.values():
        r0, r1 = min(r for r, _ in members), max(r for r, _ in members)
        c0, c1 = min(c for _, c in members), max(c for _, c in members)
        if len(members) == (r1 - r0 + 1) * (c1 - c0 + 1):
            out.append((r0, c0, r1 - r0 + 1, c1 - c0 + 1))
        else:
            out += [(r, c, 1, 1) for r, c in members]
    return sorted(out)


def _fill_grid(grid: Grid, lines: list[Line], unit: float, recognise: Recognise | None) -> TableBlock | None:
    slots = _slots(grid)
    rects = {(r, c): [grid.xs[c], grid.ys[r], grid.xs[c + cs], grid.ys[r + rs]] for r, c, rs, cs in slots}
    if len({r for r, _, _, _ in slots}) < 2 or len({c for _, c, _, _ in slots}) < 2:
        return None
    texts: dict[tuple[int, int], list[Line]] = {key: [] for key in rects}
    to_read: list[tuple[tuple[int, int], Line, np.ndarray]] = []
    source = []
    for line in lines:
        if _RULE_TEXT.match(line.text):
            source.append(line)  # a rule read as text
            continue
        mid_y = (line.box[1] + line.box[3]) / 2
        hit = [(key, rect) for key, rect in rects.items() if rect[1] <= mid_y < rect[3]
               and min(rect[2], line.box[2]) - max(rect[0], line.box[0]) > 0.3 * unit]
        if not hit:
            continue
        source.append(line)
        if len(hit) == 1:
            texts[hit[0][0]].append(line)
            continue
        hit.sort(key=lambda kr: kr[1][0])
        for key, rect in hit:  # read across a rule: each part again, or its share of the text
            part = _part(line, max(rect[0] + 3, line.box[0]), min(rect[2] - 3, line.box[2]))
            to_read.append((key, line, part))
    if to_read:
        _read_parts(to_read, texts, recognise)
    cells = []
    for (r, c, rs, cs) in slots:
        members = sorted(texts[(r, c)], key=lambda ln: (ln.box[1], ln.box[0]))
        cells.append(Cell(row=r, col=c, row_span=rs, col_span=cs, box=rects[(r, c)],
                          text=_cell_text(members), confidence=_confidence(members)))
    table = Table(rows=len(grid.ys) - 1, columns=len(grid.xs) - 1, cells=cells, box=grid.box)
    _mark_header(table)
    return _block(table, source, texts)


def _part(line: Line, x0: float, x1: float) -> np.ndarray:
    """The part of the line's quad between page x0 and x1."""
    quad = np.asarray(line.quad if line.quad is not None else
                      [(line.box[0], line.box[1]), (line.box[2], line.box[1]), (line.box[2], line.box[3]),
                       (line.box[0], line.box[3])], dtype=np.float32)
    span = max(line.box[2] - line.box[0], 1)
    a, b = (x0 - line.box[0]) / span, (x1 - line.box[0]) / span
    top, bottom = quad[1] - quad[0], quad[2] - quad[3]
    return np.array([quad[0] + a * top, quad[0] + b * top, quad[3] + b * bottom, quad[3] + a * bottom],
                    dtype=np.float32)


def _read_parts(parts, texts: dict, recognise: Recognise | None) -> None:
    """The parts of lines read across a rule, each read again (or given its share of the line's text)."""
    read, scores = _reread(parts, recognise)
    for (key, line, quad), text, score in zip(parts, read, scores, strict=True):
        text = text.strip(" |")
        if text:
            box = _quad_box(quad)
            texts[key].append(Line(text=text, box=box, confidence=float(score), key=box,
                                   quad=tuple(map(tuple, quad.tolist()))))


def _reread(parts, recognise: Recognise | None) -> tuple[list[str], list[float]]:
    """Each (key, line, quad) part read again, or given its share of its line's text; and each one's score."""
    if recognise is not None:
        return recognise([quad for _, _, quad in parts])
    return _shares(parts), [ln.confidence for _, ln, _ in parts]


def _quad_box(quad: np.ndarray) -> tuple[int, int, int, int]:
    xs, ys = quad[:, 0], quad[:, 1]
    return int(xs.min()), int(ys.min()), int(np.ceil(xs.max())), int(np.ceil(ys.max()))


def _shares(parts) -> list[str]:
    """Each part's share of its line's text, cut at the spaces nearest the parts' edges."""
    out = []
    for _, line, quad in parts:
        span = max(line.box[2] - line.box[0], 1)
        a = (float(quad[:, 0].min()) - line.box[0]) / span
        b = (float(quad[:, 0].max()) - line.box[0]) / span
        out.append(line.text[_near_space(line.text, a):_near_space(line.text, b)])
    return out


def _near_space(text: str, share: float) -> int:
    at = round(share * len(text))
    if at <= 0 or at >= len(text):
        return max(0, min(at, len(text)))
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    return min(spaces, key=lambda i: abs(i - at)) if spaces else at


# --- borderless -----------------------------------------------------------------------------------------


def borderless(array: np.ndarray, lines: list[Line], unit: float, recognise: Recognise | None = None
               ) -> list[TableBlock]:
    """Tables found from the alignment of lines that stand side by side in runs of rows."""
    rows = [row for row in line_rows(lines, unit) if not all(_RULE_TEXT.match(ln.text) for ln in row)]
    tables = []
    run: list[list[Line]] = []
    for row in [*rows, None]:
        if row is not None and (not run or _row_gap(run[-1], row) <= TABLE_ROW_GAP * unit) and not _prose_row(row):
            run.append(row)
            continue
        tables += _tables_in_run(run, unit, array, recognise)
        run = [row] if row is not None and not _prose_row(row) else []
    return tables


# Rows of one table lie closer than this many line heights apart (a blank row is about 2).
TABLE_ROW_GAP = 2.5


def _row_gap(upper: list[Line], lower: list[Line]) -> float:
    return min(ln.key[1] for ln in lower) - max(ln.key[3] for ln in upper)


def _long(text: str) -> bool:
    """A line of a paragraph: five words or more, or forty characters of letters."""
    return len(text.split()) >= 5 or (len(text) >= 40 and not _NUMERIC.match(text))


_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _wordy(text: str) -> bool:
    """Reads as a piece of running text (reading_order's measure): several words, a lower-case continuation or a
    run of CJK characters, with few digits; a table's cells are mostly a capitalised word, a number or a code."""
    text = text.strip()
    if not text or sum(ch.isdigit() for ch in text) > 0.3 * len(text.replace(" ", "")):
        return False
    return len(text.split()) >= 2 or text[0].islower() or len(_CJK.findall(text)) >= 5


def _prose_row(row: list[Line]) -> bool:
    """A row of one line of running text: a paragraph's line, which no table runs through."""
    return len(row) == 1 and _long(row[0].text)


def _tables_in_run(run: list[list[Line]], unit: float, array: np.ndarray | None = None,
                   recognise: Recognise | None = None) -> list[TableBlock]:
    # Single lines above and below the rows that stand side by side are not part of the table.
    while run and len(run[0]) < 2:
        run = run[1:]
    while run and len(run[-1]) < 2 and not _continues_cell(run, unit):
        run = run[:-1]
    if len([row for row in run if len(row) >= 2]) < 3:
        return []
    run, whole = _cut_at_columns(run, unit, array, recognise)
    multi = [row for row in run if len(row) >= 2]
    spans = _ink_spans(array, run)
    columns = _columns(multi, unit, spans)
    if len(columns) < 2:
        return []
    segments = [ln for row in multi for ln in row]
    # Columns of running text, unless a column of numbers runs beside them (an invoice's items and notes).
    prose = sum(_wordy(ln.text) for ln in segments) >= 0.6 * len(segments)
    if prose and not _numeric_column(segments, columns) or sum(_long(ln.text) for ln in segments) > 0.3 * len(segments):
        return []
    if len(columns) == 2 and not any(_NUMERIC.match(ln.text) for ln in segments):
        # Two columns of words alone: a list of terms beside their meanings reads like this too; only short
        # pairs that line up on most rows are a table.
        if statistics.median(len(ln.text) for ln in segments) > 20:
            return []
    table, parts = _cells_from_rows(run, columns, unit, spans)
    if table is None:
        return []
    source = list({id(ln): ln for ln in (whole.get(id(part), part) for part in parts)}.values())
    return [_block(table, source, None, lines=parts)]


# A blank in a line this share of its height wide or wider may part two cells (a word space is about a quarter).
CELL_BLANK = 0.4


def _cut_at_columns(run: list[list[Line]], unit: float, array: np.ndarray | None, recognise: Recognise | None
                    ) -> tuple[list[list[Line]], dict[int, Line]]:
    """The run's rows with each line that runs across the start of a column cut there: where other rows have a
    line start (after a line of their own), and this line has a blank wider than a word space ending there.
    The detector reads cells that stand one space apart (a spreadsheet's columns of dates) as one line.
    Also each part's whole line, by the part's id."""
    starts = [(ln.key[0], r) for r, row in enumerate(run) if len(row) >= 2
              for ln in sorted(row, key=lambda ln: ln.key[0])[1:]]
    cuts: list[tuple[int, Line, list[float]]] = []
    for r, row in enumerate(run):
        for ln in row:
            inside = sorted(x for x, other in starts
                            if other != r and ln.key[0] + 0.5 * unit < x < ln.key[2] - 0.5 * unit)
            if not inside or array is None:
                continue
            blanks = _blanks(array, ln)
            at = sorted({(a, b) for x in inside for a, b in blanks if x - 0.6 * unit <= b <= x + 0.3 * unit})
            if at:
                cuts.append((r, ln, at))
    if not cuts:
        return run, {}
    # Each part from the end of one blank to the start of the next, read with a little margin.
    pieces = [(ln, a, b) for _, ln, at in cuts
              for a, b in zip([ln.key[0], *(end for _, end in at)], [*(start for start, _ in at), ln.key[2]])]
    quads = [_part(ln, *_box_x(ln, a - 0.1 * ln.height, b + 0.1 * ln.height)) for ln, a, b in pieces]
    texts, scores = _reread([(None, ln, q) for (ln, _, _), q in zip(pieces, quads, strict=True)], recognise)
    parts: dict[int, list[Line]] = {}
    for (ln, a, b), quad, text, score in zip(pieces, quads, texts, scores, strict=True):
        parts.setdefault(id(ln), []).append(Line(text=text.strip(), box=_quad_box(quad), confidence=float(score),
                                                 key=(a, ln.key[1], b, ln.key[3]),
                                                 quad=tuple(map(tuple, quad.tolist()))))
    whole: dict[int, Line] = {}
    out = []
    for row in run:
        new = []
        for ln in row:
            got = parts.get(id(ln))
            if got is None or not all(part.text for part in got) or _grouped(got):
                new.append(ln)  # a part read as nothing, or a number's groups: the cut was not between two cells
                continue
            new += got
            whole |= {id(part): ln for part in got}
        out.append(new)
    return out, whole


def _grouped(parts: list[Line]) -> bool:
    """Parts that are one number's digit groups (a space as the thousands separator: 2 135,03; the recogniser
    may drop the narrow spaces after the first: 1 506517,36)."""
    return any(re.fullmatch(r"[-−+]?\d{1,3}", a.text) and re.match(r"\d{3}(\d{3})*(\D|$)", b.text)
               for a, b in zip(parts, parts[1:]))


def _box_x(line: Line, a: float, b: float) -> tuple[float, float]:
    """Key x a and b of the line as page x."""
    span = max(line.key[2] - line.key[0], 1)
    scale = (line.box[2] - line.box[0]) / span
    return line.box[0] + (a - line.key[0]) * scale, line.box[0] + (b - line.key[0]) * scale


def _inked(array: np.ndarray, line: Line) -> tuple[np.ndarray, float]:
    """The pixel columns of the line's box that hold ink (its middle band, darker than halfway between its
    lightest and darkest), and key x per pixel; none where the box is too small or mostly dark."""
    x0, y0, x1, y1 = (max(0, int(v)) for v in line.box)
    crop = array[y0:y1, x0:x1]
    height = y1 - y0
    scale = (line.key[2] - line.key[0]) / max(x1 - x0, 1)
    if crop.size == 0 or height < 6:
        return np.empty(0, dtype=int), scale
    gray = crop.mean(axis=2) if crop.ndim == 3 else crop.astype(float)
    band = gray[height // 6:height - height // 6]
    ink = band < (band.max() + band.min()) / 2
    if ink.mean() > 0.5:
        return np.empty(0, dtype=int), scale
    return np.flatnonzero(ink.any(axis=0)), scale


def _blanks(array: np.ndarray, line: Line) -> list[tuple[float, float]]:
    """The blanks inside a line CELL_BLANK of its height wide or wider, as key x (start, end)."""
    inked, scale = _inked(array, line)
    if inked.size < 2:
        return []
    height = line.box[3] - line.box[1]
    return [(line.key[0] + (a + 1) * scale, line.key[0] + b * scale)
            for a, b in zip(inked, inked[1:]) if b - a > CELL_BLANK * height]


def _ink_spans(array: np.ndarray | None, rows: list[list[Line]]) -> dict[int, tuple[float, float]]:
    """Each line's key x from its first to its last inked pixel column, by the line's id. The detector's boxes of
    cells that stand close (a spreadsheet's dates) overlap where their ink does not."""
    spans = {}
    for row in rows:
        for ln in row:
            inked, scale = _inked(array, ln) if array is not None else (np.empty(0, dtype=int), 1.0)
            spans[id(ln)] = ((ln.key[0] + inked[0] * scale, ln.key[0] + (inked[-1] + 1) * scale) if inked.size
                             else (ln.key[0], ln.key[2]))
    return spans


def _numeric_column(segments: list[Line], columns: list[tuple[float, float]]) -> bool:
    """Some column's lines are mostly numbers."""
    for a, b in columns:
        inside = [ln for ln in segments if a <= ln.centre_x <= b]
        if len(inside) >= 3 and sum(bool(_NUMERIC.match(ln.text)) for ln in inside) >= 0.6 * len(inside):
            return True
    return False


def _continues_cell(run: list[list[Line]], unit: float) -> bool:
    """The run's last row, one line, is the second line of a cell of the row above (close under it, and right of
    its first column)."""
    if len(run) < 2 or len(run[-2]) < 2:
        return False
    line, above = run[-1][0], run[-2]
    return _row_gap(above, run[-1]) < 0.5 * unit and line.key[0] >= above[1].key[0] - 0.5 * unit


# Blanks between the ink of lines narrower than this share of a line's height are not gutters (a word space is
# about a quarter; the detector's padding is trimmed off, so a gutter one space wide still counts).
INK_GUTTER = 0.2


def _columns(rows: list[list[Line]], unit: float, spans: dict[int, tuple[float, float]]
             ) -> list[tuple[float, float]]:
    """The columns' extents: stretches across the run that more rows than a few cover (each line from its first
    inked pixel to its last), between blanks that at most a sixth of the rows cross (a spanning header, a long
    cell)."""
    left = min(spans[id(ln)][0] for row in rows for ln in row)
    right = max(spans[id(ln)][1] for row in rows for ln in row)
    size = int(right - left) + 2
    cover = np.zeros(size, dtype=np.int32)
    for row in rows:
        mark = np.zeros(size, dtype=bool)
        for ln in row:
            a, b = spans[id(ln)]
            mark[int(a - left):int(b - left) + 1] = True
        cover += mark
    crossed = len(rows) // 6
    inside = cover > crossed
    out, start = [], None
    for x, on in enumerate(inside):
        if on and start is None:
            start = x
        elif not on and start is not None:
            out.append([start + left, x - 1 + left])
            start = None
    if start is not None:
        out.append([start + left, size - 1 + left])
    merged: list[list[float]] = []
    for col in out:
        if merged and col[0] - merged[-1][1] < INK_GUTTER * unit:
            merged[-1][1] = col[1]
        else:
            merged.append(col)
    return [(a, b) for a, b in merged]


def _cells_from_rows(run: list[list[Line]], columns: list[tuple[float, float]], unit: float,
                     spans: dict[int, tuple[float, float]]) -> tuple[Table | None, list[Line]]:
    """The run's lines on the grid: each in the columns it overlaps; a row with nothing in the first column that
    follows the row before closer than rows follow each other continues that row's cells (a cell of two lines)."""
    gaps = [_row_gap(a, b) for a, b in zip(run, run[1:])]
    pitch = statistics.median(gaps) if gaps else unit
    placed: list[dict[int, tuple[int, list[Line]]]] = []
    for n, row in enumerate(run):
        slots: dict[int, tuple[int, list[Line]]] = {}
        for ln in row:
            x0, x1 = spans[id(ln)]
            hit = [i for i, (a, b) in enumerate(columns) if min(b, x1) - max(a, x0) > 0.25 * unit]
            if not hit:
                hit = [min(range(len(columns)), key=lambda i: abs((columns[i][0] + columns[i][1]) / 2 - (x0 + x1) / 2))]
            first, span = hit[0], hit[-1] - hit[0] + 1
            if first in slots:
                slots[first][1].append(ln)
                slots[first] = (max(slots[first][0], span), slots[first][1])
            else:
                slots[first] = (span, [ln])
        continues = (placed and n > 0 and 0 not in slots and gaps[n - 1] < 0.6 * pitch
                     and all(c in placed[-1] for c in slots))
        if continues:
            for c, (_, members) in slots.items():
                placed[-1][c][1].extend(members)
        else:
            placed.append(slots)
    cells, source = [], []
    for r, slots in enumerate(placed):
        col = 0
        for c in sorted(slots):
            if c < col:
                continue  # under the span of the cell before
            span, members = slots[c]
            span = min(span, len(columns) - c)
            nxt = [k for k in slots if k > c]
            if nxt:
                span = min(span, min(nxt) - c)
            members.sort(key=lambda ln: (ln.key[1], ln.key[0]))
            source += members
            cells.append(Cell(row=r, col=c, col_span=span, text=_cell_text(members), box=_union(members),
                              confidence=_confidence(members)))
            col = c + span
    if len(placed) < 2:
        return None, []
    table = Table(rows=len(placed), columns=len(columns), cells=cells, box=_union(source))
    _two_row_header(table)
    _mark_header(table)
    return table, source


def _two_row_header(table: Table) -> None:
    """Two rows of words over rows with numbers, each with gaps the other fills, are one header of two rows: a
    cell of the first over a gap in the second spans both rows, a cell of the first followed by gaps the second
    fills spans those columns (a group's name over its columns). No rule says so on a table without rules."""
    if table.rows < 3:
        return
    first = [c for c in table.cells if c.row == 0]
    second = [c for c in table.cells if c.row == 1]
    heads = first + second
    if not first or not second or any(_NUMERIC.match(c.text) for c in heads if c.text):
        return
    if not any(_NUMERIC.match(c.text) for c in table.cells if c.row >= 2 and c.text):
        return
    top = {c.col + k for c in first for k in range(c.col_span)}
    under = {c.col + k for c in second for k in range(c.col_span)}
    every = set(range(table.columns))
    if top == every or under == every or top | under != every:
        return
    for cell in first:
        if cell.col_span == 1 and cell.col not in under:
            cell.row_span = 2
        elif cell.col in under:
            end = cell.col + cell.col_span
            while end < table.columns and end not in top and end in under:
                end += 1
            cell.col_span = end - cell.col
    for cell in heads:
        cell.header = True


# --- shared ---------------------------------------------------------------------------------------------


def _inside(line: Line, box: list[int]) -> bool:
    x, y = (line.box[0] + line.box[2]) / 2, (line.box[1] + line.box[3]) / 2
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _cell_text(members: list[Line]) -> str:
    return join_lines([ln.text for ln in members])


def _confidence(members: list[Line]) -> float | None:
    weights = [max(len(ln.text), 1) for ln in members]
    if not members:
        return None
    return round(sum(ln.confidence * w for ln, w in zip(members, weights, strict=True)) / sum(weights), 4)


def _union(lines: list[Line]) -> list[int]:
    return [min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines), max(ln.box[2] for ln in lines),
            max(ln.box[3] for ln in lines)]


def _mark_header(table: Table) -> None:
    """The first row is a header where none of its cells is a number and a row below holds one, or where every
    cell of the table is words (a header is what such a table starts with)."""
    first = [c for c in table.cells if c.row == 0]
    later = [c for c in table.cells if c.row > 0]
    if not first or not later or any(_NUMERIC.match(c.text) for c in first if c.text):
        return
    if any(_NUMERIC.match(c.text) for c in later if c.text) or all(c.text for c in first):
        for cell in first:
            cell.header = True


def _block(table: Table, source: list[Line], texts: dict | None, lines: list[Line] | None = None) -> TableBlock:
    """The table as a block: its lines row by row (parts of lines cut at rules in place of them), and rows of
    one line a cell for the page's markdown."""
    if texts is not None:
        lines = [ln for cell in table.cells for ln in sorted(texts[(cell.row, cell.col)],
                                                              key=lambda ln: (ln.box[1], ln.box[0]))]
    elif lines is None:
        lines = list(source)
    rows = [[Line(text=c.text, box=tuple(c.box or table.box), confidence=c.confidence or 0.0)
             for c in table.cells if c.row == r] for r in range(table.rows)]
    return TableBlock(kind="table", lines=lines, rows=rows, table=table, source=source)


def _replace(blocks: list[Block], tables: list[TableBlock], unit: float) -> list[Block]:
    """The blocks with the tables' lines taken out, each table where its first line was."""
    owner = {id(ln): table for table in tables for ln in table.source}
    out: list[Block] = []
    placed: set[int] = set()
    for block in blocks:
        kept = [ln for ln in block.lines if id(ln) not in owner]
        for ln in block.lines:
            table = owner.get(id(ln))
            if table is not None and id(table) not in placed:
                if kept and block.lines.index(ln) > block.lines.index(kept[0]):
                    out.append(_kept(block, kept, unit))
                    kept = []
                out.append(table)
                placed.add(id(table))
        if kept:
            out.append(_kept(block, kept, unit))
    return out + [t for t in tables if id(t) not in placed]


def _kept(block: Block, kept: list[Line], unit: float) -> Block:
    """What is left of a block that lost lines to a table; left of a table reading_order found, text (or a title,
    by reading_order's measure: a few lines of larger type)."""
    if len(kept) == len(block.lines):
        return block
    if block.kind != "table":
        return Block(block.kind, kept)
    tall = len(kept) <= 3 and statistics.median(ln.height for ln in kept) >= 1.35 * unit
    return Block("title" if tall else "text", kept)
