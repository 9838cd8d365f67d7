"""A cap on each tenant's running pages, enforced when a worker claims a page.

The claim is one conditional UPDATE: "mark this page running if its tenant runs fewer than N
other pages". On Postgres a per-tenant advisory lock, held to the end of the claim's transaction,
makes the count and the write one step for that tenant; SQLite has a single writer, and the
UPDATE takes the write lock before it counts.
"""

from __future__ import annotations

import random
from datetime import timedelta

from sqlalchemy import exists, func, or_, select, text
from sqlalchemy.orm import Session, aliased

from common.jobs import states as job_states
from common.jobs.models import Job, Page
from common.orm import utcnow
from common.queue.leases import Lease
from common.settings import Settings
from worker.context import WorkerContext
from worker.jobs import routing


class OverCap(Exception):
    """The page's tenant already runs its share of pages; the page stays queued."""

    def __init__(self, lane: str) -> None:
        super().__init__(lane)
        self.lane = lane


def claim_page(session: Session, *, page_id: str, settings: Settings, worker: str | None = None,
               delivery: str | None = None) -> int | None:
    """job_states.claim_page, but raise OverCap while the tenant runs `tenant_max_running_pages` others."""
    limit = settings.tenant_max_running_pages
    if not limit:
        return job_states.claim_page(session, page_id=page_id, worker=worker, delivery=delivery)
    owner = session.execute(select(Job.tenant_id, Job.priority).join(Page).where(Page.id == page_id)).first()
    if owner is None:
        return None
    tenant_id, lane = owner
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                        {"key": f"ocrq.tenant-pages:{tenant_id}"})
    attempts = job_states.claim_page(session, page_id=page_id, worker=worker, delivery=delivery,
                                     also=_running_elsewhere(tenant_id, page_id, settings) < limit)
    if attempts is not None:
        return attempts
    if session.scalar(select(Page.id).where(job_states.claimable_page(page_id, worker, delivery))):
        raise OverCap(lane)
    return None


def _running_elsewhere(tenant_id: str, page_id: str, settings: Settings):
    """The tenant's other running pages of live workers: one whose claimer's lease lapsed, or running past the hard
    time limit, belongs to a dead worker and is queued again by a sweeper."""
    other, job = aliased(Page), aliased(Job)
    now = utcnow()
    alive_since = now - timedelta(seconds=settings.task_time_limit_s + 60)
    claimer_alive = exists().where(Lease.name == other.claimed_by, Lease.expires_at >= now)
    return (
        select(func.count()).select_from(other).join(job, job.id == other.job_id)
        .where(job.tenant_id == tenant_id, other.status == "running", other.id != page_id,
               other.started_at > alive_since, or_(other.claimed_by.is_(None), claimer_alive))
        .scalar_subquery()
    )


def defer(ctx: WorkerContext, *, page_id: str, lane: str) -> None:
    """Publish the page again a little later; it was never claimed, so no attempt is counted."""
    with ctx.db.session() as session:
        job_states.mark_enqueued(session, page_ids=[page_id])
    countdown = ctx.settings.tenant_defer_s * (1 + random.random() / 2)
    routing.route_stored_pages(ctx, page_ids=[page_id], lane=lane, countdown=countdown)
