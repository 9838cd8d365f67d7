"""A job's end, one flow however it ends (its last page, a failure, a cancel): the new state, its counts and its
webhook event commit in one transaction; after that commit the event is sent and a batch job's item is closed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from common.jobs.models import Job
from common.jobs.states import refresh_counts
from common.log_format import JOB_ENDED_LOGGER
from common.orm import utcnow
from common.queue import publish as dispatch
from common.settings import Settings
from common.webhooks import service as webhooks

log = logging.getLogger("ocrq.jobs")
# One line per ended job: `ocrq serve` shows these at its console.
ended_log = logging.getLogger(JOB_ENDED_LOGGER)


@dataclass(frozen=True)
class JobEnded:
    job_id: str
    status: str
    batch_id: str | None
    delivery_id: str | None
    name: str | None = None
    pages: int = 0
    seconds: float = 0.0


def record_end(session: Session, *, settings: Settings, job_id: str, status: str) -> JobEnded:
    """In the transaction whose compare-and-set ended the job: its counts and its job.<status> event."""
    refresh_counts(session, job_id=job_id)
    delivery_id = webhooks.record_job_ended(session, settings=settings, job_id=job_id)
    batch_id, name, pages, created_at = session.execute(
        select(Job.batch_id, Job.filename, Job.pages_total, Job.created_at).where(Job.id == job_id)).one()
    return JobEnded(job_id=job_id, status=status, batch_id=batch_id, delivery_id=delivery_id, name=name,
                    pages=pages, seconds=(utcnow() - created_at).total_seconds())


def announce(celery: Celery, settings: Settings, ended: JobEnded | None, *,
             close_item: Callable[[JobEnded], None] | None = None) -> None:
    """After the commit: send the event, then close a batch job's item, in this process (`close_item`, a worker)
    or on a worker. Either may be lost to a crash; the webhook and batch sweepers make up for it."""
    if ended is None:
        return
    ended_log.info("job finished  %s  %s  %d page%s  %.1f s  %s", ended.job_id, ended.name or "-", ended.pages,
                   "" if ended.pages == 1 else "s", ended.seconds, ended.status,
                   extra={"job_id": ended.job_id, "status": ended.status})
    webhooks.publish_recorded(celery, settings, ended.delivery_id)
    if not ended.batch_id:
        return
    if close_item:
        close_item(ended)
        return
    try:
        dispatch.publish_item_ended(celery, job_id=ended.job_id)
    except Exception:  # the batch sweeper records items whose job ended unseen
        log.exception("publishing the end of batch job %s failed; the batch sweeper will record it", ended.job_id)
