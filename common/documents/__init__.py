"""Documents as users send them: sniffing, submit-time checks, page ranges and page rendering.

A pure library: no database, queue or HTTP. Untrusted bytes are only decoded in a forked child
process (see isolation.py), so a hostile file ends as DocumentRejected, never a dead caller.
"""

from .errors import REJECTION_CODES, DocumentRejected, PageRangeError
from .inspection import DocumentInfo, inspect
from .kinds import MIME_TYPES, SNIFF_BYTES, sniff
from .limits import Limits
from .ranges import parse_page_ranges
from .rendering import RenderedPage, render_page

__all__ = [
    "MIME_TYPES",
    "REJECTION_CODES",
    "SNIFF_BYTES",
    "DocumentInfo",
    "DocumentRejected",
    "Limits",
    "PageRangeError",
    "RenderedPage",
    "inspect",
    "parse_page_ranges",
    "render_page",
    "sniff",
]
