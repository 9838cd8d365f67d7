"""The CPU path's tables: cells and spans of a ruled table from its rules, of a borderless one from how its lines
line up, each cell's text from the lines rapidocr read; running text in columns is no table."""

from __future__ import annotations

import json

import pytest

from common.formats.tables import from_block
from tests.formats import pages as drawn
from tests.support.pages import column_page
from tests.support.table_pages import INVOICE, SPANNING, draw_table
from worker.engines.cpu import CpuEngine


@pytest.fixture(scope="module")
def engine():
    cpu = CpuEngine()
    yield cpu
    cpu.close()


def _tables(engine, image):
    read = engine.read([image])[0]
    json.dumps(read.blocks)  # stored as JSON: plain numbers only
    return [t for t in (from_block(b) for b in read.blocks) if t is not None], read


def _spans(table):
    return sorted((c.row, c.col, c.row_span, c.col_span) for c in table.cells)


def test_a_ruled_table_with_spanning_cells(engine):
    image, truth = draw_table(SPANNING, title="Table 3: Arrivals")
    tables, read = _tables(engine, image)
    assert len(tables) == 1 and tables[0].caption == "Table 3: Arrivals"
    table = tables[0]
    assert (table.rows, table.columns) == (truth.rows, truth.columns)
    assert _spans(table) == sorted((r, c, rs, cs) for r, c, rs, cs, _ in truth.cells)
    assert table.grid() == truth.grid()
    assert all(c.box and c.confidence for c in table.cells if c.text)
    assert [c.header for c in table.cells if c.row == 0] == [True, True, True]
    assert "<table>" in read.text and "Mary Ann" in read.text


@pytest.mark.parametrize("rules", ["all", "across", "none"])
def test_ruled_partly_ruled_and_borderless_invoices(engine, rules):
    image, truth = draw_table(INVOICE, rules=rules, below="Total due: 2,664.00 within 30 days of the invoice date.")
    tables, read = _tables(engine, image)
    assert len(tables) == 1
    table = tables[0]
    assert table.grid() == truth.grid()
    assert all(c.row_span == c.col_span == 1 for c in table.cells)
    assert [c.header for c in table.cells if c.row == 0] == [True] * 4
    assert "Total due" in read.text  # the line below the table stays text


def test_a_borderless_cell_of_two_lines_is_one_cell(engine):
    rows = [["Item", "Note", "Amount"], ["Oak beams", "cut to\nlength", "546.00"], ["Lime mortar", "slaked", "247.50"],
            ["Granite", "dressed\nstone", "1,680.00"]]
    image, truth = draw_table(rows, rules="none")
    tables, _ = _tables(engine, image)
    assert len(tables) == 1 and tables[0].grid() == truth.grid()


def test_a_borderless_header_of_two_rows_spans_them(engine):
    image, truth = draw_table(SPANNING[:4], rules="none")
    tables, _ = _tables(engine, image)
    assert len(tables) == 1
    assert _spans(tables[0]) == sorted((r, c, rs, cs) for r, c, rs, cs, _ in truth.cells)
    assert tables[0].grid() == truth.grid()


def test_items_and_notes_beside_a_column_of_amounts_are_a_table(engine):
    rows = [["Article", "Remarque", "Montant"], ["Clous de cuivre", "coupé à\nla mesure", "17 168,25"],
            ["Toile à voile", "seconde\nlivraison", "341 952,24"], ["Anneaux de fer", "comme convenu", "1 625 243,55"],
            ["Poutres de chêne", "seconde\nlivraison", "712 775,00"]]
    image, truth = draw_table(rows, rules="none")
    tables, _ = _tables(engine, image)

    def squeezed(grid):  # rapidocr may drop the narrow space in "17 168,25": reading, not structure
        return [[text.replace(" ", "") for text in row] for row in grid]

    assert len(tables) == 1 and squeezed(tables[0].grid()) == squeezed(truth.grid())


def test_running_text_in_columns_is_no_table(engine):
    for image in (drawn.two_columns(), drawn.one_column(), column_page(2).image, column_page(3).image):
        tables, _ = _tables(engine, image)
        assert tables == []


