"""Which dependency an exception says is unreachable. The API answers these with 503 and Retry-After;
workers put the work back for later instead of failing it."""

from __future__ import annotations

import botocore.exceptions as boto
import kombu.exceptions
import psycopg
import redis.exceptions
import sqlalchemy.exc
from botocore.exceptions import ClientError

# S3 answers that mean "not now", as opposed to a missing object or a refused credential.
S3_BUSY_CODES = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500"}
_BY_TYPE: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, sqlalchemy.exc.TimeoutError,
      psycopg.OperationalError, psycopg.InterfaceError), "database"),
    ((boto.ConnectionError, boto.HTTPClientError), "storage"),
    ((kombu.exceptions.OperationalError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError), "broker"),
)
# What a task retries itself on (with back-off): a write that did not reach the database, or storage that did
# not connect. S3's "not now" answers are ClientErrors that the task code tells apart itself.
TASK_RETRY_TYPES: tuple[type[BaseException], ...] = (*_BY_TYPE[0][0], boto.ConnectionError, boto.HTTPClientError)
OUTAGE_TYPES: tuple[type[BaseException], ...] = (*(t for types, _ in _BY_TYPE for t in types), ClientError)


class Unavailable(Exception):
    """A dependency did not answer; `what` is database, storage or broker."""

    def __init__(self, what: str, cause: BaseException) -> None:
        super().__init__(f"the {what} is unreachable ({cause.__class__.__name__})")
        self.what = what


def rejection(what: str, *, retry_after_s: int):
    """The 503 the API answers while `what` is down."""
    from common.errors import Rejected

    return Rejected(503, f"the {what} is unreachable just now; retry in {retry_after_s} s",
                    code=f"{what}_unavailable", headers={"Retry-After": str(retry_after_s)})


def outage_of(exc: BaseException) -> str | None:
    """'database', 'storage' or 'broker' when `exc` (or what it wraps) says that dependency is down; else None."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, Unavailable):
            return exc.what
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            return "storage" if {error.get("Code"), status} & S3_BUSY_CODES else None
        for types, what in _BY_TYPE:
            if isinstance(exc, types):
                return what
        exc, seen = exc.__cause__, seen + 1
    return None
