"""The safety net for at-least-once delivery: republish work whose message was lost.

A broker that restarts without persistence, a crash between commit and publish, or the
embedded filesystem broker (which has no acks) can all drop a message. The database is the
source of truth: anything still queued long after it was published, while its queue is
empty and no worker's lease names its message held unacked, is published again. Every task is idempotent, so a spare
copy is harmless, but a GPU worker's prefetched batches would otherwise be read twice.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from sqlalchemy import and_, exists, or_, select

from common.jobs import states as job_states
from common.jobs.models import Job, Page
from common.jobs.states import PAGE_ACTIVE
from common.orm import utcnow
from common.queue import publish as dispatch
from common.queue.depth import broker_snapshot, drop_held_pages
from common.queue.names import gpu_worker_queues, page_queue, prepare_queue
from worker.context import WorkerContext
from worker.jobs import routing
from worker.jobs.ending import close_job_if_done
from worker.queue import liveness

log = logging.getLogger("ocrq.sweeper")
BATCH = 1000


def requeue_stale(ctx: WorkerContext) -> dict[str, int]:
    """Republish lost prepare and page tasks, and close jobs whose last page closed without them."""
    now = utcnow()
    stale = now - timedelta(seconds=ctx.settings.stale_requeue_after_s)
    dead = now - timedelta(seconds=ctx.settings.task_time_limit_s + 60)
    counts = {"jobs": 0, "pages": 0, "closed": 0}
    with ctx.db.session() as session:
        jobs = session.execute(select(Job.id, Job.priority).where(
            or_(and_(Job.status == "queued", Job.created_at < stale),
                and_(Job.status == "running", Job.pages_total == 0, Job.started_at < stale)),
        ).limit(BATCH)).all()
        orphans = list(session.scalars(select(Job.id).where(
            Job.status == "running", Job.pages_total > 0,
            ~exists().where(Page.job_id == Job.id, Page.status.in_(PAGE_ACTIVE)),
        ).limit(BATCH)))
        pages = session.execute(select(Page.id, Job.priority, Page.status).join(Job).where(
            Job.status == "running",
            or_(and_(Page.status == "queued", Page.enqueued_at < stale),
                and_(Page.status == "running", Page.started_at < dead)),
        ).limit(BATCH)).all()
    # One look at the broker: what waits in each queue, and which pages workers hold unacked (a GPU worker
    # prefetches whole batches, whose pages stay queued in the database meanwhile). A held page is trusted only
    # while a worker's lease names it (a lapsed one's pages are recover_lapsed's, every heartbeat interval), or for
    # a lapse after it was taken (before its holder's next beat): a message a dead worker took after its last beat
    # would otherwise wait for the visibility timeout.
    depths, taken = broker_snapshot(ctx.settings) if jobs or pages else ({}, {})
    untrusted = _held_by_no_lease(ctx, taken)
    held = taken.keys() - untrusted
    for lane in {lane for _, lane in jobs}:
        if depths.get(prepare_queue(lane), 0) == 0:
            for job_id in (job_id for job_id, job_lane in jobs if job_lane == lane):
                dispatch.publish_prepare(ctx.app, job_id=job_id, lane=lane)
                counts["jobs"] += 1
    # A page running past the hard time limit is republished even if held: its worker is gone or stuck.
    for lane in {lane for _, lane, _ in pages}:
        ids = [page_id for page_id, page_lane, status in pages
               if page_lane == lane and not (status == "queued" and page_id in held)]
        # While the lane's queues hold messages, a page's may be among them; one held by no live worker is not.
        if any(depths.get(queue, 0) for queue in (page_queue(lane), *gpu_worker_queues(lane))):
            ids = [page_id for page_id in ids if page_id in untrusted]
        if not ids:
            continue
        with ctx.db.session() as session:
            job_states.mark_enqueued(session, page_ids=ids)
        drop_held_pages(ctx.settings, page_ids=[page_id for page_id in ids if page_id in untrusted],
                        taken_before=time.time())
        routing.route_stored_pages(ctx, page_ids=ids, lane=lane, ahead=True)
        counts["pages"] += len(ids)
    for job_id in orphans:
        close_job_if_done(ctx, job_id=job_id)
    counts["closed"] = len(orphans)
    if any(counts.values()):
        log.warning("republished stale work", extra=counts)
    return counts


def _held_by_no_lease(ctx: WorkerContext, taken: dict[str, float]) -> set[str]:
    """The held pages (page id -> when its message was taken) that no worker's lease names, taken a lapse ago or
    more."""
    if not taken:
        return set()
    with ctx.db.session() as session:
        leased = liveness.leased_pages(session)
    recent = time.time() - ctx.settings.heartbeat_lapse_s
    return {page_id for page_id, taken_at in taken.items() if page_id not in leased and taken_at < recent}
