"""What happens once when a job reaches its final state."""

from __future__ import annotations

import logging

from sqlalchemy import exists, func, select, update

from common import job_states, results
from common.models import Job, Page
from common.object_keys import result_prefix
from worker import batch_results
from worker.context import WorkerContext

log = logging.getLogger("ocrq.jobs")


def store_large_result(ctx: WorkerContext, *, job_id: str) -> None:
    """Once every page is done, put a result too large to serve inline into object storage.

    Runs before the job is marked succeeded, so a client never sees it finished without its link;
    two closers racing write the same objects, which is harmless.
    """
    with ctx.db.session() as session:
        # Cheap checks first: this runs after every page, and only the last one needs the pages' text.
        job = session.get(Job, job_id)
        if job.status != "running" or session.scalar(select(exists().where(
                Page.job_id == job_id, Page.status.in_(job_states.PAGE_ACTIVE)))):
            return
        size = session.scalar(select(func.coalesce(func.sum(func.length(Page.text)), 0)).where(Page.job_id == job_id))
        if size <= ctx.settings.inline_result_bytes:
            return
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
    prefix = result_prefix(tenant_id=job.tenant_id, job_id=job_id)
    for fmt in results.FORMATS:
        body = results.render(job, pages, fmt, status="succeeded").encode()
        ctx.storage.put(results.object_key(prefix, fmt), body, content_type=results.MEDIA_TYPES[fmt])
    with ctx.db.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(result_key=prefix))


def job_finished(ctx: WorkerContext, *, job_id: str, status: str) -> None:
    """Runs once after a job reached its final state (its webhook event committed with it): batch bookkeeping.

    A crash before this runs is made good by the batch sweeper, which finishes items of ended jobs.
    """
    with ctx.db.session() as session:
        job = session.get(Job, job_id)
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
    log.info("job finished", extra={"job_id": job_id, "status": status})
    if job.batch_id:
        batch_results.item_finished(ctx, job=job, pages=pages, status=status)
