"""A batch's counts, pages, rates and ETA, from its items and their jobs in one grouped query."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from common.batches.models import Batch, BatchItem
from common.jobs.models import Job
from common.orm import utcnow

COUNTS = ("listed", "queued", "running", "succeeded", "failed", "canceled", "skipped", "skipped_existing")


@dataclass(frozen=True)
class BatchProgress:
    counts: dict[str, int]
    pages_total: int
    pages_done: int
    pages_failed: int
    objects_per_s: float
    pages_per_s: float
    eta_s: float | None


def progress(session: Session, *, batch: Batch, now: datetime | None = None) -> BatchProgress:
    """Counts by item state (an item in flight is queued or running as its job is), with rates since creation."""
    rows = session.execute(
        select(BatchItem.status, Job.status, func.count(), func.coalesce(func.sum(Job.pages_total), 0),
               func.coalesce(func.sum(Job.pages_done), 0), func.coalesce(func.sum(Job.pages_failed), 0))
        .select_from(BatchItem)
        .outerjoin(Job, Job.id == BatchItem.job_id)
        .where(BatchItem.batch_id == batch.id)
        .group_by(BatchItem.status, Job.status)
    ).all()
    counts = dict.fromkeys(COUNTS, 0)
    pages = [0, 0, 0]
    for item_status, job_status, n, total, done, failed in rows:
        counts["listed"] += n
        if item_status == "queued":
            counts["queued" if job_status == "queued" else "running"] += n
        else:
            counts[item_status] += n
        pages = [pages[0] + total, pages[1] + done, pages[2] + failed]
    elapsed = max(((batch.finished_at or now or utcnow()) - batch.created_at).total_seconds(), 1e-3)
    objects_per_s = (counts["succeeded"] + counts["failed"]) / elapsed
    remaining = counts["queued"] + counts["running"]
    if batch.finished_at is not None:
        eta = 0.0
    elif objects_per_s > 0:
        eta = remaining / objects_per_s
    else:
        eta = None
    return BatchProgress(counts=counts, pages_total=pages[0], pages_done=pages[1], pages_failed=pages[2],
                         objects_per_s=round(objects_per_s, 3), pages_per_s=round(pages[1] / elapsed, 3),
                         eta_s=round(eta, 1) if eta is not None else None)
