"""A finished job's result in object storage: text formats too large to serve inline, and searchable PDFs."""

from __future__ import annotations

import logging

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from common.documents import DocumentRejected
from common.jobs import results
from common.jobs.models import Job, Page
from common.object_keys import result_prefix
from common.pdf_output import job_pdf
from common.settings import Settings
from common.storage import ObjectMissing
from worker.context import WorkerContext
from worker.jobs.reasons import public_reason

log = logging.getLogger("ocrq.jobs")


def needs_storing(session: Session, *, settings: Settings, job: Job) -> bool:
    """Whether a job whose pages are all done must have its result stored before it may end."""
    if job.result_key:
        return False
    if job.output == "pdf":
        return True
    size = session.scalar(select(func.coalesce(func.sum(func.length(Page.text)), 0)).where(Page.job_id == job.id))
    return size > settings.inline_result_bytes


def store_result(ctx: WorkerContext, *, job_id: str) -> str | None:
    """Write the job's stored result and record its prefix; the reason instead when a PDF cannot be built.

    Runs before the job is marked ended, so a client never sees it finished without its link; two closers racing
    write the same objects, which is harmless.
    """
    with ctx.db.session() as session:
        job = session.get(Job, job_id)
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
    prefix = result_prefix(tenant_id=job.tenant_id, job_id=job_id)
    if job.output == "pdf":
        try:
            body = job_pdf(job, pages, source=ctx.sources.path(job), limits=ctx.limits)
        except (DocumentRejected, ObjectMissing, OSError) as exc:
            reason = f"the searchable PDF could not be built: {public_reason(exc)}"
            log.warning("%s (%r)", reason, exc)
            return reason
        ctx.storage.put(results.object_key(prefix, "pdf"), body, content_type=results.MEDIA_TYPES["pdf"])
    for fmt in results.STORED_FORMATS:
        body = results.body(job, pages, fmt, status="succeeded")
        ctx.storage.put(results.object_key(prefix, fmt), body, content_type=results.media_type(fmt, body))
    with ctx.db.session() as session:
        recorded = session.execute(update(Job).where(Job.id == job_id, Job.erased_at.is_(None))
                                   .values(result_key=prefix)).rowcount
    if not recorded:  # erased while being written (common.jobs.erase deleted before these landed): none may stay
        for fmt in results.FORMATS:
            ctx.storage.delete(results.object_key(prefix, fmt))
    return None
