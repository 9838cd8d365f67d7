"""A vLLM page's structure from the model's markdown: block kinds, table cells, word offsets, token confidence,
and LightOnOCR-3 grounding output (the format of lightonai/LightOnOCR's README, "Grounding output")."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from worker.engines.gpu_blocks import build_blocks, token_spans
from worker.engines.markdown_blocks import grounded_markdown, parse

MARKDOWN = """# The **Harbour** Review

First paragraph line one
goes on &amp; on.

- item one
- item *two*

<table><tr><th>Vessel</th><th>Tons</th></tr>
<tr><td>Mary Ann</td><td>340</td></tr></table>

$$
E = mc^2
$$

![image](image_1.png) 100,200,500,600

Last words."""


def test_kinds_words_and_cells_come_from_the_markdown():
    blocks = parse(MARKDOWN)
    assert [b.kind for b in blocks] == ["title", "text", "list", "table", "formula", "figure", "text"]
    assert [[w.text for w in b.words] for b in blocks[:3]] == [
        ["The", "Harbour", "Review"], ["First", "paragraph", "line", "one", "goes", "on", "&", "on."],
        ["item", "one", "item", "two"]]
    table = blocks[3]
    assert [[table.words[i].text for i in cell] for cell in table.cell_words] == [
        ["Vessel"], ["Tons"], ["Mary", "Ann"], ["340"]]
    assert [(c.row, c.col, c.text) for c in table.table.cells] == [
        (0, 0, "Vessel"), (0, 1, "Tons"), (1, 0, "Mary Ann"), (1, 1, "340")]
    assert [w.text for w in blocks[4].words] == ["E", "=", "mc^2"] and blocks[5].box == (100, 200, 500, 600)
    for block in blocks:  # every word's offsets point at it in the markdown (entities stay escaped there)
        for word in block.words:
            assert MARKDOWN[word.start:word.end] in (word.text, "&amp;")


def _tokens(text: str, pieces: list[str]) -> list[dict]:
    assert "".join(pieces) == text
    return [{"token": p, "logprob": math.log(0.5 + n / (2 * len(pieces))), "bytes": list(p.encode())}
            for n, p in enumerate(pieces)]


def test_words_lines_and_blocks_get_boxes_and_the_geometric_mean_of_their_tokens():
    text = "# Tide Tables\n\nHigh water at noon"
    pieces = ["#", " T", "ide", " Tables", "\n\n", "High", " water", " at", " noon"]
    logprobs = _tokens(text, pieces)
    boxes = [(10, 10, 300, 50), (10, 80, 400, 110)]
    blocks, page = build_blocks(text, boxes, token_spans(text, logprobs), size=(500, 200))
    value = [math.exp(t["logprob"]) for t in logprobs]
    assert page == pytest.approx(math.prod(value) ** (1 / len(value)), abs=1e-4)
    assert [b["kind"] for b in blocks] == ["title", "text"]
    title, body = blocks
    assert [w["text"] for w in title["lines"][0]["words"]] == ["Tide", "Tables"]
    # "Tide" is two tokens: the geometric mean of theirs.
    assert title["lines"][0]["words"][0]["confidence"] == pytest.approx(math.sqrt(value[1] * value[2]), abs=1e-4)
    assert [w["confidence"] for w in body["lines"][0]["words"]] == [round(v, 4) for v in value[5:]]
    assert title["box"] == [10, 10, 300, 50] and body["lines"][0]["box"] == [10, 80, 400, 110]
    words = body["lines"][0]["words"]
    assert all(a["box"][2] <= b["box"][0] for a, b in pairwise(words))  # left to right, not overlapping


def test_tokens_that_cut_a_character_are_placed_by_their_bytes():
    text = "café noir"
    raw = text.encode()
    cut = [raw[:4], raw[4:5], raw[5:]]  # "caf", the first byte of "é", its second byte and " noir"
    logprobs = [{"token": piece.decode(errors="replace"), "logprob": -0.1, "bytes": list(piece)} for piece in cut]
    spans = token_spans(text, logprobs)
    assert [(t.start, t.end) for t in spans] == [(0, 3), (3, 4), (4, 9)]  # "é" goes to the token completing it


GROUNDED = """![title](100,50,900,100) ## Arrivals
![text](100,120,480,400) Ships of deep draught came in
on the morning tide
![text+](520,120,900,400) and left before the ebb.
![table](100,420,900,600)
<table><tr><td>Mary Ann</td><td>340</td></tr></table>
![image](100,620,500,900) A chart of the bay
![page_number](490,950,510,970) 3"""


def test_grounding_output_gives_the_models_own_blocks_and_boxes():
    assert grounded_markdown(GROUNDED) == ("## Arrivals\n\nShips of deep draught came in\non the morning tide "
                                           "and left before the ebb.\n\n<table><tr><td>Mary Ann</td><td>340</td>"
                                           "</tr></table>\n\n3")
    # Two lines in the left column (their lengths in proportion to the text's), one in the right.
    detected = [(110, 260, 470, 320), (110, 340, 340, 400), (530, 260, 880, 320)]
    blocks, _ = build_blocks(GROUNDED, detected, [], size=(1000, 2000))
    assert [(b["kind"], b.get("label")) for b in blocks] == [
        ("title", "title"), ("text", "text"), ("text", "text+"), ("table", "table"), ("figure", "image"),
        ("footer", "page_number")]
    assert blocks[0]["box"] == [100, 100, 900, 200]  # 0-1000 scaled to the page
    assert [ln["text"] for ln in blocks[1]["lines"]] == ["Ships of deep draught came in", "on the morning tide"]
    assert [ln["box"] for ln in blocks[1]["lines"]] == [[110, 260, 470, 320], [110, 340, 340, 400]]
    assert blocks[3]["cells"][0]["text"] == "Mary Ann" and blocks[4]["lines"] == []
    assert blocks[5]["lines"][0]["box"] == [490, 1900, 510, 1940]  # no detected line inside: the model's box
