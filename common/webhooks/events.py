"""The JSON bodies of webhook events: ids, status, counts, links and the user's metadata, never the text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from common.jobs.models import Job
from common.settings import Settings

EventType = Literal["job.succeeded", "job.failed", "job.canceled", "batch.completed", "batch.progress"]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
ERROR_CHARS = 500


def base_url(settings: Settings) -> str:
    """Where links in events point: OCRQ_PUBLIC_URL, or the address the API listens on."""
    return (settings.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")


def job_data(job: Job, *, base: str) -> dict[str, Any]:
    """The `data` of a job.* event."""
    links = {"self": f"{base}/jobs/{job.id}", "webhooks": f"{base}/jobs/{job.id}/webhooks"}
    if job.status == "succeeded":
        links["result"] = f"{base}/jobs/{job.id}/result"
    return {
        "id": job.id,
        "object": "job",
        "status": job.status,
        "batch_id": job.batch_id,
        "filename": job.filename,
        "pages_total": job.pages_total,
        "pages_done": job.pages_done,
        "pages_failed": job.pages_failed,
        "error": job.error[:ERROR_CHARS] if job.error else None,
        "metadata": job.meta,
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
        "links": links,
    }


def batch_data(
    *,
    batch_id: str,
    status: str,
    counts: Mapping[str, int],
    base: str,
    metadata: Mapping[str, Any] | None = None,
    links: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The `data` of a batch.* event: counts such as {"total": 40, "succeeded": 38, "failed": 2}."""
    return {
        "id": batch_id,
        "object": "batch",
        "status": status,
        "counts": dict(counts),
        "metadata": dict(metadata) if metadata is not None else None,
        "links": {"self": f"{base}/batches/{batch_id}", **(links or {})},
    }


def envelope(*, event_type: str, data: Mapping[str, Any], at: datetime) -> str:
    """The body as signed and sent on every try: {"type", "timestamp", "data"} in compact JSON."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    payload = {"type": event_type, "timestamp": _iso(at), "data": data}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
