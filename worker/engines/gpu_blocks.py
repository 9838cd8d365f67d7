"""A vLLM page's blocks: the model's markdown structure laid onto the detector's line boxes, with confidence
from the log-probabilities of the tokens the model sampled.

Kinds come from the markdown (worker/engines/markdown_blocks.py), positions from the detector's lines in
reading order (worker/engines/line_boxes.py): the page's words, in the model's order, are aligned onto the
boxes by length (common/pdf_output/placement.py), and a word's box is its share of its line's box.

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
    """The page's blocks in the model's order, boxes in the (upright) image's pixels; and the page's confidence."""
    parsed = markdown_blocks.parse(markdown)
    words = [w for block in parsed for w in block.words]
    index = _Tokens(tokens)
    page_confidence = index.confidence(range(len(tokens)))
    if not words:
        return [_figure(block, size) for block in parsed if block.box], page_confidence
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
        count = len(block.words)
        ids = range(first, first + count)
        first += count
        if block.kind == "figure" and not count:
            if block.box:
                blocks.append(_figure(block, size))
            continue
        lines: list[dict] = []
        line_ids: list[list[int]] = []
        for i in ids:
            if line_ids and on_box[line_ids[-1][-1]] == on_box[i]:
                line_ids[-1].append(i)
            else:
                line_ids.append([i])
        for members in line_ids:
            spans = [t for i in members for t in index.within(words[i].start, words[i].end)]
            lines.append({"text": " ".join(words[i].text for i in members), "box": _union(word_box[i] for i in members),
                          "confidence": index.confidence(spans),
                          "words": [{"text": words[i].text, "box": list(word_box[i]),
                                     "confidence": index.confidence(index.within(words[i].start, words[i].end))}
                                    for i in members]})
        spans = [t for i in ids for t in index.within(words[i].start, words[i].end)]
        out = {"kind": block.kind, "box": _union(word_box[i] for i in ids), "confidence": index.confidence(spans),
               "lines": lines}
        if block.rows is not None:
            out["rows"] = [[_cell([ids[k] for k in cell], words, word_box, index) for cell in row]
                           for row in block.rows]
        blocks.append(out)
    return blocks, page_confidence


def _cell(members: list[int], words, word_box, index: _Tokens) -> dict:
    if not members:
        return {"text": "", "box": None, "confidence": None}
    spans = [t for i in members for t in index.within(words[i].start, words[i].end)]
    return {"text": " ".join(words[i].text for i in members), "box": _union(word_box[i] for i in members),
            "confidence": index.confidence(spans)}


def _figure(block: markdown_blocks.MdBlock, size: tuple[int, int]) -> dict:
    """An image the model located, its 0–1000 box scaled to the page's pixels."""
    width, height = size
    x0, y0, x1, y1 = block.box
    box = [round(x0 * width / 1000), round(y0 * height / 1000), round(x1 * width / 1000), round(y1 * height / 1000)]
    return {"kind": "figure", "box": box, "confidence": None, "lines": []}


def _union(boxes) -> list[int]:
    boxes = list(boxes)
    return [min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)]
