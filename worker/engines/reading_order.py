"""Reading order and structure from an OCR engine's line boxes alone: a recursive XY-cut, then blocks.

The page is cut, at each step, at its widest empty band across the whole region: a gutter between
columns (vertical cut: left before right) or a gap between rows (horizontal cut: top before bottom).
A title that spans the columns blocks every gutter above the body, so it is cut off first; then the
body splits into columns, each read top to bottom. Consecutive lines of one column with the pitch of
a paragraph form a block; blocks get a kind from their place and their type size.
"""

from __future__ import annotations

import html
import itertools
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

_BULLET = re.compile(r"^\s*([•·‣▪◦●○■□–—*-]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s+\S")
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]")
_HYPHENS = "-\u2010\u00ad"
_ENDS_PARAGRAPH = re.compile(r"[.!?。！？]\s*$")  # a title's line does not end so
_ENDS_SENTENCE = re.compile(r"[.!?:;。！？：；」』”\"')]\s*$")
_MARKER = re.compile(r"^\s*([•·‣▪◦●○■□–—*-]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)])\s*$")  # a list's marker and nothing else


# The reading order's rules, in the order they run: each a step of Params.steps.
STEPS = ("running_heads", "markers", "spanning_cut", "narrow_gutters", "closed_gutters", "bridged_gutters",
         "key_values", "tables", "table_headings", "sidebars", "headings", "split_headings", "titles",
         "rejoin_columns")


@dataclass(frozen=True)
class Params:
    """The reading order's thresholds, in line heights (the page's median line box height) unless said."""

    # A line at most this many line heights tall is of body size: a header, a footer, a row that may bridge a
    # gutter (a title is 1.35 times or more).
    body: float = 1.2
    # A block of three lines or fewer this many line heights tall or taller is a title: a heading set 1.35 times
    # the body's size has a box 1.25 times as tall, and 1.35 here made 22 of the corpus's 308 headings titles.
    title: float = 1.2
    # A short line this many times as tall as the line under it, ending no sentence, is a heading over that line's
    # paragraph, not its first line; and a table's first row of one such cell is the heading above the table.
    # Headings of 1.1 times the body's size and up were read into their paragraphs (issue 56).
    heading: float = 1.05
    # ...short: at most this share of the next line's width.
    heading_width: float = 0.8
    # A short line ending no sentence, after a line that ends one, this many of the paragraph's line pitches below
    # it, is a heading however tall (and so is a block's first line this many pitches above the next): a heading of
    # 1.1 times the body's size had a box 1.03 times as tall as the line under it, and read into the paragraph
    # around it (issue 56). A paragraph's lines are one pitch apart, give or take the boxes' 0.1.
    heading_gap: float = 1.3
    # A list's marker ("1.", "a)", "•") in a box of its own, this many line heights or fewer left of the line of
    # its row, is that line's start: read apart, the number was a paragraph of its own and its item not an item.
    marker_gap: float = 3.0
    # ...unless it ends within this many line heights of where `narrow_lines` longer lines of its column end: then
    # it is the end of their column (an equation's number flush right, "(3)"), and joined to the next column's
    # line it bridged the gutter and the page read across its columns (apssamp.pdf page 3, issue 51).
    marker_flush: float = 0.5
    # A row gap this wide or wider may end a band of columns (a section break); a narrower one is a paragraph
    # break (one blank line at line spacing up to 1.6 leaves about 2.2).
    section: float = 3.0
    # A gutter narrower than half a line height is more likely a wide space between words (linn.png's gutter is
    # one line high), unless it is this wide or wider and runs the height of `narrow_lines` lines or more of text
    # on either side: a justified page's 24 px gutter in 20 px type left 7 px between the detector's boxes
    # (issue 56), another 5 px where one box reached into it; a 0.3 there read the page across its columns.
    narrow_gutter: float = 0.1
    narrow_lines: int = 4
    # A detector's box may reach this many line heights past its ink into a gutter, closing it: on an AVX2-only CPU
    # the boxes of a justified page's left column reached the right column's and the page read across its columns
    # (CER 0.50; issue 56). Where no gutter shows, one that shows with every box this much shorter at both ends, and
    # has `narrow_lines` lines of text on either side, is taken; each line goes to the side its centre is on.
    reach: float = 0.5
    # How many row gaps from the top and from the bottom may cut off a title or a closing line (_spanning_cut).
    edge_rows: int = 3
    # Running heads and feet lie within this share of the page's height from its top or bottom edge...
    band: float = 0.07
    # ...and a blank this wide parts them from the body: a two-column page with narrow margins had its columns'
    # first and last lines, at the body's own pitch, moved out as headers and footers (issue 56).
    band_gap: float = 1.5
    # Key-value rows (a term on the left, its value on the right): the terms' column is at most this share of
    # the values' width (two columns of text are as wide as each other; a form's terms are short)...
    term_width: float = 0.6
    # ...at least this share of the terms has a value's line beside it, within half a line height...
    term_paired: float = 0.8
    # ...and fewer than this share of the terms start lower-case, as the lines of a column's sentences do.
    term_lower: float = 0.3
    # A line whose text is not known holds several words (running text, not a table's cell) where its box is this
    # many line heights wide: glyphs are about half as wide as the line is high. "XXXX" stand-ins, one capitalised
    # word each, made narrow columns of the vLLM path's layout a table read row by row (issue 56).
    unknown_words: float = 5.0
    # A column left of a gutter whose lines are at most `sidebar_width` times as long as those of the text right
    # of it (medians), their boxes at most `sidebar_size` times as tall, is a sidebar (a box of smaller type beside
    # the main text), read after the main text: read first, as a page's first column, it put 9 of the second
    # generator's 18 sidebar pages out of order (tuning seeds 1-3, CER 0.17-0.33 a seed, issue 56). Its type was
    # 0.8-0.9 times the body's, its boxes' median 0.75-0.96 times as tall, its lines half as long; a page's first
    # column of three, measured against the span of the other two, was taken for one (2 of bench/cpu_corpus.py's
    # 309 pages).
    sidebar_width: float = 0.6
    sidebar_size: float = 0.97
    # The named steps, each of which a bench run may switch off (bench/layout_scores.py --off, issue 56).
    steps: frozenset[str] = frozenset(STEPS)


