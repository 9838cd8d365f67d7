"""Reading order and markdown rules on line boxes alone (no OCR): columns, tables, lists, hyphens, skew."""

from __future__ import annotations

import math

from worker.engines.reading_order import PARAMS, Line, Params, join_lines, lines_from_quads, order_blocks, to_markdown


def _page(rows: list[tuple[str, int, int, int, int]], *, degrees: float = 0.0):
    """Lines from (text, x0, y0, x1, y1) boxes, turned by `degrees` about the origin as a tilted scan is."""
    a = math.radians(degrees)
    quads = []
    for _, x0, y0, x1, y1 in rows:
        corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
        quads.append([(x * math.cos(a) - y * math.sin(a) + 200, x * math.sin(a) + y * math.cos(a)) for x, y in corners])
    return lines_from_quads(quads, [r[0] for r in rows], [0.9] * len(rows))


def _two_columns() -> list[tuple[str, int, int, int, int]]:
    rows = [("A Title Across", 100, 150, 900, 200)]
    for i in range(8):
        rows.append((f"left line {i} of a column of text", 100, 250 + 32 * i, 480, 275 + 32 * i))
        rows.append((f"right line {i} of a column of text", 530, 250 + 32 * i, 900, 275 + 32 * i))
    return rows


def test_columns_read_top_to_bottom_then_left_to_right():
    for degrees in (0.0, 2.5, -3.0):
        blocks = order_blocks(_page(_two_columns(), degrees=degrees), height=1650)
        texts = [line.text for block in blocks for line in block.lines]
        assert texts == (["A Title Across"] + [f"left line {i} of a column of text" for i in range(8)]
                         + [f"right line {i} of a column of text" for i in range(8)]), degrees
        # The left column's last line ends mid-sentence: its paragraph goes on at the head of the right one.
        assert [b.kind for b in blocks] == ["title", "text"], degrees


def test_narrow_columns_of_short_lines_are_columns_not_a_table():
    """Three narrow columns whose short lines line up across the gutters, as a table's cells do (a corpus page
    in a monospaced font at 150 dpi was read row by row across the columns, CER 0.72); the same with CJK."""
    danish = [["Lejeren", "forpligter sig", "til at holde", "lokalerne rene", "og i god", "stand. Send"],
              ["Alle priser er", "i euro og", "omfatter", "levering til", "lageret. Send", "venligst den"],
              ["Ved betaling", "via", "bankoverførsel", "skal", "referencenummeret", "angives. Mødet"]]
    chinese = [["港口管理局在那年春天", "开放了北码头并且扩建", "了仓库和办公楼以及停"],
               ["车场这项工程由市政府", "出资历时两年才完成了", "所有的建设与验收工作"],
               ["当地居民对新码头的开", "放表示欢迎认为它将会", "带来更多的就业机会和"]]
    for columns in (danish, chinese):
        rows = [(text, 100 + 280 * c, 300 + 32 * i, 100 + 280 * c + 240, 325 + 32 * i)
                for c, column in enumerate(columns) for i, text in enumerate(column)]
        blocks = order_blocks(_page(rows), height=1650)
        assert "table" not in [b.kind for b in blocks]
        assert [line.text for block in blocks for line in block.lines] == [t for column in columns for t in column]