def test_page_xml_carries_the_cells_as_table_cell_roles(engine):
    from common.formats import render_layout
    from common.formats.structure import layout_of
    from common.jobs.models import Job, Page
    from tests.support.layout_checks import valid_page_zip

    image, truth = draw_table(SPANNING)
    read = engine.read([image])[0]
    page = Page(index=0, status="succeeded", text=read.text, width=image.width, height=image.height, engine="cpu",
                rotation=read.rotation, blocks=read.blocks, confidence=0.99)
    [document] = valid_page_zip(render_layout("page", Job(id="t", filename="t.png"), [page]))
    ns = "{http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15}"
    [table] = list(document.iter(f"{ns}TableRegion"))
    assert (table.get("rows"), table.get("columns")) == (str(truth.rows), str(truth.columns))
    roles = [(int(r.get("rowIndex")), int(r.get("columnIndex")), int(r.get("rowSpan")), int(r.get("colSpan")))
             for r in table.iter(f"{ns}TableCellRole")]
    assert sorted(roles) == sorted((r, c, rs, cs) for r, c, rs, cs, _ in truth.cells)
    words = [w["text"] for b in layout_of(page).blocks for ln in b["lines"] for w in ln["words"]]
    assert [w.find(f"{ns}TextEquiv/{ns}Unicode").text for w in document.iter(f"{ns}Word")] == words


def test_columns_of_dates_one_space_apart_are_cut_into_their_cells(engine):
    # As a spreadsheet prints them: each cell at its column's start, dates filling their columns but for a blank
    # of about a space, which the detector reads across as one line; the header's words stand apart.
    from PIL import Image, ImageDraw, ImageFont

    from tests.support.table_pages import SERIF

    face = ImageFont.truetype(SERIF, 22)
    rows = [["version", "name", "created", "release", "eol"]]
    rows += [[f"{n}.0", name, f"19{90 + n}-0{n}-16", f"19{91 + n}-0{n}-17", f"19{92 + n}-1{n}-05"]
             for n, name in enumerate(["Buzz", "Rex", "Bo", "Hamm", "Slink", "Potato"], start=1)]
    image = Image.new("RGB", (1100, 500), "white")
    draw = ImageDraw.Draw(image)
    date = int(draw.textlength("1993-08-16", font=face))
    starts = [60, 160, 300, 300 + date + 14, 300 + 2 * (date + 14)]
    for r, row in enumerate(rows):
        for x, text in zip(starts, row, strict=True):
            draw.text((x, 60 + 30 * r), text, font=face, fill="black")
    tables, _ = _tables(engine, image)
    assert len(tables) == 1
    assert tables[0].grid() == rows


def test_columns_whose_boxes_overlap_where_their_ink_does_not():
    # The detector pads each box; cells one space apart get boxes that overlap by a few pixels, so no blank runs
    # down the run between their boxes, only between their ink.
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    from tests.support.table_pages import SERIF
    from worker.engines.cpu_tables import borderless
    from worker.engines.reading_order import Line

    face = ImageFont.truetype(SERIF, 22)
    rows = [[f"19{90 + n}-0{n}-16", f"19{91 + n}-0{n}-17", f"20{10 + n}-1{n}-05"] for n in range(1, 7)]
    image = Image.new("RGB", (900, 400), "white")
    draw = ImageDraw.Draw(image)
    pad, lines, starts = 8, [], [60, 0, 0]
    date = int(draw.textlength("1993-08-16", font=face))
    starts[1] = starts[0] + date + 12
    starts[2] = starts[1] + date + 12
    for r, row in enumerate(rows):
        for x, text in zip(starts, row, strict=True):
            y = 40 + 40 * r
            draw.text((x, y), text, font=face, fill="black")
            left, top, right, bottom = draw.textbbox((x, y), text, font=face)
            box = (left - pad, top - 4, right + pad, bottom + 4)
            lines.append(Line(text=text, box=box, confidence=0.99, key=tuple(map(float, box))))
    assert any(a.box[2] > b.box[0] for a, b in zip(lines, lines[1:]) if a.box[1] == b.box[1])
    unit = lines[0].box[3] - lines[0].box[1]
    tables = borderless(np.asarray(image), lines, unit)
    assert len(tables) == 1
    assert tables[0].table.grid() == rows


def test_the_edge_of_a_page_on_a_desk_is_no_rule(engine):
    # A photographed page: the paper against the darker desk around it shows as a long dark band along each
    # edge, dark on one side only; taken as rules, the page's edges framed the table into a grid of their own.
    from PIL import Image

    page, truth = draw_table(INVOICE, rules="all")
    desk = Image.new("RGB", (page.width + 160, page.height + 160), (110, 110, 110))
    desk.paste(page, (80, 80))
    tables, _ = _tables(engine, desk)
    assert len(tables) == 1
    assert tables[0].grid() == truth.grid()


def test_a_numbers_digit_groups_read_without_their_later_spaces_are_one_cell():
    from worker.engines.cpu_tables import _grouped
    from worker.engines.reading_order import Line

    def parts(*texts):
        return [Line(text=t, box=(0, 0, 1, 1), confidence=1.0) for t in texts]

    assert _grouped(parts("1", "506517,36")) and _grouped(parts("2", "135,03"))
    assert not _grouped(parts("24", "1607,69")) and not _grouped(parts("236", "3962,56"))
