"""Errors raised for documents and pages that ocrq refuses."""

from __future__ import annotations

# Every DocumentRejected.code, for callers that map codes to HTTP statuses or page errors.
REJECTION_CODES = frozenset(
    {
        "empty_file",
        "unsupported_type",
        "invalid_pdf",
        "encrypted_pdf",
        "empty_pdf",
        "too_many_pages",
        "page_too_large",
        "page_too_small",
        "page_aspect_ratio",
        "page_out_of_range",
        "decompression_bomb",
        "corrupt_image",
        "render_timeout",
        "render_crashed",
        "corrupt_file",
        "macros_refused",
        "xml_entities",
        "office_unavailable",
        "conversion_failed",
    }
)


class DocumentRejected(Exception):
    """A document or page refused with a short machine code and a human reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self):
        return (type(self), (self.code, self.message))

    def __repr__(self) -> str:
        return f"DocumentRejected({self.code!r}, {self.message!r})"


class PageRangeError(ValueError):
    """A `pages` selection that is malformed or selects nothing in the document."""
