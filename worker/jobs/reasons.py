"""What a tenant is told about a failure on the worker."""

from __future__ import annotations


def public_reason(exc: Exception) -> str:
    """The document's problem in a sentence, never a path or a repr from this worker."""
    if isinstance(exc, OSError):
        return "the document could not be read on the worker"
    return str(exc) or exc.__class__.__name__


def internal_error(index: int, *, attempts: int) -> str:
    """A page's reason when a defect in ocrq, not the document or an outage, stopped it (the log has the trace)."""
    tries = "once" if attempts == 1 else f"{attempts} times"
    return (f"internal_error: page {index + 1} could not be read because of an unexpected error in ocrq "
            f"(tried {tries}); the worker's log has the details")
