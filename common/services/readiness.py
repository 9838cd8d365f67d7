"""Is each part this service depends on reachable? Used by /readyz."""

from __future__ import annotations

import httpx
from sqlalchemy import text

from common.services.jobs import Services


def check_database(svc: Services) -> None:
    with svc.db.session() as session:
        session.execute(text("SELECT 1"))


def check_broker(svc: Services) -> None:
    with svc.celery.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=3)


def check_storage(svc: Services) -> None:
    svc.storage.ping()


def check_engine(svc: Services) -> None:
    """The CPU engine runs inside the workers; a vLLM engine must answer /v1/models."""
    if svc.settings.engine == "cpu":
        return
    errors = []
    for url in svc.settings.engine_urls:
        try:
            httpx.get(f"{url.rstrip('/')}/v1/models", timeout=3).raise_for_status()
            return
        except httpx.HTTPError as exc:
            errors.append(f"{url}: {exc}")
    raise RuntimeError("; ".join(errors) or "OCRQ_ENGINE_URLS is empty")


CHECKS = {"database": check_database, "broker": check_broker, "storage": check_storage, "engine": check_engine}


def readiness(svc: Services) -> dict[str, str]:
    """'ok' or the error, for each dependency by name."""
    report = {}
    for name, check in CHECKS.items():
        try:
            check(svc)
            report[name] = "ok"
        except Exception as exc:  # any failure means not ready; the message says which
            report[name] = f"error: {exc.__class__.__name__}: {exc}"[:300]
    return report
