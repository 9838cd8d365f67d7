"""Recording webhook events and publishing their deliveries; job and batch code call these."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from celery import Celery
from sqlalchemy import select

from common.db import Database
from common.jobs.models import Job
from common.jobs.states import JOB_TERMINAL
from common.orm import new_id, utcnow
from common.queue.publish import publish_deliveries
from common.settings import Settings
from common.sql import insert_ignoring_conflicts
from common.webhooks.events import EventType, base_url, envelope, job_data
from common.webhooks.models import WebhookDelivery

log = logging.getLogger("ocrq.webhooks")



def record_event(
    session,
    *,
    tenant_id: str,
    url: str,
    event_type: EventType,
    data: Mapping[str, Any],
    key: str | None = None,
    job_id: str | None = None,
    batch_id: str | None = None,
    first_delay_s: float = 0.0,
) -> str | None:
    """Add a pending delivery in the caller's transaction; None when `key` was recorded before."""
    now = utcnow()
    row = {
        "id": new_id(), "tenant_id": tenant_id, "event_type": event_type, "event_key": key, "job_id": job_id,
        "batch_id": batch_id, "url": url, "body": envelope(event_type=event_type, data=data, at=now),
        "status": "pending", "tries": 0, "attempts": 0, "published_at": now, "created_at": now,
        "next_attempt_at": now + timedelta(seconds=first_delay_s),
    }
    if key is None:
        session.add(WebhookDelivery(**row))
        session.flush()
        return row["id"]
    insert_ignoring_conflicts(session, WebhookDelivery, [row], keys=["event_key"])
    stored = session.scalar(select(WebhookDelivery.id).where(WebhookDelivery.event_key == key))
    return row["id"] if stored == row["id"] else None


def publish(celery: Celery, *, delivery_id: str, countdown: float | None = None) -> None:
    """Send the delivery task; a message lost here is republished by the webhook sweeper."""
    try:
        publish_deliveries(celery, delivery_ids=[delivery_id], countdown=countdown)
    except Exception:  # the delivery is committed as pending: the sweeper publishes it once the broker is back
        log.exception("publishing webhook delivery %s failed; the sweeper will retry", delivery_id)


def publish_recorded(celery: Celery, settings: Settings, delivery_id: str | None) -> None:
    """After the commit that recorded it, send a delivery's first try (a no-op for None)."""
    if delivery_id:
        publish(celery, delivery_id=delivery_id, countdown=settings.webhook_retry_schedule_s[0])


def enqueue_event(
    *,
    db: Database,
    celery: Celery,
    settings: Settings,
    tenant_id: str,
    url: str | None,
    event_type: EventType,
    data: Mapping[str, Any],
    key: str | None = None,
    job_id: str | None = None,
    batch_id: str | None = None,
) -> str | None:
    """Record an event and publish its delivery; None without a URL or when `key` was already recorded."""
    if not url:
        return None
    first_delay = settings.webhook_retry_schedule_s[0]
    with db.session() as session:
        delivery_id = record_event(session, tenant_id=tenant_id, url=url, event_type=event_type, data=data,
                                   key=key, job_id=job_id, batch_id=batch_id, first_delay_s=first_delay)
    if delivery_id:
        publish(celery, delivery_id=delivery_id, countdown=first_delay)
    return delivery_id


def record_job_ended(session, *, settings: Settings, job_id: str) -> str | None:
    """Add job.<status> to the outbox in the caller's transaction, the one that ended the job; once per job.

    Committed with the job's final state, an event cannot be lost between two commits: should its publish
    never happen, the webhook sweeper sends the pending delivery.
    """
    job = session.scalar(select(Job).where(Job.id == job_id).execution_options(populate_existing=True))
    if job is None or not job.webhook_url or job.status not in JOB_TERMINAL:
        return None
    return record_event(
        session, tenant_id=job.tenant_id, url=job.webhook_url, event_type=f"job.{job.status}",
        data=job_data(job, base=base_url(settings)), key=f"job.{job.status}:{job.id}", job_id=job.id,
        batch_id=job.batch_id, first_delay_s=settings.webhook_retry_schedule_s[0],
    )


def notify_job_ended(*, db: Database, celery: Celery, settings: Settings, job_id: str) -> str | None:
    """Send job.<status> for a finished job that has a webhook_url; once per job, however often it is called."""
    with db.session() as session:
        delivery_id = record_job_ended(session, settings=settings, job_id=job_id)
    publish_recorded(celery, settings, delivery_id)
    return delivery_id
