"""The task's soft time limit, found behind whatever an engine's library wrapped it in. Apart from base.py: the
engine host (`ocrq engine`) runs without Celery."""

from __future__ import annotations

from celery.exceptions import SoftTimeLimitExceeded


def time_limit_in(exc: BaseException) -> SoftTimeLimitExceeded | None:
    """The task's soft time limit behind an exception: rapidocr re-raises everything as its own error."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, SoftTimeLimitExceeded):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
