"""/healthz (the process is alive) and /readyz (every dependency answers)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from api.deps import ServicesDep
from common.readiness import readiness

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {}})
async def readyz(svc: ServicesDep) -> JSONResponse:
    report = await run_in_threadpool(readiness, svc)
    return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503)