PARAMS = Params()


@dataclass
class Line:
    text: str | None  # None: not known (a detector's boxes alone, for an engine that reads without positions)
    box: tuple[int, int, int, int]  # axis-aligned, pixels of the upright image
    confidence: float
    key: tuple[float, float, float, float] = (0, 0, 0, 0)  # the same box with the page's skew taken out
    quad: tuple | None = None  # the engine's own box (4 corner points), for an engine that cuts the line again

    @property
    def height(self) -> float:
        return self.key[3] - self.key[1]

    @property
    def centre_x(self) -> float:
        return (self.key[0] + self.key[2]) / 2

    @property
    def centre_y(self) -> float:
        return (self.key[1] + self.key[3]) / 2


@dataclass
class Block:
    kind: str
    lines: list[Line] = field(default_factory=list)
    rows: list[list[Line]] | None = None  # a table's cells, row by row
    whole: bool = False  # given whole by the cut (key-value rows): no line joins it, and it is no title

    @property
    def box(self) -> list[int]:
        boxes = [line.box for line in self.lines]
        return [min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)]

    def as_json(self) -> dict:
        return {"kind": self.kind, "box": self.box,
                "lines": [{"text": ln.text, "box": list(ln.box), "confidence": round(ln.confidence, 4)}
                          for ln in self.lines]}


def lines_from_quads(quads, texts, scores) -> list[Line]:
    """Lines from quadrilaterals (4 corner points, clockwise from top-left), with the page's skew measured
    on the long lines and taken out of their ordering keys, so a tilted scan still shows its gutters."""
    angles = []
    for q in quads:
        dx, dy = q[1][0] - q[0][0], q[1][1] - q[0][1]
        if dx > 3 * abs(q[3][1] - q[0][1]):
            angles.append(math.atan2(dy, dx))
    skew = statistics.median(angles) if angles else 0.0
    cos, sin = math.cos(-skew), math.sin(-skew)
    # Turned about the middle of the text, so lines near the page's edges stay near them.
    cx = statistics.fmean(p[0] for q in quads for p in q) if quads else 0.0
    cy = statistics.fmean(p[1] for q in quads for p in q) if quads else 0.0
    lines = []
    for q, text, score in zip(quads, texts, scores, strict=True):
        rx = [cx + (x - cx) * cos - (y - cy) * sin for x, y in q]
        ry = [cy + (x - cx) * sin + (y - cy) * cos for x, y in q]
        lines.append(Line(text=text, box=_box(q), confidence=float(score), key=(min(rx), min(ry), max(rx), max(ry)),
                          quad=tuple(map(tuple, q))))
    return lines


def cut_line(line: Line, x: float, quads, texts: list[str], scores: list[float]) -> list[Line]:
    """A line's two parts either side of key x, with the quads, texts and scores the engine read them as."""
    keys = [(line.key[0], line.key[1], x, line.key[3]), (x, line.key[1], line.key[2], line.key[3])]
    return [Line(text=text, box=_box(q), confidence=float(score), key=key, quad=tuple(map(tuple, q)))
            for q, text, score, key in zip(quads, texts, scores, keys, strict=True)]