def test_a_title_over_two_of_three_columns_does_not_send_the_page_across_them():
    """A heading wider than one column hides the first gutter, and the paragraph breaks line up across the
    columns: the widest row gap was a paragraph break, and the page read across columns 1 and 2 (a 3-column
    corpus page, CER 0.13). The title is cut off first, then each column reads whole."""
    rows = [("Terms of payment and delivery", 100, 100, 560, 140)]
    columns = [[f"column {c} paragraph {p} line {i} goes on" for p in range(3) for i in range(3)] for c in range(3)]
    for c, column in enumerate(columns):
        for n, text in enumerate(column):
            y = 170 + 32 * n + 30 * (n // 3)  # paragraph breaks wider than the gap under the title, in line
            rows.append((text, 100 + 280 * c, y, 100 + 280 * c + 230, y + 25))
    for degrees in (0.0, 1.5):
        texts = [line.text for block in order_blocks(_page(rows, degrees=degrees), height=1650)
                 for line in block.lines]
        assert texts == ["Terms of payment and delivery"] + [t for column in columns for t in column], degrees


def test_paragraph_breaks_in_line_across_a_gutter_narrower_than_them_do_not_send_the_page_across():
    """Two columns, a gutter of one line height, and a blank line between paragraphs at the same height in both:
    the paragraph break was the wider gap, and the page read left, right, left, right (a corpus page, CER 0.41)."""
    columns = [[f"column {c} paragraph {p} line {i} goes on" for p in range(2) for i in range(4)] for c in range(2)]
    rows = []
    for c, column in enumerate(columns):
        for n, text in enumerate(column):
            y = 100 + 38 * n + 38 * (n // 4)
            rows.append((text, 50 + 375 * c, y, 50 + 375 * c + 345, y + 24))
    for degrees in (0.0, 2.0):
        texts = [line.text for block in order_blocks(_page(rows, degrees=degrees), height=1100)
                 for line in block.lines]
        assert texts == [t for column in columns for t in column], degrees


def test_a_gutter_narrower_than_a_word_space_is_a_gutter_when_it_runs_down_many_lines():
    """Three narrow columns in a monospaced font: a long word fills its column and leaves a gutter of half a line
    height or less between two of them (a corpus page read across columns 2 and 3, CER 0.36)."""
    columns = [[f"c{c} word {i}" for i in range(6)] for c in range(3)]
    rows = []
    for c, column in enumerate(columns):
        for i, text in enumerate(column):
            rows.append((text, 50 + 250 * c, 100 + 40 * i, 50 + 250 * c + 237, 130 + 40 * i))
    texts = [line.text for block in order_blocks(_page(rows), height=1100) for line in block.lines]
    assert texts == [t for column in columns for t in column]
    # Two lines of words with a wide space in line stay lines.
    two = [("one two", 50, 100, 120, 130), ("three four", 132, 100, 300, 130),
           ("five six", 50, 140, 120, 170), ("seven eight", 132, 140, 300, 170)]
    texts = [line.text for block in order_blocks(_page(two), height=1100) for line in block.lines]
    assert texts == ["one two", "three four", "five six", "seven eight"]
    # Nor are list numbers in boxes of their own a column.
    items = [row for i in range(6) for row in ((f"{i + 1}.", 50, 100 + 40 * i, 70, 125 + 40 * i),
                                               (f"item {i + 1} of the list goes here", 80, 100 + 40 * i, 420,
                                                125 + 40 * i))]
    without = Params(steps=PARAMS.steps - {"markers"})
    texts = [line.text for block in order_blocks(_page(items), height=1100, params=without) for line in block.lines]
    assert texts == [row[0] for row in items]
    # Each number is its item's start.
    texts = [line.text for block in order_blocks(_page(items), height=1100) for line in block.lines]
    assert texts == [f"{a[0]} {b[0]}" for a, b in zip(items[::2], items[1::2], strict=True)]
    # Numbers set flush right ("9." under "10.") are still their items' starts, not a column's ends.
    items = [row for i in range(14) for row in ((f"{i + 1}.", 58 if i < 9 else 48, 100 + 40 * i, 70, 125 + 40 * i),
                                                (f"item {i + 1} of the list goes here", 80, 100 + 40 * i, 420,
                                                 125 + 40 * i))]
    texts = [line.text for block in order_blocks(_page(items), height=1100) for line in block.lines]
    assert texts == [f"{a[0]} {b[0]}" for a, b in zip(items[::2], items[1::2], strict=True)]


def test_table_keeps_rows_and_header_footer_stay_apart():
    rows = [("Report 7", 100, 40, 300, 60), ("Item", 100, 300, 200, 325), ("Price", 600, 300, 700, 325)]
    rows += [("Rope", 100, 340, 200, 365), ("12.50", 600, 340, 700, 365)]
    rows += [("Nails", 100, 380, 200, 405), ("3.10", 600, 380, 700, 405), ("1", 500, 1600, 520, 1620)]
    blocks = order_blocks(_page(rows), height=1650)
    assert [b.kind for b in blocks] == ["header", "table", "footer"]
    assert to_markdown(blocks) == ("Report 7\n\n<table><tr><td>Item</td><td>Price</td></tr><tr><td>Rope</td>"
                                   "<td>12.50</td></tr><tr><td>Nails</td><td>3.10</td></tr></table>\n\n1")


def test_list_items_and_paragraphs():
    rows = [("Take these steps before you start the engine", 100, 300, 900, 325),
            ("• check the oil level", 100, 340, 500, 365), ("• open the fuel valve and wait", 100, 380, 600, 405),
            ("  a few seconds", 130, 420, 400, 445)]
    markdown = to_markdown(order_blocks(_page(rows), height=1650))
    assert markdown == ("Take these steps before you start the engine\n\n- check the oil level\n"
                        "- open the fuel valve and wait a few seconds")


def test_join_lines():
    assert join_lines(["the harbour was dred-", "ged twice", "a year"]) == "the harbour was dredged twice a year"
    assert join_lines(["forty-", "Two"]) == "forty- Two"  # a capital after the hyphen: not one word
    assert join_lines(["港口管理局在那年", "春天开放了北码头。"]) == "港口管理局在那年春天开放了北码头。"


def test_a_page_of_many_lines():
    rows = [(f"entry {i} of a long register of names", 100, 10 + 12 * i, 600, 20 + 12 * i) for i in range(1500)]
    blocks = order_blocks(_page(rows), height=18_100)
    assert [line.text for block in blocks for line in block.lines] == [r[0] for r in rows]


class _Cutter:
    """The engine's side of a bridged gutter, for line boxes without a page: it knows where each word of the lines
    it may cut lies (offsets from the line's left edge) and cuts at the blank between words that lies in the
    gutter, as the CPU engine cuts its crop at an inked column's gap."""

    def __init__(self, words: dict[str, list[tuple[str, int, int]]], *, able: bool = True) -> None:
        self.words, self.able, self.calls = dict(words), able, []

    def __call__(self, line: Line, lo: float, hi: float) -> list[Line] | None:
        self.calls.append(line.text)
        words = self.words.get(line.text)
        if not self.able or not words:
            return None
        left = line.key[0]
        for k in range(len(words) - 1):
            blank = (left + words[k][2], left + words[k + 1][1])
            if blank[1] >= lo and blank[0] <= hi:
                middle = (blank[0] + blank[1]) / 2
                parts = []
                for chunk, x0, x1 in ((words[:k + 1], left, middle), (words[k + 1:], middle, line.key[2])):
                    text = " ".join(w for w, _, _ in chunk)
                    self.words[text] = [(w, a - (x0 - left), b - (x0 - left)) for w, a, b in chunk]
                    parts.append(Line(text=text, box=(int(x0), line.box[1], int(x1), line.box[3]),
                                      confidence=line.confidence, key=(x0, line.key[1], x1, line.key[3])))
                return parts
        return None


def _bridged_columns(row: int) -> tuple[list[tuple[str, int, int, int, int]], list[list[str]], _Cutter]:
    """Three columns of eight lines; on row `row` the first two columns' long words fill them and end 8 px before
    the next column, and the detector made that row one box."""
    columns = [[f"column {c} line {i} goes on" for i in range(8)] for c in range(3)]
    words = [("responsibilities", 0, 272), ("acknowledgements", 280, 552), ("went on", 560, 660)]
    for c, (word, _, _) in enumerate(words):
        columns[c][row] = word
    rows = [(text, 100 + 280 * c, 300 + 36 * i, 100 + 280 * c + 210, 325 + 36 * i)
            for c, column in enumerate(columns) for i, text in enumerate(column) if i != row]
    bridge = " ".join(w for w, _, _ in words)
    rows.append((bridge, 100, 300 + 36 * row, 760, 325 + 36 * row))
    return rows, columns, _Cutter({bridge: words})


def test_a_row_that_bridges_the_gutters_is_cut_at_them():
    """The corpus's p035-de (the bridged row in the middle) and p107-da (the last row): one box across three
    columns hid both gutters, and the page read by rows (CER 0.32 and 0.18)."""
    for row, degrees in [(0, 0.0), (2, 0.0), (7, 0.0), (2, 2.0), (7, -2.5)]:
        rows, columns, cutter = _bridged_columns(row)
        blocks = order_blocks(_page(rows, degrees=degrees), height=1650, split=cutter)
        assert [ln.text for block in blocks for ln in block.lines] == [t for column in columns for t in column], row
        assert len(cutter.calls) == 2, row
        # Without an engine to cut it, or where the engine finds no blank there, the row stays whole.
        for split in (None, _Cutter({}, able=False)):
            blocks = order_blocks(_page(rows, degrees=degrees), height=1650, split=split)
            assert rows[-1][0] in [ln.text for block in blocks for ln in block.lines], row


def test_a_title_or_a_closing_line_across_the_columns_is_not_cut():
    """A taller title over both columns, and a closing sentence of body size set apart below them, cross the
    gutter but are not rows of the columns."""
    rows = _two_columns() + [("A closing line across both columns of the page", 100, 600, 900, 625)]
    cutter = _Cutter({text: [(text, 0, x1 - x0)] for text, x0, _, x1, _ in rows})
    texts = [ln.text for block in order_blocks(_page(rows), height=1650, split=cutter) for ln in block.lines]
    assert texts == ([rows[0][0]] + [f"left line {i} of a column of text" for i in range(8)]
                     + [f"right line {i} of a column of text" for i in range(8)] + [rows[-1][0]])
    assert cutter.calls == []


def test_two_boxes_of_one_line_that_overlap_read_left_to_right():
    """The detector cut a line of a narrow column in two, the boxes overlapping by 7 px and the second's top 5 px
    higher; nothing could cut them apart, and they were read by their tops: "dette sendt brev er" for "dette brev er
    sendt" (a three-column corpus page in a monospaced font, CER 0.043)."""
    rows = [("En kopi af", 555, 296, 754, 325), ("dette", 555, 330, 675, 357), ("brev er", 555, 364, 675, 388),
            ("sendt", 668, 359, 754, 389), ("til den", 555, 395, 700, 420)]
    for degrees in (0.0, 2.0, -2.0):
        blocks = order_blocks(_page(rows, degrees=degrees), height=1650)
        assert [line.text for block in blocks for line in block.lines] == [r[0] for r in rows], degrees


def _narrow_margin_columns(top: int) -> tuple[list[tuple[str, int, int, int, int]], list[list[str]]]:
    columns = [[f"column {c} line {i} of running text" for i in range(32)] for c in range(2)]
    rows = [(text, 40 + 520 * c, top + 32 * i, 40 + 520 * c + 480, top + 32 * i + 25)
            for c, column in enumerate(columns) for i, text in enumerate(column)]
    return rows, columns


def test_columns_that_reach_into_the_top_and_bottom_bands_keep_their_first_and_last_lines():
    """Narrow margins put the columns' first and last lines within the page's top and bottom 7 %: they were taken
    for running heads and feet (issue 56). A head a blank of 1.5 line heights above the body is still one."""
    rows, columns = _narrow_margin_columns(top=30)
    blocks = order_blocks(_page(rows), height=1100)
    assert {b.kind for b in blocks} == {"text"}
    assert [ln.text for block in blocks for ln in block.lines] == [t for column in columns for t in column]
    rows, columns = _narrow_margin_columns(top=70)
    rows = [r for r in rows if r[4] < 1020]
    rows += [("Cooperative Review, No. 4", 40, 5, 400, 30), ("7", 540, 1070, 560, 1095)]
    blocks = order_blocks(_page(rows), height=1100)
    assert blocks[0].kind == "header" and blocks[-1].kind == "footer"
    assert {b.kind for b in blocks[1:-1]} == {"text"}


def test_key_value_rows_read_term_by_term():
    """A form: several-word terms on the left, values on the right, some wrapped under themselves; read as two
    columns, all terms and then all values (issue 56)."""
    fields = [("Name of the applicant", ["Margaret Ellison Hale"]),
              ("Postal address in full", ["27 Orchard Lane, Upper Brookfield, near the old", "mill on the river road"]),
              ("Kind of membership", ["a full member since the spring meeting"]),
              ("Other duties", ["serves on the water committee and keeps", "the library catalogue up to date"])]
    rows, y = [], 100
    for term, values in fields:
        rows.append((term, 100, y, 100 + 12 * len(term), y + 25))
        for value in values:
            rows.append((value, 420, y, 420 + 12 * len(value), y + 25))
            y += 36
        y += 12
    for degrees in (0.0, 1.5):
        blocks = order_blocks(_page(rows, degrees=degrees), height=1100)
        assert [[ln.text for ln in b.lines] for b in blocks] == [[term, *values] for term, values in fields], degrees
    # Two columns of running text as wide as each other are not key-value rows.
    blocks = order_blocks(_page(_two_columns()), height=1650)
    assert [b.kind for b in blocks] == ["title", "text"]


def test_boxes_whose_text_is_not_known_read_narrow_columns_as_columns():
    """The vLLM path's layout has the detector's boxes and no text: given "XXXX" stand-ins (one capitalised word
    each, never prose), three narrow columns of short lines read as a table, row by row (issue 56)."""
    columns = [[f"c{c}-{i}" for i in range(6)] for c in range(3)]
    rows = [(text, 100 + 280 * c, 300 + 32 * i, 100 + 280 * c + 240, 325 + 32 * i)
            for c, column in enumerate(columns) for i, text in enumerate(column)]
    lines = _page(rows)
    for line in lines:
        line.text = None
    blocks = order_blocks(lines, height=1650)
    assert "table" not in [b.kind for b in blocks]
    assert [ln.box[:2] for b in blocks for ln in b.lines] == [ln.box[:2] for ln in _page(rows)]
    # A table's short cells are still a table.
    cells = [(text, 100 + 300 * c, 300 + 32 * i, 100 + 300 * c + 60, 325 + 32 * i)
             for c in range(3) for i, text in enumerate(["Rope", "Nails", "Tar"])]
    lines = _page(cells)
    for line in lines:
        line.text = None
    assert [b.kind for b in order_blocks(lines, height=1650)] == ["table"]


def test_headings_of_a_little_more_than_body_size_are_titles_and_a_tables_heading_stays_out_of_it():
    """Headings set 1.1-1.2 times the body's size were read into the paragraphs around them (the rule wanted boxes
    1.35 times the body's), and the heading above a table was its first row (issue 56)."""
    body = [f"line {i} of the paragraph about the branch line goes on" for i in range(3)]
    rows = [("The Branch Line", 100, 100, 330, 128)]
    rows += [(text if i < 2 else text + ".", 100, 140 + 34 * i, 800, 165 + 34 * i) for i, text in enumerate(body)]
    rows += [("Weather and Crops", 100, 250, 360, 278)]
    rows += [(text, 100, 290 + 34 * i, 800, 315 + 34 * i) for i, text in enumerate(body)]
    blocks = order_blocks(_page(rows), height=1100)
    assert [b.kind for b in blocks] == ["title", "text", "title", "text"]
    assert to_markdown(blocks).startswith("# The Branch Line\n\nline 0")
    cells = [("Passenger figures", 100, 100, 330, 128)]
    cells += [(text, 100 + 300 * c, 140 + 34 * i, 100 + 300 * c + 90, 165 + 34 * i)
              for i, row in enumerate([["Year", "Passengers"], ["1901", "4,210"], ["1911", "5,870"]])
              for c, text in enumerate(row)]
    blocks = order_blocks(_page(cells), height=1100)
    assert [b.kind for b in blocks] == ["title", "table"]
    assert "Passenger figures" not in to_markdown(blocks[1:])


def test_a_list_number_boxed_apart_from_its_item_starts_the_item():
    """The detector boxed a numbered item's "5." apart from its text, two line heights to the left, and the number
    came back as a paragraph of its own with the item read as plain text (issue 56)."""
    rows = [("Hay was cut in June if the weather held, turned by hand and carted.", 97, 88, 1024, 118),
            ("4. A signal box stood at the junction, and its keeper kept a register of every train that", 97, 358, 978,
             385), ("passed.", 141, 387, 229, 419),
            ("5.", 99, 431, 126, 453), ("The branch line climbed through three cuttings and a short tunnel before it",
                                        140, 429, 904, 456), ("reached the quarry.", 142, 459, 345, 489)]
    markdown = to_markdown(order_blocks(_page(rows), height=1100))
    assert "\n5. The branch line climbed through three cuttings and a short tunnel before it reached the quarry." \
        in markdown
    assert "\n4. A signal box" in markdown and "\n- " not in markdown


def test_a_heading_barely_taller_than_the_body_but_set_apart_is_a_heading():
    """A heading of 1.1 times the body's size had a box 1.03 times as tall as the line under it and read into the
    paragraph around it ("...summer show. The Branch Line The school closed..."); the boxes are that page's."""
    rows = [("A carrier brought the post twice a week, weather allowing, and waited at", 99, 151, 1170, 175),
            ("most mornings in November and lifted only by the middle of the day. The", 96, 176, 1141, 205),
            ("platform and won a prize for them in the summer show.", 96, 204, 640, 233),
            ("The Branch Line", 98, 258, 351, 288),
            ("The school closed for two weeks in October so that children could help", 97, 308, 1156, 337),
            ("rose, the lower meadow flooded and the cattle were moved to the common.", 98, 338, 1162, 365),
            ("morning and the figures sent to the county office by card.", 99, 367, 645, 391)]
    blocks = order_blocks(_page(rows), height=1100)
    assert [b.kind for b in blocks] == ["text", "title", "text"]
    assert "\n\n# The Branch Line\n\n" in to_markdown(blocks)
    # At the top of a block: a heading at the body's own height, set apart from the lines under it.
    top = [("Winter Months", 98, 100, 300, 129)] + [(text, 100, 146 + 30 * i, 900, 173 + 30 * i)
                                                     for i, text in enumerate(["one line of the paragraph that goes",
                                                                               "on and on into the next line of it",
                                                                               "and ends here."])]
    assert [b.kind for b in order_blocks(_page(top), height=1100)] == ["title", "text"]
    # A paragraph's short last line, one pitch under it, is no heading.
    last = [(text, 100, 100 + 30 * i, 900 if i < 2 else 400, 127 + 30 * i)
            for i, text in enumerate(["one line of the paragraph that goes", "on and on into the next line of it",
                                      "and a short last one", "Next paragraph starts here and goes on to the end"])]
    assert all(b.kind == "text" for b in order_blocks(_page(last), height=1100))


def test_a_paragraphs_last_line_and_a_heading_over_a_table_both_stay_out_of_it():
    """The paragraph's wrapped last word and the heading under it were both one-cell rows over the table, and only
    the first of such rows was taken out: both stayed in the table (the boxes are that page's)."""
    rows = [("An old windmill on the ridge had lost its sails but was still used as a store for seed", 98, 94,
             1112, 124), ("corn.", 99, 134, 167, 160), ("Winter Months", 97, 193, 400, 238)]
    cells = [["Year", "Passengers", "Goods"], ["1901", "4,210", "1,330"], ["1911", "5,870", "2,015"],
             ["1921", "3,940", "2,460"]]
    rows += [(text, 96 + 300 * c, 264 + 42 * r, 96 + 300 * c + 70, 296 + 42 * r)
             for r, row in enumerate(cells) for c, text in enumerate(row)]
    blocks = order_blocks(_page(rows), height=1100)
    assert [b.kind for b in blocks] == ["text", "title", "table"]
    assert [ln.text for ln in blocks[0].lines][-1] == "corn."
    assert [[ln.text for ln in row] for row in blocks[2].rows] == cells


def test_each_named_step_can_be_switched_off():
    """A bench run ablates the rules one at a time (issue 56): with "tables" off the same page has no table."""
    cells = [(text, 100 + 300 * c, 140 + 34 * i, 100 + 300 * c + 90, 165 + 34 * i)
             for i, row in enumerate([["Year", "Passengers"], ["1901", "4,210"], ["1911", "5,870"]])
             for c, text in enumerate(row)]
    assert "table" in [b.kind for b in order_blocks(_page(cells), height=1100)]
    off = Params(steps=PARAMS.steps - {"tables"})
    assert "table" not in [b.kind for b in order_blocks(_page(cells), height=1100, params=off)]


def test_a_gutter_that_the_boxes_reaching_past_their_ink_close_is_still_a_gutter():
    """On an AVX2-only CPU the detector's boxes of a justified page's left column reached the right column's
    first letters across a 24 px gutter in 20 px type (issue 56): no blank ran down the page, and it read across
    its columns (CER 0.50). Boxes from that page's layout, the left ones stretched 20 px into the gutter."""
    left = [f"left line {i} of a justified column of text" for i in range(10)]
    right = [f"right line {i} of a justified column of text" for i in range(10)]
    rows = []
    for i in range(10):
        y = 150 + 29 * i
        rows.append((left[i], 108, y, 646, y + 26))
        rows.append((right[i], 640 + i % 3 * 3, y, 1165, y + 26))
    blocks = order_blocks(_page(rows), height=1650)
    assert [line.text for block in blocks for line in block.lines] == left + right
    closed = Params(steps=PARAMS.steps - {"closed_gutters"})
    across = [line.text for block in order_blocks(_page(rows), height=1650, params=closed) for line in block.lines]
    assert across != left + right


def test_a_sidebar_of_smaller_type_left_of_the_text_is_read_after_it():
    """A shaded box of smaller type left of the main text was read first, as a page's first column: 9 of the
    second generator's 18 sidebar pages out of order (tuning seeds 1-3, issue 56). Boxes from such a page: the
    sidebar 330 px wide in 24 px boxes, the main text 650 px wide in 29 px boxes."""
    side = ["Weather Records", "The gauge readings were kept in", "a bound book by the schoolmaster,",
            "who sent a copy of each month's", "figures to the county office."]
    main = [f"line {i} of the main text of the page, which runs on at some length" for i in range(12)]
    rows = [(text, 115, 140 + 32 * i, 440, 164 + 32 * i) for i, text in enumerate(side)]
    rows += [(text, 500, 90 + 40 * i, 1150, 119 + 40 * i) for i, text in enumerate(main)]
    read = [line.text for block in order_blocks(_page(rows), height=1100) for line in block.lines]
    assert read == main + side
    off = Params(steps=PARAMS.steps - {"sidebars"})
    assert [line.text for b in order_blocks(_page(rows), height=1100, params=off) for line in b.lines] == side + main
    # Two columns of one type size, the left one narrow, are still read left first.
    same = [(text, x0, y0, x1, y0 + 29) for text, x0, y0, x1, _ in rows]
    assert [line.text for block in order_blocks(_page(same), height=1100) for line in block.lines] == side + main
    # A page of three columns, the first one's boxes a little shorter (the detector's, on 2 of bench/cpu_corpus.py's
    # pages): the other two span twice its width, but their lines are as long as its own.
    columns = [[f"column {c} line {i} of running text" for i in range(12)] for c in range(3)]
    starts = [100, 470, 830]  # the first gutter the widest, cut first
    three = [(text, starts[c], 90 + 40 * i, starts[c] + 320, 90 + 40 * i + (27 if c == 0 else 29))
             for c, column in enumerate(columns) for i, text in enumerate(column)]
    read = [line.text for block in order_blocks(_page(three), height=1100) for line in block.lines]
    assert read == [text for column in columns for text in column]
