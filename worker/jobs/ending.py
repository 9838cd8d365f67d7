"""What happens once when a job reaches its final state."""

from __future__ import annotations

import logging

from sqlalchemy import exists, func, select, update

from common.documents import DocumentRejected
from common.jobs import results
from common.jobs import states as job_states
from common.jobs.models import Job, Page
from common.object_keys import result_prefix
from common.pdf_output import job_pdf
from common.storage import ObjectMissing
from common.webhooks import service as webhooks
from worker.batches import results as batch_results
from worker.context import WorkerContext

log = logging.getLogger("ocrq.jobs")


def store_large_result(ctx: WorkerContext, *, job_id: str) -> None:
    """Once every page is done, put a result too large to serve inline, or a PDF, into object storage.

    Runs before the job is marked succeeded, so a client never sees it finished without its link;
    two closers racing write the same objects, which is harmless. A job that asked for a PDF and cannot
    have one (its source unreadable now) fails with the reason.
    """
    with ctx.db.session() as session:
        # Cheap checks first: this runs after every page, and only the last one needs the pages' text.
        job = session.get(Job, job_id)
        if job.status != "running" or session.scalar(select(exists().where(
                Page.job_id == job_id, Page.status.in_(job_states.PAGE_ACTIVE)))):
            return
        size = session.scalar(select(func.coalesce(func.sum(func.length(Page.text)), 0)).where(Page.job_id == job_id))
        if size <= ctx.settings.inline_result_bytes and job.output != "pdf":
            return
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
    prefix = result_prefix(tenant_id=job.tenant_id, job_id=job_id)
    if job.output == "pdf" and not _store_pdf(ctx, job=job, pages=pages, key=results.object_key(prefix, "pdf")):
        return
    for fmt in results.TEXT_FORMATS:
        body = results.render(job, pages, fmt, status="succeeded").encode()
        ctx.storage.put(results.object_key(prefix, fmt), body, content_type=results.MEDIA_TYPES[fmt])
    with ctx.db.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(result_key=prefix))


def _store_pdf(ctx: WorkerContext, *, job: Job, pages: list[Page], key: str) -> bool:
    try:
        body = job_pdf(job, pages, source=ctx.sources.path(job), limits=ctx.limits)
    except (DocumentRejected, ObjectMissing, OSError) as exc:
        reason = f"the searchable PDF could not be built: {public_reason(exc)}"
        log.warning("%s (%r)", reason, exc)
        fail_job(ctx, job_id=job.id, reason=reason)
        return False
    ctx.storage.put(key, body, content_type=results.MEDIA_TYPES["pdf"])
    return True


def fail_job(ctx: WorkerContext, *, job_id: str, reason: str) -> None:
    """Fail a job not yet ended, its webhook event in the same commit; then the once-only follow-up."""
    with ctx.db.session() as session:
        failed = job_states.fail_job(session, job_id=job_id, reason=reason)
        delivery_id = failed and webhooks.record_job_ended(session, settings=ctx.settings, job_id=job_id)
    webhooks.publish_recorded(ctx.app, ctx.settings, delivery_id)
    if failed:
        job_finished(ctx, job_id=job_id, status="failed")


def public_reason(exc: Exception) -> str:
    """What the tenant is told: the document's problem in a sentence, never a path or a repr from this worker."""
    if isinstance(exc, OSError):
        return "the document could not be read on the worker"
    return str(exc) or exc.__class__.__name__


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