def _box(quad) -> tuple[int, int, int, int]:
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return int(min(xs)), int(min(ys)), math.ceil(max(xs)), math.ceil(max(ys))


# An engine's way to cut a line in two at a blank between key x `lo` and `hi` (a gutter it crosses), read each
# part again, and give back the parts; None where it finds no such blank.
Splitter = Callable[[Line, float, float], "list[Line] | None"]


def order_blocks(lines: list[Line], *, height: int, split: Splitter | None = None,
                 params: Params = PARAMS) -> list[Block]:
    """The page's blocks in reading order: headers first, then the body, footers last.

    Lines of body size wholly in the top or bottom band of the page, a blank of `band_gap` line heights from
    the body, are its headers and footers; they are ordered apart, so a running head never becomes part of a
    column. With `split`, a line of the body that bridges a gutter between columns of text is cut at it
    (_bridged_gutter).
    """
    if not lines:
        return []
    on = params.steps
    unit = statistics.median(line.height for line in lines)
    if "markers" in on:
        lines = _with_markers(lines, unit, params)
    small = [ln for ln in lines if ln.height <= params.body * unit] if "running_heads" in on else []
    heads = _apart([ln for ln in small if ln.key[3] <= params.band * height], lines, unit * params.band_gap, top=True)
    feet = _apart([ln for ln in small if ln.key[1] >= (1 - params.band) * height], lines, unit * params.band_gap,
                  top=False)
    apart = {id(ln) for ln in heads + feet}
    body = [ln for ln in lines if id(ln) not in apart]
    headers, footers = _group(_xy_cut(heads, unit), unit), _group(_xy_cut(feet, unit), unit)
    for block in headers:
        block.kind = "header"
    for block in footers:
        block.kind = "footer"
    blocks = _group(_xy_cut(body, unit, split if "bridged_gutters" in on else None, params), unit, params)
    if "split_headings" in on:
        blocks = _split_headings(blocks, unit, params)
    for block in blocks:
        if ("titles" in on and block.kind == "text" and not block.whole and len(block.lines) <= 3
                and _block_height(block) >= params.title * unit
                and not _ENDS_PARAGRAPH.search(block.lines[-1].text or "")):
            block.kind = "title"
    return headers + (_rejoin_columns(blocks) if "rejoin_columns" in on else blocks) + footers


def _with_markers(lines: list[Line], unit: float, params: Params) -> list[Line]:
    """Lines with each list marker read in a box of its own joined to the line right of it in its row."""
    markers = [ln for ln in lines if ln.text is not None and _MARKER.match(ln.text)]
    if not markers:
        return lines
    joined: dict[int, Line] = {}
    gone: set[int] = set()
    marked = {id(mark) for mark in markers}
    for mark in markers:
        if sum(id(ln) not in marked and ln.key[0] < mark.key[0] - 2 * unit
               and abs(ln.key[2] - mark.key[2]) <= params.marker_flush * unit for ln in lines) >= params.narrow_lines:
            continue
        right = [ln for ln in lines if ln is not mark and id(ln) not in gone and ln.text
                 and abs(ln.centre_y - mark.centre_y) < 0.5 * unit
                 and 0 <= ln.key[0] - mark.key[2] <= params.marker_gap * unit]
        if not right or id(mark) in gone:
            continue
        line = min(right, key=lambda ln: ln.key[0])
        key = (mark.key[0], min(mark.key[1], line.key[1]), line.key[2], max(mark.key[3], line.key[3]))
        box = (min(mark.box[0], line.box[0]), min(mark.box[1], line.box[1]), max(mark.box[2], line.box[2]),
               max(mark.box[3], line.box[3]))
        joined[id(line)] = Line(text=f"{mark.text.strip()} {line.text.strip()}", box=box,
                                confidence=min(mark.confidence, line.confidence), key=key)
        gone |= {id(mark), id(line)}
    return [joined.get(id(ln), ln) for ln in lines if id(ln) in joined or id(ln) not in gone]


def _apart(band: list[Line], lines: list[Line], gap: float, *, top: bool) -> list[Line]:
    """Of a page edge's band of lines, those a blank of `gap` or more parts from the rest of the page: the band's
    innermost line is given back to the body while it lies nearer to it."""
    band = sorted(band, key=lambda ln: ln.key[3] if top else -ln.key[1])
    while band:
        taken = {id(ln) for ln in band}
        rest = [ln for ln in lines if id(ln) not in taken]
        if not rest:
            return band
        blank = (min(ln.key[1] for ln in rest) - max(ln.key[3] for ln in band) if top
                 else min(ln.key[1] for ln in band) - max(ln.key[3] for ln in rest))
        if blank >= gap:
            return band
        band.pop()
    return band


