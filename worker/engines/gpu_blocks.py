"""A vLLM page's blocks: the model's markdown structure laid onto the detector's line boxes, with confidence
from the log-probabilities of the tokens the model sampled.

Kinds come from the markdown (worker/engines/markdown_blocks.py), positions from the detector's lines in
reading order (worker/engines/line_boxes.py): the page's words, in the model's order, are aligned onto the
boxes by length (common/formats/placement.py), and a word's box is its share of its line's box.

Confidence is the geometric mean of the probabilities of the tokens that make the word, line, block or page
(exp of their mean log-probability, i.e. 1/perplexity): a length-normalised likelihood that neither
punishes long lines for their length, as a product would, nor hides one unlikely token, as the arithmetic
mean of probabilities nearly does.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from common.formats.placement import Box, assign_words, page_block, split_box
from common.formats.tables import Cell, Table, caption_in, table_fields
from worker.engines import markdown_blocks


@dataclass(frozen=True)
class Token:
    start: int  # offsets of the token in the completion's text
    end: int
    logprob: float


def token_spans(text: str, logprobs: list[dict] | None) -> list[Token]:
    """Each sampled token with its place in the text, from the OpenAI chat `logprobs.content` list.

    The tokens' strings are laid end to end; where they do not spell the text (a multi-byte character cut
    between tokens), their UTF-8 bytes are used, and failing that their lengths are scaled onto the text.
    """
    if not logprobs:
        return []
    pieces = [entry.get("token") or "" for entry in logprobs]
    values = [float(entry.get("logprob", -9999.0)) for entry in logprobs]
    if "".join(pieces) == text:
        lengths = [len(p) for p in pieces]
    elif all(entry.get("bytes") is not None for entry in logprobs) and \
            b"".join(bytes(entry["bytes"]) for entry in logprobs) == text.encode():
        char_end = [len(text.encode()[:n].decode(errors="ignore")) for n in range(len(text.encode()) + 1)]
        ends, at = [], 0
        for entry in logprobs:
            at += len(entry["bytes"])
            ends.append(char_end[at])
        lengths = [b - a for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    else:
        scale = len(text) / max(sum(len(p) for p in pieces), 1)
        lengths = [len(p) * scale for p in pieces]
    tokens, at = [], 0.0
    for length, value in zip(lengths, values, strict=True):
        tokens.append(Token(round(at), round(at + length), value))
        at += length
    return tokens


def confidence(logprobs: list[float]) -> float | None:
    """The geometric mean of the tokens' probabilities; None without tokens."""
    return round(math.exp(sum(logprobs) / len(logprobs)), 4) if logprobs else None


