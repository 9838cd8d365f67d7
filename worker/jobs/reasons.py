"""What a tenant is told about a failure on the worker."""

from __future__ import annotations


def public_reason(exc: Exception) -> str:
    """The document's problem in a sentence, never a path or a repr from this worker."""
    if isinstance(exc, OSError):
        return "the document could not be read on the worker"
    return str(exc) or exc.__class__.__name__
