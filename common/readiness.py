"""Is each part this service depends on reachable? Used by /readyz."""

from __future__ import annotations

import httpx
from sqlalchemy import text

from common.engines.lanes import configured_engines
from common.engines.probe import EngineProbe, probe_engines
from common.services import Services
from common.settings import Settings

ENGINE_TIMEOUT_S = 3.0


def check_database(svc: Services) -> None:
    with svc.db.session() as session:
        session.execute(text("SELECT 1"))


def check_broker(svc: Services) -> None:
    with svc.celery.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=3)


def check_storage(svc: Services) -> None:
    svc.storage.ping()


def check_engine(settings: Settings, engines: list[EngineProbe]) -> None:
    """The CPU engine runs inside the workers; each lane with vLLM engines needs one answering /v1/models."""
    if settings.engine == "cpu":
        return
    if not settings.engine_urls:
        raise RuntimeError("OCRQ_ENGINE_URLS is empty")
    down = []
    for lane in dict.fromkeys(probe.lane for probe in engines):
        of_lane = [probe for probe in engines if probe.lane == lane]
        if not any(probe.serving for probe in of_lane):
            down.append(f"{lane} lane: no engine up (" + "; ".join(
                f"{p.url}: {p.error or 'its weight holder is gone'}" for p in of_lane) + ")")
    if down:
        raise RuntimeError("; ".join(down))


CHECKS = {"database": check_database, "broker": check_broker, "storage": check_storage}


def _outcome(check, *args) -> str:
    try:
        check(*args)
        return "ok"
    except Exception as exc:  # any failure means not ready; the message says which
        return f"error: {exc.__class__.__name__}: {exc}"[:300]


def readiness(svc: Services) -> dict:
    """'ok' or the error for each dependency by name, the names of those down, and what each engine answered."""
    checks = {name: _outcome(check, svc) for name, check in CHECKS.items()}
    engines: list[EngineProbe] = []
    try:
        with httpx.Client(timeout=ENGINE_TIMEOUT_S) as client:
            engines = probe_engines(client, configured_engines(svc.settings))
    except Exception as exc:  # readiness reports, it never fails itself
        checks["engine"] = f"error: {exc.__class__.__name__}: {exc}"[:300]
    else:
        checks["engine"] = _outcome(check_engine, svc.settings, engines)
    down = [name for name, value in checks.items() if value != "ok"]
    return {"status": "not ready" if down else "ready", "down": down, "checks": checks,
            "engines": [probe.as_dict() for probe in engines]}
