"""Pages with one table drawn on them, and the table's exact cells: for the CPU path's table tests and the tables
bench (bench/tables.py).

A table is rows of cells; a cell is its text (a newline breaks it into lines) or (text, row_span, col_span). A
spanned-over slot is None. `rules`: "all" (every cell boxed, spans open), "across" (top, under the header and
bottom only) or "none".
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

from tests.support.pages import SERIF, SERIF_BOLD

SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
CJK = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"


@dataclass
class Truth:
    rows: int
    columns: int
    cells: list[tuple[int, int, int, int, str]]  # row, col, row_span, col_span, text (lines joined by a space)
    box: tuple[int, int, int, int]
    widths: list[int]

    def grid(self) -> list[list[str]]:
        out = [["" for _ in range(self.columns)] for _ in range(self.rows)]
        for r, c, _, _, text in self.cells:
            out[r][c] = text
        return out


def _cell(value) -> tuple[str, int, int] | None:
    if value is None:
        return None
    if isinstance(value, tuple):
        return value
    return value, 1, 1


def draw_table(rows: list[list], *, rules: str = "all", font: str = SERIF, size: int = 26, header: bool = True,
               page: tuple[int, int] = (1240, 900), at: tuple[int, int] = (80, 140), title: str | None = "Statement",
               below: str | None = None, pad: int | None = None, widths: list[int] | None = None
               ) -> tuple[Image.Image, Truth]:
    """The page and its table's truth. `widths`: the columns' widths (a table continued from a page before)."""
    image = Image.new("RGB", page, "white")
    draw = ImageDraw.Draw(image)
    face, bold = ImageFont.truetype(font, size), ImageFont.truetype(SERIF_BOLD if font == SERIF else font, size)
    pad = pad if pad is not None else size // 2 + 4
    gap = size // 2 + 4 if rules == "all" else size + 8  # between columns: wider where no rule parts them
    grid = [[_cell(v) for v in row] for row in rows]
    n_rows, n_cols = len(grid), max(len(r) for r in grid)
    line_h = int(size * 1.3)

    def width(text: str, f) -> int:
        return max(int(draw.textlength(part, font=f)) for part in text.split("\n"))

    col_w = [0] * n_cols
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell and cell[2] == 1:
                col_w[c] = max(col_w[c], width(cell[0], bold if header and r == 0 else face) + 2 * pad)
    row_h = [0] * n_rows
    for r, row in enumerate(grid):
        for cell in row:
            if cell and cell[1] == 1:
                row_h[r] = max(row_h[r], line_h * (cell[0].count("\n") + 1) + 2 * pad)
    row_h = [h or line_h + 2 * pad for h in row_h]
    if rules != "all":
        col_w = [w + gap for w in col_w]
    col_w = widths or col_w
    xs = [at[0]]
    for w in col_w:
        xs.append(xs[-1] + w)
    ys = [at[1]]
    for h in row_h:
        ys.append(ys[-1] + h)
    if title:
        draw.text((at[0], at[1] - 2 * size - 10), title, font=bold, fill="black")
    cells = []
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell is None:
                continue
            text, rs, cs = cell
            f = bold if header and r == 0 else face
            x0, y0, x1, y1 = xs[c], ys[r], xs[c + cs], ys[r + rs]
            numeric = text.replace(".", "").replace(",", "").replace(" ", "").lstrip("-").isdigit()
            for i, part in enumerate(text.split("\n")):
                w = draw.textlength(part, font=f)
                x = x1 - pad - (gap if rules != "all" else 0) - w if numeric and not (header and r == 0) else x0 + pad
                draw.text((x, y0 + pad + i * line_h), part, font=f, fill="black")
            cells.append((r, c, rs, cs, " ".join(text.split())))
            if rules == "all":
                draw.rectangle((x0, y0, x1, y1), outline="black", width=2)
    if rules == "across":
        for y in (ys[0], ys[1] if header else None, ys[-1]):
            if y is not None:
                draw.line((xs[0], y, xs[-1], y), fill="black", width=2)
    if below:
        draw.text((at[0], ys[-1] + size), below, font=face, fill="black")
    return image, Truth(n_rows, n_cols, cells, (xs[0], ys[0], xs[-1], ys[-1]), col_w)


INVOICE = [["Item", "Quantity", "Unit price", "Amount"],
           ["Oak beams", "12", "45.50", "546.00"],
           ["Lime mortar", "30", "8.25", "247.50"],
           ["Granite blocks", "140", "12.00", "1,680.00"],
           ["Iron rings", "6", "31.75", "190.50"]]

SPANNING = [[("Vessel", 2, 1), ("Cargo", 1, 2), None, ("Berth", 2, 1)],
            [None, "Kind", "Tons", None],
            ["Mary Ann", "Timber", "340", "North"],
            ["Good Hope", "Coal", "215", "South"],
            [("Total", 1, 2), None, "555", ""]]
