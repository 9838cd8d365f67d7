"""Domain errors mapped to HTTP; internals never leak into responses.

Every error body has one shape, `{"code": ..., "detail": ...}`: a machine code and a plain sentence.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from api.uploads import validation_message
from common import outages
from common.errors import NotFound, Rejected

log = logging.getLogger("ocrq.api")

HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
              405: "method_not_allowed", 406: "not_acceptable", 409: "conflict", 413: "too_large",
              415: "unsupported_media_type", 422: "invalid_request", 429: "rate_limited", 503: "unavailable"}


class ErrorBody(BaseModel):
    """Every error answer: a machine code and a plain sentence; a few add fields (e.g. `status`)."""

    model_config = ConfigDict(extra="allow")

    code: str
    detail: str


def problem(status: int, detail: str, /, *, code: str | None = None, headers: dict | None = None,
            **extra: object) -> JSONResponse:
    """The one error body: a machine code and a plain sentence, with any extra fields after them."""
    body = {"code": code or HTTP_CODES.get(status, "error"), "detail": detail, **extra}
    return JSONResponse(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(Rejected)
    async def _rejected(_request: Request, exc: Rejected) -> JSONResponse:
        return problem(exc.status, exc.detail, code=exc.code, headers=exc.headers)

    @app.exception_handler(NotFound)
    async def _not_found(_request: Request, exc: NotFound) -> JSONResponse:
        return problem(404, f"no such resource: {exc}", code="not_found")

    @app.exception_handler(HTTPException)
    async def _http(_request: Request, exc: HTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else "the request was refused"
        return problem(exc.status_code, detail, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem(422, validation_message(exc), code="invalid_request")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "internal error", code="internal")

    async def _outage(request: Request, exc: Exception) -> JSONResponse:
        what = outages.outage_of(exc)
        if what is None:
            return await _unexpected(request, exc)
        log.warning("%s unreachable on %s %s: %s", what, request.method, request.url.path, exc.__class__.__name__)
        retry_s = request.app.state.services.settings.outage_retry_after_s
        return await _rejected(request, outages.rejection(what, retry_after_s=retry_s))

    for outage_type in (*outages.OUTAGE_TYPES, outages.Unavailable):
        app.add_exception_handler(outage_type, _outage)
