"""The domain errors every service raises; api/errors.py maps them to HTTP answers."""

from __future__ import annotations


class Rejected(Exception):
    """The request cannot be accepted; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, detail: str, *, code: str = "rejected",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.code, self.headers = status, detail, code, headers


class NotFound(Exception):
    pass
