"""The Idempotency-Key header, and answering a repeated request with the stored response."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header
from fastapi.responses import JSONResponse

from common.tenancy.idempotency import MAX_KEY_LENGTH, Stored

IdempotencyKeyHeader = Annotated[str | None, Header(
    alias="Idempotency-Key", min_length=1, max_length=MAX_KEY_LENGTH,
    description="Repeat a request safely: the same key and body within 24 h return the first answer; "
                "the same key with another body answers 409.",
)]


def replayed(stored: Stored) -> JSONResponse:
    return JSONResponse(stored.body, status_code=stored.status_code, headers={"Idempotent-Replayed": "true"})
