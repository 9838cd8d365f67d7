"""The GPU path's tables: LightOnOCR's HTML tables and markdown pipe tables parsed into cells with spans, and
hostile markup that never fails the page."""

from __future__ import annotations

import pytest

from common.formats.tables import from_block
from worker.engines.gpu_blocks import build_blocks
from worker.engines.markdown_blocks import parse
from worker.engines.table_markup import parse_html, parse_pipes

SPANS = """<table>
<thead><tr><th rowspan="2">Item</th><th colspan="2">Amount</th></tr>
<tr><th>Net</th><th>Gross</th></tr></thead>
<tbody><tr><td>Oak <b>beams</b></td><td>1.234,56</td><td>1.469,13</td></tr>
<tr><td>Lime<br>mortar</td><td colspan=2>included</td></tr></tbody>
</table>"""


def _cells(table):
    return [(c.row, c.col, c.row_span, c.col_span, c.header, c.text) for c in table.cells]


def test_spans_headers_nested_markup_and_line_breaks():
    table = parse_html(SPANS)
    assert (table.rows, table.columns) == (4, 3)
    assert _cells(table) == [
        (0, 0, 2, 1, True, "Item"), (0, 1, 1, 2, True, "Amount"),
        (1, 1, 1, 1, True, "Net"), (1, 2, 1, 1, True, "Gross"),
        (2, 0, 1, 1, False, "Oak beams"), (2, 1, 1, 1, False, "1.234,56"), (2, 2, 1, 1, False, "1.469,13"),
        (3, 0, 1, 1, False, "Lime\nmortar"), (3, 1, 1, 2, False, "included")]
    for cell in table.cells:  # each cell's offsets hold its text
        assert cell.text.split()[0] in SPANS[cell.start:cell.end]


def test_unclosed_tags_are_closed_by_the_next_cell_row_or_the_end():
    table = parse_html("<table><tr><td>a<td>b<tr><td>c</td><td>d")
    assert _cells(table) == [(0, 0, 1, 1, False, "a"), (0, 1, 1, 1, False, "b"),
                             (1, 0, 1, 1, False, "c"), (1, 1, 1, 1, False, "d")]


def test_a_table_in_a_cell_is_its_text_and_a_caption_is_kept():
    table = parse_html("<table><caption>Berths, 1851</caption><tr><td>x<table><tr><td>in</td><td>ner</td></tr>"
                       "</table></td><td>y</td></tr></table>")
    assert table.caption == "Berths, 1851"
    assert [(c.row, c.col) for c in table.cells] == [(0, 0), (0, 1)]
    assert table.cells[0].text.split() == ["x", "in", "ner"] and table.cells[1].text == "y"


def test_pipe_tables_with_a_header_escaped_pipes_and_breaks():
    text = "| Vessel | Tons |\n|:---|---:|\n| Mary Ann | 340 |\n| A \\| B<br>C | 1,215 |\n"
    table = parse_pipes(text)
    assert (table.rows, table.columns) == (3, 2)
    assert _cells(table) == [(0, 0, 1, 1, True, "Vessel"), (0, 1, 1, 1, True, "Tons"),
                             (1, 0, 1, 1, False, "Mary Ann"), (1, 1, 1, 1, False, "340"),
                             (2, 0, 1, 1, False, "A | B\nC"), (2, 1, 1, 1, False, "1,215")]


def test_a_pipe_table_in_the_markdown_is_a_table_block_with_its_words():
    blocks = parse("Arrivals\n\n| Vessel | Tons |\n|---|---|\n| Mary Ann | 340 |\nAfter the table.")
    assert [b.kind for b in blocks] == ["text", "table", "text"]
    table = blocks[1]
    assert [w.text for w in table.words] == ["Vessel", "Tons", "Mary", "Ann", "340"]
    assert [[table.words[i].text for i in ids] for ids in table.cell_words] == [["Vessel"], ["Tons"],
                                                                              ["Mary", "Ann"], ["340"]]


def test_a_caption_above_a_table_is_its_caption():
    blocks, _ = build_blocks("Tabelle 2: Ankünfte\n\n<table><tr><td>a</td><td>b</td></tr></table>",
                             [(100, 50, 500, 80), (100, 100, 500, 140)], [], size=(1000, 1000))
    assert blocks[1]["caption"] == "Tabelle 2: Ankünfte"


def test_the_page_json_block_holds_the_cells_with_boxes():
    markdown = "<table><tr><th>Vessel</th><th>Tons</th></tr><tr><td>Mary Ann</td><td>340</td></tr></table>"
    blocks, _ = build_blocks(markdown, [(100, 100, 500, 140), (100, 160, 500, 200)], [], size=(1000, 1000))
    table = from_block(blocks[0])
    assert (blocks[0]["kind"], blocks[0]["rows"], blocks[0]["columns"]) == ("table", 2, 2)
    assert table.grid() == [["Vessel", "Tons"], ["Mary Ann", "340"]]
    assert [c.header for c in table.cells] == [True, True, False, False]
    assert all(c.box for c in table.cells)


HOSTILE = [
    "<table", "<table>", "<table><tr>", "<table><td>", "<table><tr><td>a</tr></td></table>",
    "<table><tr><td rowspan='999999999'>a</td><td colspan='-3'>b</td><td colspan='x'>c</td></tr></table>",
    "<table><tr><td colspan=1000000>wide</td></tr><tr><td>x</td></tr></table>",
    "<table><tr><td>a</td></tr></table></table></td></tr>",
    "<table><table><table><tr><td>deep</td></tr>",
    "<table><tr><td><![CDATA[x]]><!-- c --><?pi?><!doctype x>y</td></tr></table>",
    "<table><tr><td>&#xffffffff; &bogus; &amp</td></tr></table>",
    "<table><tr><td>\x00\x01\x7f</td><td>\ud800</td></tr></table>",
    "<table><tr><td>" + "<b>" * 5000 + "x</td></tr></table>",
    "<table>" + "<tr><td>1</td><td>2</td></tr>" * 3000 + "</table>",
    "<table><tr><td>a<td rowspan=3>b<tr><td colspan=4>c<tr><td>d</table>",
    "<table><thead><tr><th>a</th></tr><tbody><tr><td>b</td></tr></table>",
    "<TABLE><TR><TD>upper</TD></TR></TABLE>",
    "<table><tr><td>a</td></tr>\n\n<table><tr><td>b</td></tr></table>",
    "| a | b |\n|---|",
    "| a |\n|---|---|---|\n| 1 | 2 | 3 | 4 |",
    "|||||\n|-|-|",
    "<table><tr><td>x</td><td>y</td></tr><tr><td>`code | pipe`</td></tr></table>",
]


@pytest.mark.parametrize("markdown", HOSTILE)
def test_hostile_tables_never_fail_the_page(markdown):
    blocks, _ = build_blocks(f"Before.\n\n{markdown}\n\nAfter.", [(10, 10, 900, 40), (10, 60, 900, 90)], [],
                             size=(1000, 1000))
    for block in blocks:
        table = from_block(block)
        if table is None:
            continue
        assert table.rows * table.columns <= 100 * 20_000
        taken = set()
        for cell in table.cells:
            assert 0 <= cell.row < table.rows and 0 <= cell.col < table.columns
            slots = {(cell.row + r, cell.col + c) for r in range(cell.row_span) for c in range(cell.col_span)}
            assert not slots & taken and all(r < table.rows and c < table.columns for r, c in slots)
            taken |= slots