def _rejoin_columns(blocks: list[Block]) -> list[Block]:
    """A paragraph that runs off the foot of a column into the head of the next is one paragraph."""
    out: list[Block] = []
    for block in blocks:
        prev = out[-1] if out else None
        if (prev is not None and prev.kind == block.kind == "text"
                and not _ENDS_SENTENCE.search(prev.lines[-1].text or "")
                and block.lines[0].key[1] < prev.lines[-1].key[1] and block.lines[0].key[0] > prev.lines[-1].key[0]
                and abs(_block_height(prev) - _block_height(block)) < 0.2 * _block_height(prev)):
            prev.lines.extend(block.lines)
        else:
            out.append(block)
    return out


def _xy_cut(lines: list[Line], unit: float, split: Splitter | None = None, params: Params = PARAMS
            ) -> list[Line | Block]:
    """Lines in reading order; a table found on the way comes whole, as a block of rows."""
    out: list[Line | Block] = []
    pending = [lines]  # a stack of regions, the next to read on top (no recursion: a page may have 1,000 lines)
    while pending:
        region = pending.pop()
        parts = _cut(region, unit, split, params)
        if isinstance(parts, tuple):
            pending += [parts[1], parts[0]]
        else:
            out += parts
    return out


def _cut(lines: list[Line], unit: float, split: Splitter | None = None, params: Params = PARAMS
         ) -> tuple[list[Line], list[Line]] | list[Line | Block]:
    """The region cut in two at its widest empty band (first, then the rest), or what it reads as whole."""
    if len(lines) <= 1:
        return list(lines)
    # Boxes of neighbouring lines often touch; shrink them a little so the gap between rows shows.
    rows = _gaps([(ln.key[1] + min(0.15 * unit, 0.25 * ln.height), ln.key[3] - min(0.15 * unit, 0.25 * ln.height))
                  for ln in lines])
    cols = _gaps([(ln.key[0], ln.key[2]) for ln in lines])
    row, col = _widest(rows), _widest(cols)
    on = params.steps
    if col is not None and col[1] - col[0] < 0.5 * unit and not (
            "narrow_gutters" in on and _narrow_gutter(lines, col, unit, params)):
        col = None
    if col is None and "closed_gutters" in on:
        col = _closed_gutter(lines, unit, params)
    if col is None and split is not None and (bridged := _bridged_gutter(lines, unit, split, params)):
        return bridged
    if col is None and row is not None and "spanning_cut" in on:
        row = _spanning_cut(lines, rows, unit, params) or row
    # A gutter the whole region's height is taken before a row gap of paragraph size, however narrow it is: such a
    # gap that lines up across the columns is two paragraph breaks, not the end of a band of columns.
    vertical = False
    if col is not None and (row is None or col[1] - col[0] >= row[1] - row[0]
                            or row[1] - row[0] < params.section * unit or _column_goes_on(lines, col, row, params)):
        cut = (col[0] + col[1]) / 2
        if "key_values" in on and (pairs := _key_values(lines, cut, unit, params)):
            return pairs
        if "tables" in on and _is_table(lines, cut, unit):
            rows_of_cells = line_rows(lines, unit)
            # Rows of one cell over the table's first row of several: its heading (on 68 of the corpus's 72 table
            # pages it was the table's first row, issue 56), or the end of the paragraph above; both at once (a
            # paragraph's last line, then the heading) left the two in the table.
            above: list[Line | Block] = []
            while ("table_headings" in on and len(rows_of_cells) > 2 and len(rows_of_cells[0]) == 1
                   and any(len(row) > 1 for row in rows_of_cells[1:3])):
                [cell] = rows_of_cells.pop(0)
                text = (cell.text or "").strip()
                prose = bool(_ENDS_SENTENCE.search(text)) or text[:1].islower()
                above.append(cell if prose else Block("title", [cell]))
            return above + [Block("table", [ln for row in rows_of_cells for ln in row], rows=rows_of_cells)]
        first = [ln for ln in lines if ln.centre_x < cut]
        vertical = True
    elif row is not None:
        cut = (row[0] + row[1]) / 2
        first = [ln for ln in lines if ln.centre_y < cut]
    else:
        first = []
    if not first or len(first) == len(lines):
        # Rows, each left to right: two boxes of one line may overlap, the second's top a little higher.
        return [ln for row in line_rows(lines, unit) for ln in row]
    first, rest = _first_and_rest(lines, first)
    if vertical and "sidebars" in on and _sidebar(first, rest, params):
        return rest, first
    return first, rest


