"""Laying text read without positions onto line boxes found without reading (the vLLM path: blocks, PDF text layer).

The detector gives boxes, not words, so the alignment is one of lengths: the page's words are cut into
runs, one per box in reading order, at the points where the words' running character count crosses the
boxes' running share of the page's line width (a monotone alignment). Every word lands on some box. A page
with text but no box at all gets its text as one page-level block: its lines spread down the page's full
width, so the page stays searchable, with no claim about where the words are.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

Box = tuple[int, int, int, int]


def place_words(text: str, boxes: list[Box], *, size: tuple[int, int]) -> list[tuple[str, Box]]:
    """Each box with the run of words that falls on it; the text as a page-level block when there is no box."""
    words = text.split()
    if not words:
        return []
    if not boxes:
        return page_block(text, size)
    runs: list[list[str]] = [[] for _ in boxes]
    for word, at in zip(words, assign_words(words, boxes), strict=True):
        runs[at].append(word)
    return [(" ".join(run), box) for run, box in zip(runs, boxes, strict=True) if run]


def assign_words(words: list[str], boxes: list[Box]) -> list[int]:
    """The box each word falls on, in reading order (a monotone alignment of lengths); boxes must not be empty."""
    # A box holds characters in proportion to its width over its height (the glyph size).
    capacity = [max(x1 - x0, 1) / max(y1 - y0, 1) for x0, y0, x1, y1 in boxes]
    ends = list(accumulate(capacity))
    ends_of_words = list(accumulate(len(w) + 1 for w in words))
    scale = ends[-1] / ends_of_words[-1]
    return [min(bisect_right(ends, (start + end) / 2 * scale), len(boxes) - 1)
            for start, end in zip([0, *ends_of_words[:-1]], ends_of_words, strict=True)]


def split_box(words: list[str], box: Box) -> list[Box]:
    """Each word's share of a line's box, in proportion to its characters (a space between words counts one)."""
    x0, y0, x1, y1 = box
    per_char = (x1 - x0) / max(sum(len(w) for w in words) + len(words) - 1, 1)
    boxes, x = [], float(x0)
    for word in words:
        right = min(x + per_char * len(word), x1)
        boxes.append((int(x), y0, max(round(right), int(x) + 1), y1))
        x = right + per_char
    return boxes


def page_block(text: str, size: tuple[int, int]) -> list[tuple[str, Box]]:
    """The text's lines spread down the page's full width: searchable, with no claim about where the words are."""
    width, height = size
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    step = height / len(lines)
    return [(line, (0, int(i * step), width, int(i * step + min(step, height * 0.05)))) for i, line in enumerate(lines)]
