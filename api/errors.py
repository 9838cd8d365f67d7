"""Domain errors mapped to HTTP; internals never leak into responses."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from common import outages
from common.services.jobs import NotFound, Rejected

log = logging.getLogger("ocrq.api")


def install(app: FastAPI) -> None:
    @app.exception_handler(Rejected)
    async def _rejected(_request: Request, exc: Rejected) -> JSONResponse:
        return JSONResponse({"detail": exc.detail, "code": exc.code}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(NotFound)
    async def _not_found(_request: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": f"no such resource: {exc}"}, status_code=404)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"detail": "internal error"}, status_code=500)

    async def _outage(request: Request, exc: Exception) -> JSONResponse:
        what = outages.outage_of(exc)
        if what is None:
            return await _unexpected(request, exc)
        log.warning("%s unreachable on %s %s: %s", what, request.method, request.url.path, exc.__class__.__name__)
        retry_s = request.app.state.services.settings.outage_retry_after_s
        return await _rejected(request, outages.rejection(what, retry_after_s=retry_s))

    for outage_type in (*outages.OUTAGE_TYPES, outages.Unavailable):
        app.add_exception_handler(outage_type, _outage)