def _sidebar(left: list[Line], right: list[Line], params: Params) -> bool:
    """The lines left of a gutter are a sidebar beside the text right of it (Params.sidebar_width, sidebar_size):
    shorter lines, of smaller type. The lines are measured, not the sides: beside a page's first column of three,
    the other two span twice its width."""
    if not (_prose(left) and _prose(right)):
        return False
    width = statistics.median(ln.key[2] - ln.key[0] for ln in left)
    if width > params.sidebar_width * statistics.median(ln.key[2] - ln.key[0] for ln in right):
        return False
    return (statistics.median(ln.height for ln in left)
            <= params.sidebar_size * statistics.median(ln.height for ln in right))


def _column_goes_on(lines: list[Line], col: tuple[float, float], row: tuple[float, float], params: Params) -> bool:
    """Above or below the row gap, more than `edge_rows` lines stand on one side of the gutter only: one column
    ended and the other goes on past a break of its own, and the gap is no end of a band of columns (a paper's
    appendix A under its references, read after appendix B beside them: sample-sigconf.pdf page 6, issue 51)."""
    x, y = (col[0] + col[1]) / 2, (row[0] + row[1]) / 2
    for part in ([ln for ln in lines if ln.centre_y < y], [ln for ln in lines if ln.centre_y >= y]):
        sides = {ln.centre_x < x for ln in part}
        if len(sides) == 1 and len(part) > params.edge_rows:
            return True
    return False


def _first_and_rest(lines: list[Line], first: list[Line]) -> tuple[list[Line], list[Line]]:
    taken = {id(ln) for ln in first}
    return first, [ln for ln in lines if id(ln) not in taken]


def _bridged_gutter(lines: list[Line], unit: float, split: Splitter, params: Params = PARAMS
                    ) -> tuple[list[Line], list[Line]] | None:
    """The region cut at a gutter between columns of text that one or two lines bridge, those lines cut in it.

    Where a row's words nearly touch across a gutter, the detector makes the row one box; no empty band then
    runs through the region, and it would be read by rows, across its columns. A band crossed by one or two
    lines of body size, each at the columns' own pitch from lines on both sides, is taken for such a gutter
    when at least four lines of running text stand wholly on each side. Other lines above or below all of them
    (a title, a closing line) stay whole for _spanning_cut."""
    for lo, hi in sorted(_thin_bands(lines, unit), key=lambda band: band[0] - band[1]):
        crossing = [ln for ln in lines if ln.key[0] < hi and ln.key[2] > lo]
        left = [ln for ln in lines if ln.key[2] <= lo]
        right = [ln for ln in lines if ln.key[0] >= hi]
        if len(left) < 4 or len(right) < 4 or not (_prose(left) and _prose(right)):
            continue
        top = min(ln.key[1] for ln in left + right)
        bottom = max(ln.key[3] for ln in left + right)
        pitch = _pitch(left, unit)
        bridges = [ln for ln in crossing if ln.height <= params.body * unit
                   and _near(ln, left, pitch) and _near(ln, right, pitch)]
        apart = [ln for ln in crossing if ln.key[3] <= top or ln.key[1] >= bottom]
        if not bridges or {id(ln) for ln in bridges + apart} != {id(ln) for ln in crossing}:
            continue
        parts = [split(ln, lo, hi) for ln in bridges]
        if any(part is None for part in parts):
            continue
        cut = (lo + hi) / 2
        cut_ids = {id(ln) for ln in bridges}
        whole = [ln for ln in lines if id(ln) not in cut_ids] + [p for part in parts for p in part]
        return _first_and_rest(whole, [ln for ln in whole if ln.centre_x < cut])
    return None


def _thin_bands(lines: list[Line], unit: float) -> list[tuple[float, float]]:
    """Bands across the region, at least a fifth of a line's height wide, that one or two lines cross: of each
    stretch that no more than two cross, its widest part crossed by the fewest (lines that end or begin inside
    a gutter's stretch, ragged edges of the columns, are not what bridges it)."""
    events = sorted([(ln.key[0], 1) for ln in lines] + [(ln.key[2], -1) for ln in lines])
    stretches: list[list[tuple[float, float, int]]] = [[]]
    count, prev = 0, None
    for x, step in events:
        if prev is not None and x > prev:
            if 1 <= count <= 2:
                stretches[-1].append((prev, x, count))
            elif stretches[-1]:
                stretches.append([])
        count += step
        prev = x
    bands = []
    for stretch in filter(None, stretches):
        fewest = min(n for _, _, n in stretch)
        runs = [(run[0][0], run[-1][1]) for n, group in itertools.groupby(stretch, key=lambda s: s[2])
                if n == fewest for run in [list(group)]]
        lo, hi = max(runs, key=lambda run: run[1] - run[0])
        # Boxes reach past their ink: an 8 px gutter in 22 px type left 6 px between boxes on an AMX CPU.
        if hi - lo >= 0.2 * unit:
            bands.append((lo, hi))
    return bands


