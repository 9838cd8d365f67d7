"""Parsing of page selections such as "1-3,7"."""

from __future__ import annotations

import re

from .errors import PageRangeError

_SINGLE = re.compile(r"\s*([0-9]+)\s*")
_RANGE = re.compile(r"\s*([0-9]*)\s*-\s*([0-9]*)\s*")


def parse_page_ranges(spec: str | None, page_count: int, *, clamp: bool = False) -> list[int]:
    """0-based, sorted, deduplicated page indexes selected by a 1-based spec; None or "" means all. With `clamp`, a
    range that runs past the document ends at its last page (a range that starts past it is still refused)."""
    if page_count <= 0:
        raise PageRangeError("The document has no pages to select.")
    if spec is None or not spec.strip():
        return list(range(page_count))
    selected: set[int] = set()
    for part in spec.split(","):
        first, last = _bounds(part, spec, page_count, clamp=clamp)
        selected.update(range(first - 1, last))
    return sorted(selected)


def _bounds(part: str, spec: str, page_count: int, *, clamp: bool) -> tuple[int, int]:
    if match := _SINGLE.fullmatch(part):
        first = last = _number(match[1])
    elif (match := _RANGE.fullmatch(part)) and (match[1] or match[2]):
        first = _number(match[1]) if match[1] else 1
        last = _number(match[2]) if match[2] else page_count
    else:
        raise PageRangeError(
            f"Invalid page selection {spec!r}: {part.strip()!r} is not a page or a range "
            "(use forms like \"1-3,7\", \"5-\" or \"-4\")."
        )
    if first < 1 or last < 1:
        raise PageRangeError(f"Invalid page selection {spec!r}: pages are numbered from 1.")
    if clamp and first <= page_count < last:
        last = page_count
    if (beyond := first if clamp else max(first, last)) > page_count:
        pages = "page" if page_count == 1 else "pages"
        raise PageRangeError(
            f"Invalid page selection {spec!r}: page {beyond} is beyond the end of the document, "
            f"which has {page_count} {pages}."
        )
    if first > last:
        raise PageRangeError(f"Invalid page selection {spec!r}: the range {part.strip()!r} runs backwards.")
    return first, last


def _number(digits: str) -> int:
    # Past 9 digits any page number is out of range; int() would refuse thousands of digits.
    return int(digits) if len(digits) <= 9 else 10**9
