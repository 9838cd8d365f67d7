"""The batch sweeper: restart listings that stopped, record items whose job ended unseen, close batches left open.

A listing task killed mid-page, a message lost between commit and publish, a job canceled on its own
through DELETE /jobs/{id}, or a worker dying between a job's end and its item's record would each leave a
batch open for ever; the database says which, and every step taken here is safe to repeat.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import exists, or_, select, update

from common.batches.models import Batch, BatchItem
from common.jobs.models import Job, Page
from common.jobs.states import JOB_TERMINAL
from common.orm import utcnow
from common.queue import publish as dispatch
from common.queue.depth import depths_of
from common.queue.names import LISTING_QUEUE
from worker.batches.results import finish_if_done, item_finished
from worker.context import WorkerContext

log = logging.getLogger("ocrq.sweeper")
BATCH = 500


def sweep(ctx: WorkerContext) -> dict[str, int]:
    """One pass over open batches; returns how many listings, items and batches it acted on."""
    stale = utcnow() - timedelta(seconds=ctx.settings.batch_stale_after_s)
    with ctx.db.session() as session:
        listings = list(session.scalars(
            select(Batch.id).where(Batch.status == "listing", Batch.updated_at < stale).limit(BATCH)
        ))
        ended = list(session.scalars(
            select(BatchItem.job_id).join(Job, Job.id == BatchItem.job_id)
            .where(BatchItem.status == "queued", Job.status.in_(JOB_TERMINAL), Job.finished_at < stale)
            .limit(BATCH)
        ))
        unclosed = list(session.scalars(
            select(Batch.id).where(
                Batch.finished_at.is_(None), or_(Batch.listing_done, Batch.status == "canceled"),
                ~exists().where(BatchItem.batch_id == Batch.id, BatchItem.status == "queued"),
            ).limit(BATCH)
        ))
    counts = {"listings": 0, "items": 0, "closed": 0}
    if listings and listing_queue_depth(ctx) == 0:
        with ctx.db.session() as session:
            session.execute(update(Batch).where(Batch.id.in_(listings), Batch.status == "listing")
                            .values(updated_at=utcnow()))
        for batch_id in listings:
            dispatch.publish_list_batch(ctx.app, batch_id=batch_id)
        counts["listings"] = len(listings)
    for job_id in ended:
        with ctx.db.session() as session:
            job = session.get(Job, job_id)
            pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
        item_finished(ctx, job=job, pages=pages, status=job.status)
    counts["items"] = len(ended)
    counts["closed"] = sum(finish_if_done(ctx, batch_id=batch_id) is not None for batch_id in unclosed)
    if any(counts.values()):
        log.warning("batch sweeper acted", extra=counts)
    return counts


def listing_queue_depth(ctx: WorkerContext) -> int:
    """Listing tasks waiting in the broker."""
    return depths_of(ctx.settings, [LISTING_QUEUE])[LISTING_QUEUE]