def _pitch(lines: list[Line], unit: float) -> float:
    """The usual distance between the centres of consecutive lines of a column."""
    centres = sorted(ln.centre_y for ln in lines)
    steps = [b - a for a, b in itertools.pairwise(centres) if 0.5 * unit < b - a < 3 * unit]
    return statistics.median(steps) if steps else 1.5 * unit


def _near(line: Line, others: list[Line], pitch: float) -> bool:
    """A line of `others` lies above or below `line` at about one pitch."""
    return any(abs(ln.centre_y - line.centre_y) <= 1.3 * pitch for ln in others)


def _narrow_gutter(lines: list[Line], col: tuple[float, float], unit: float, params: Params) -> bool:
    """A blank narrower than half a line's height that still runs the height of `narrow_lines` lines of text on
    either side: a gutter between narrow columns in a small font (a word space does not line up down so many
    lines). List numbers and bullets in boxes of their own are not a column of text."""
    cut = (col[0] + col[1]) / 2
    sides = [[ln for ln in lines if (ln.centre_x < cut) == left] for left in (True, False)]
    return col[1] - col[0] >= params.narrow_gutter * unit and all(
        len(side) >= params.narrow_lines and statistics.median(ln.key[2] - ln.key[0] for ln in side) >= 2 * unit
        for side in sides)


def _closed_gutter(lines: list[Line], unit: float, params: Params) -> tuple[float, float] | None:
    """A gutter that boxes reaching past their ink close (Params.reach), or None."""
    trims = [min(params.reach * unit, (ln.key[2] - ln.key[0]) / 2) for ln in lines]
    col = _widest(_gaps([(ln.key[0] + trim, ln.key[2] - trim) for ln, trim in zip(lines, trims, strict=True)]))
    return col if col is not None and _narrow_gutter(lines, col, unit, params) else None


def _spanning_cut(lines: list[Line], rows: list[tuple[float, float]], unit: float, params: Params = PARAMS
                  ) -> tuple[float, float] | None:
    """A row gap near the top or the bottom past which the lines have a gutter: a title (or a closing line) that
    spans the columns and so hides their gutter, cut off first so each column reads whole. Without it the widest
    row gap may be a paragraph break that lines up across the columns, and the page reads across them."""
    edge = params.edge_rows
    for gap, below in [(gap, True) for gap in rows[:edge]] + [(gap, False) for gap in rows[::-1][:edge]]:
        middle = (gap[0] + gap[1]) / 2
        rest = [ln for ln in lines if (ln.centre_y > middle) == below]
        gutter = _widest(_gaps([(ln.key[0], ln.key[2]) for ln in rest]))
        if gutter is not None and gutter[1] - gutter[0] >= 0.5 * unit:
            return gap
    return None