class _Tokens:
    """The tokens that overlap a span of the text."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.starts = [t.start for t in tokens]
        self.ends = [t.end for t in tokens]

    def within(self, start: int, end: int) -> range:
        return range(bisect_right(self.ends, start), bisect_left(self.starts, end))

    def confidence(self, indices) -> float | None:
        return confidence([self.tokens[i].logprob for i in sorted(set(indices))])


def build_blocks(markdown: str, boxes: list[Box], tokens: list[Token], *,
                 size: tuple[int, int]) -> tuple[list[dict], float | None]:
    """The page's blocks in the model's order, boxes in the (upright) image's pixels; and the page's confidence.

    Plain markdown: all the page's words are aligned onto all the detected lines. Grounding output
    (LightOnOCR-3): each block's words onto the detected lines whose middle lies in the model's box for it,
    or onto the box itself, cut into lines, where no detected line does.
    """
    index = _Tokens(tokens)
    page_confidence = index.confidence(range(len(tokens)))
    if markdown_blocks.is_grounded(markdown):
        parsed = markdown_blocks.parse_grounded(markdown)
        groups = [([block], _inside(boxes, _pixels(block.box, size)) or [_pixels(block.box, size)])
                  for block in parsed]
    else:
        parsed = markdown_blocks.parse(markdown)
        groups = [(parsed, boxes)]
    blocks = []
    for group, group_boxes in groups:
        blocks += _lay(group, group_boxes, index, size)
    return blocks, page_confidence


def _lay(parsed: list[markdown_blocks.MdBlock], boxes: list[Box], index: _Tokens, size) -> list[dict]:
    """The blocks with their words aligned onto the boxes in order, lines where consecutive words share a box."""
    words = [w for block in parsed for w in block.words]
    if not words:
        return [_figure(block, size) for block in parsed if block.box]
    if not boxes:  # text but no line found: spread down the page, as the PDF's text layer does
        boxes = [box for _, box in page_block("\n".join(" ".join(w.text for w in b.words) for b in parsed), size)]
    on_box = assign_words([w.text for w in words], boxes)
    word_box: list[Box] = [boxes[0]] * len(words)
    for n, box in enumerate(boxes):
        members = [i for i, at in enumerate(on_box) if at == n]
        for i, part in zip(members, split_box([words[i].text for i in members], box), strict=True):
            word_box[i] = part
    blocks, first = [], 0
    for block in parsed:
        ids = range(first, first + len(block.words))
        first += len(block.words)
        if not ids:
            if block.box:
                blocks.append(_figure(block, size))
            continue
        line_ids: list[list[int]] = []
        for i in ids:
            if line_ids and on_box[line_ids[-1][-1]] == on_box[i]:
                line_ids[-1].append(i)
            else:
                line_ids.append([i])
        lines = [{"text": " ".join(words[i].text for i in members), "box": _union(word_box[i] for i in members),
                  "confidence": index.confidence(_spans(index, words, members)),
                  "words": [{"text": words[i].text, "box": list(word_box[i]),
                             "confidence": index.confidence(_spans(index, words, [i]))} for i in members]}
                 for members in line_ids]
        out = {"kind": block.kind, "box": _pixels(block.box, size) if block.box else _union(word_box[i] for i in ids),
               "confidence": index.confidence(_spans(index, words, ids)), "lines": lines}
        if block.label:
            out["label"] = block.label
        if block.table is not None:
            table = _table(block, [[ids[k] for k in cell] for cell in block.cell_words], words, word_box, index)
            if table.caption is None and blocks and blocks[-1]["kind"] in ("text", "title"):
                table.caption = caption_in(" ".join(ln["text"] for ln in blocks[-1]["lines"]))
            out |= table_fields(table)
        blocks.append(out)
    return blocks


def _spans(index: _Tokens, words, members) -> list[int]:
    return [t for i in members for t in index.within(words[i].start, words[i].end)]


def _pixels(box, size: tuple[int, int]) -> list[int]:
    """A 0–1000 box in the page's pixels."""
    width, height = size
    x0, y0, x1, y1 = box
    return [round(x0 * width / 1000), round(y0 * height / 1000), round(x1 * width / 1000), round(y1 * height / 1000)]


def _inside(boxes: list[Box], area: list[int]) -> list[Box]:
    """The boxes whose middle lies in the area, in their (reading) order."""
    return [b for b in boxes if area[0] <= (b[0] + b[2]) / 2 <= area[2] and area[1] <= (b[1] + b[3]) / 2 <= area[3]]


def _table(block: markdown_blocks.MdBlock, members: list[list[int]], words, word_box, index: _Tokens) -> Table:
    """The parsed table with each cell's box and confidence from its words."""
    cells = [Cell(row=c.row, col=c.col, text=c.text, row_span=c.row_span, col_span=c.col_span, header=c.header,
                  box=_union(word_box[i] for i in ids) if ids else None,
                  confidence=index.confidence(_spans(index, words, ids)) if ids else None)
             for c, ids in zip(block.table.cells, members, strict=True)]
    return Table(rows=block.table.rows, columns=block.table.columns, cells=cells, caption=block.table.caption)


def _figure(block: markdown_blocks.MdBlock, size: tuple[int, int]) -> dict:
    """An image the model located, its box in the page's pixels."""
    out = {"kind": "figure", "box": _pixels(block.box, size), "confidence": None, "lines": []}
    return out | ({"label": block.label} if block.label else {})


def _union(boxes) -> list[int]:
    boxes = list(boxes)
    return [min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)]
