"""Plain text from markdown, the one conversion every result format and engine shares; it imports nothing of
ocrq's, so the result assembly (common/jobs/results.py) and the page layouts (common/formats/structure.py) both
sit above it."""

from __future__ import annotations

import html
import re

_TAG = re.compile(r"<[^>]+>")
_MD_PREFIX = re.compile(r"^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+(?=\S))", re.MULTILINE)
# As CommonMark has it: `*` emphasises inside a word, `_` does not (snake_case_names keep their underscores), and
# a backslash-escaped mark is no mark. Escapes stay: the engines' own markdown escapes nothing, so a backslash
# there is the page's.
_EMPHASIS = re.compile(r"(?<!\\)(\*\*|\*|`)(?=\S)(.+?)(?<=[^\s\\])\1"
                       r"|(?<![\w\\])(__|_)(?=\S)(.+?)(?<=[^\s\\])\3(?!\w)")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def markdown_to_text(markdown: str) -> str:
    """Plain text from the engine's markdown: markup and HTML tags dropped, words kept."""
    text = _IMAGE_OR_LINK.sub(r"\1", markdown)
    text = re.sub(r"</(td|th)>", "\t", text)
    text = re.sub(r"<br\s*/?>|</tr>|</p>", "\n", text)
    text = _TAG.sub("", text)
    text = _MD_PREFIX.sub("", text)
    text = _EMPHASIS.sub(lambda m: m.group(2) if m.group(1) else m.group(4), text)
    return html.unescape(text)