def _widest(gaps: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The widest gap; of gaps as wide within a pixel, the middle one, so that a column of evenly spaced
    lines is halved rather than peeled one line at a time."""
    if not gaps:
        return None
    width = max(hi - lo for lo, hi in gaps)
    ties = [g for g in gaps if g[1] - g[0] >= width - 1.0]
    return ties[len(ties) // 2]


def _gaps(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Empty intervals between the union of spans."""
    gaps, end = [], None
    for lo, hi in sorted(spans):
        if end is not None and lo > end:
            gaps.append((end, lo))
        end = hi if end is None else max(end, hi)
    return gaps


def _key_values(lines: list[Line], cut: float, unit: float, params: Params) -> list[Block] | None:
    """Key-value rows either side of a gutter (a form, a glossary): each term with the value's lines beside and
    under it, one block per term, or None where the region is not such rows.

    A form of several-word terms read as two columns, all terms then all values (issue 56, CER 0.40); a glossary
    read as a table, each wrapped definition's last line a row of its own."""
    terms = sorted((ln for ln in lines if ln.centre_x < cut), key=lambda ln: ln.centre_y)
    values = sorted((ln for ln in lines if ln.centre_x >= cut), key=lambda ln: ln.centre_y)
    if len(terms) < 2 or len(values) < len(terms) or any(ln.text is None for ln in terms):
        return None  # without the terms' text, a page's first column looks the same
    if (gutter := _widest(_gaps([(ln.key[0], ln.key[2]) for ln in values]))) and gutter[1] - gutter[0] >= 0.5 * unit:
        return None  # the values have columns of their own: the first column of a page of several
    term_width = max(ln.key[2] for ln in terms) - min(ln.key[0] for ln in terms)
    value_width = max(ln.key[2] for ln in values) - min(ln.key[0] for ln in values)
    if term_width > params.term_width * value_width or not _prose(values):
        return None
    if sum((ln.text or "").strip()[:1].islower() for ln in terms) >= params.term_lower * len(terms):
        return None
    paired = sum(any(abs(v.centre_y - t.centre_y) < 0.5 * unit for v in values) for t in terms)
    if paired < params.term_paired * len(terms):
        return None
    blocks = [Block("text", [t], whole=True) for t in terms]
    above = []
    for value in values:
        owner = next((b for b in reversed(blocks) if b.lines[0].centre_y - 0.5 * unit <= value.centre_y), None)
        (owner.lines if owner else above).append(value)
    return ([Block("text", above, whole=True)] if above else []) + blocks


def _is_table(lines: list[Line], cut: float, unit: float) -> bool:
    """Short cells on both sides of a gutter whose rows line up: a table, read row by row."""
    left = [ln for ln in lines if ln.centre_x < cut]
    right = [ln for ln in lines if ln.centre_x >= cut]
    if len(left) < 2 or len(right) < 2:
        return False
    if statistics.median(_chars(ln) for ln in lines) > 16:
        return False
    if _prose(left) and _prose(right):
        return False  # narrow columns of running text: short lines too, and they line up as well
    centres = [ln.centre_y for ln in right]
    paired = sum(any(abs(ln.centre_y - c) < 0.5 * unit for c in centres) for ln in left)
    return paired >= 0.6 * min(len(left), len(right))


def _chars(line: Line) -> float:
    """The line's length in characters, or about as many as its box holds where its text is not known."""
    return len(line.text) if line.text is not None else 2 * (line.key[2] - line.key[0]) / max(line.height, 1.0)


def _prose(lines: list[Line], params: Params = PARAMS) -> bool:
    """Most lines read as running text (several words, a lower-case continuation, or a run of CJK characters)
    with few digits; a table's cells are mostly a capitalised word, a number or a code. A line of unknown text
    is running text where its box is wide (Params.unknown_words)."""
    def wordy(line: Line) -> bool:
        if line.text is None:
            return line.key[2] - line.key[0] >= params.unknown_words * line.height
        text = line.text.strip()
        if not text or sum(ch.isdigit() for ch in text) > 0.3 * len(text.replace(" ", "")):
            return False
        return len(text.split()) >= 2 or text[0].islower() or len(_CJK.findall(text)) >= 5

    return sum(wordy(ln) for ln in lines) >= 0.6 * len(lines)


def line_rows(lines: list[Line], unit: float) -> list[list[Line]]:
    """Lines in rows, top to bottom: a line joins the row above while its centre is within half a unit of the
    row's; each row left to right."""
    ordered: list[list[Line]] = []
    for ln in sorted(lines, key=lambda ln: ln.centre_y):
        centre = ln.centre_y
        if ordered and abs(centre - _centre(ordered[-1])) < 0.5 * unit:
            ordered[-1].append(ln)
        else:
            ordered.append([ln])
    for row in ordered:
        row.sort(key=lambda ln: ln.key[0])
    return ordered


def _centre(row: list[Line]) -> float:
    return statistics.mean(ln.centre_y for ln in row)


def _group(ordered: list[Line | Block], unit: float, params: Params = PARAMS) -> list[Block]:
    """Consecutive lines of one column at a paragraph's pitch and type size become one block."""
    blocks: list[Block] = []
    whole = None  # a block the cut gave whole (a table, key-value rows): no line is added to it
    for line in ordered:
        if isinstance(line, Block):
            blocks.append(whole := line)
            continue
        block = blocks[-1] if blocks and blocks[-1] is not whole else None
        bullet = bool(_BULLET.match(line.text or ""))
        if block is not None and block.kind == "text" and len(block.lines) == 1 and _heads(block.lines[0], line,
                                                                                          params):
            block.kind = "title"
        elif block is not None and _continues(block.lines[-1], line, unit):
            indent = line.key[0] - block.lines[-1].key[0]
            if block.kind == "list" and not bullet:
                # An item goes on in lines indented under its text; a line back at the bullet's edge does not.
                start = next(ln for ln in reversed(block.lines) if _BULLET.match(ln.text or ""))
                if line.key[0] > start.key[0] + 0.3 * unit:
                    block.lines.append(line)
                    continue
            elif block.kind == "list" or not bullet and indent < 0.5 * unit:
                # A first line indented by half a line's height or more starts a new paragraph.
                block.lines.append(line)
                continue
        blocks.append(Block("list" if bullet else "text", [line]))
    return blocks


def _split_headings(blocks: list[Block], unit: float, params: Params) -> list[Block]:
    """A paragraph's line that ends no sentence, short and taller than the line after it (_heads) or set apart
    (Params.heading_gap), is a heading: between two paragraphs after a line that ends a sentence (a heading read
    into the paragraph above it, issue 56), or a block's first line set apart from the lines under it."""
    out: list[Block] = []
    for block in blocks:
        lines, start = block.lines, 0
        if block.kind == "text" and not block.whole and len(lines) >= 2:
            pitch = _pitch(lines, unit)
            if (_heads(lines[0], lines[1], params, ratio=0.0)
                    and lines[1].centre_y - lines[0].centre_y >= params.heading_gap * _pitch(lines[1:], unit)):
                out.append(Block("title", [lines[0]]))
                start = 1
            for i in range(max(start, 1), len(lines) - 1):
                if _ENDS_SENTENCE.search(lines[i - 1].text or "") and (
                        _heads(lines[i], lines[i + 1], params)
                        or _heads(lines[i], lines[i + 1], params, ratio=0.0)
                        and lines[i].centre_y - lines[i - 1].centre_y >= params.heading_gap * pitch):
                    out += [Block("text", lines[start:i]), Block("title", [lines[i]])]
                    start = i + 1
        out.append(block if start == 0 else Block("text", lines[start:]))
    return out


def _heads(prev: Line, line: Line, params: Params, *, ratio: float | None = None) -> bool:
    """`prev`, a block's only line, is a heading over `line` (Params.heading, or `ratio` times its height)."""
    if "headings" not in params.steps:
        return False
    ratio = params.heading if ratio is None else ratio
    return (prev.height >= ratio * line.height and not _ENDS_SENTENCE.search(prev.text or "")
            and prev.key[2] - prev.key[0] <= params.heading_width * (line.key[2] - line.key[0])
            and line.key[1] > prev.key[3] - 0.2 * line.height)


def _continues(prev: Line, line: Line, unit: float) -> bool:
    px0, _, px1, py1 = prev.key
    x0, y0, x1, _ = line.key
    small, large = sorted((prev.height, line.height))
    if large > 1.45 * small:  # descenders alone make one line up to a third taller than the next
        return False
    gap = y0 - py1
    if gap < -0.5 * small or gap > 0.9 * large:
        return False
    overlap = min(px1, x1) - max(px0, x0)
    return overlap > 0.3 * min(px1 - px0, x1 - x0)


def starts_list(text: str) -> bool:
    """The text starts with a list's marker ("•", "1.", "a)") and goes on."""
    return bool(_BULLET.match(text))


def _key_box(lines: list[Line]) -> tuple[float, float, float, float]:
    return (min(ln.key[0] for ln in lines), min(ln.key[1] for ln in lines),
            max(ln.key[2] for ln in lines), max(ln.key[3] for ln in lines))


def _block_height(block: Block) -> float:
    return statistics.median(ln.height for ln in block.lines)


# --- markdown ---------------------------------------------------------------------------------


def join_lines(texts: list[str]) -> str:
    """One paragraph from its lines: a word broken by a hyphen at a line's end is made whole, CJK lines
    join without a space."""
    out = ""
    for text in (t.strip() for t in texts):
        if not text:
            continue
        if not out:
            out = text
        elif out[-1] in _HYPHENS and len(out) > 1 and out[-2].isalpha() and text[0].islower():
            out = out[:-1] + text
        elif _CJK.match(out[-1]) and _CJK.match(text[0]):
            out += text
        else:
            out += " " + text
    return out


def to_markdown(blocks: list[Block]) -> str:
    """Markdown that keeps the structure: titles as headings, paragraphs whole, list items, table rows."""
    parts = []
    first_title = next((b for b in blocks if b.kind == "title"), None)
    for block in blocks:
        texts = [ln.text for ln in block.lines]
        if block.kind == "title":
            # The page's first title is its heading; later ones are sections under it.
            parts.append(f"{'#' if block is first_title else '##'} {join_lines(texts)}")
        elif block.kind == "list":
            # A numbered item keeps its number, markdown's own ordered item ("1." or "1)").
            parts.append("\n".join(item if _NUMBERED.match(item) else f"- {_BULLET_MARK.sub('', item, count=1)}"
                                   for item in map(join_lines, list_items(texts))))
        elif block.kind == "table":
            parts.append(_table(block))
        else:
            parts.append(join_lines(texts))
    return "\n\n".join(p for p in parts if p)


_BULLET_MARK = re.compile(r"^\s*[•·‣▪◦●○■□–—*-]\s+")
_NUMBERED = re.compile(r"^\d{1,3}[.)]\s+\S")


def list_items(texts: list[str]) -> list[list[str]]:
    """A list block's lines grouped into items: each starts at a line with a bullet or a number."""
    items: list[list[str]] = []
    for text in texts:
        if _BULLET.match(text) or not items:
            items.append([text])
        else:
            items[-1].append(text)
    return items


def _table(block: Block) -> str:
    body = "".join("<tr>" + "".join(f"<td>{html.escape(ln.text)}</td>" for ln in row) + "</tr>"
                   for row in block.rows or [block.lines])
    return f"<table>{body}</table>"
