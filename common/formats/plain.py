"""Plain text from markdown, the one conversion every result format and engine shares; it imports nothing of
ocrq's, so the result assembly (common/jobs/results.py) and the page layouts (common/formats/structure.py) both
sit above it."""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<[^>]+>")
_MD_PREFIX = re.compile(r"^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+(?=\S))", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|`)(?=\S)(.+?)(?<=\S)\1")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def markdown_to_text(markdown: str) -> str:
    """Plain text from the engine's markdown: markup and HTML tags dropped, words kept."""
    text = _IMAGE_OR_LINK.sub(r"\1", markdown)
    text = re.sub(r"</(td|th)>", "\t", text)
    text = re.sub(r"<br\s*/?>|</tr>|</p>", "\n", text)
    text = _TAG.sub("", text)
    text = _MD_PREFIX.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    return html.unescape(text)
