"""What happens once when a job reaches its final state."""

from __future__ import annotations

import logging

from sqlalchemy import select, update

from common import results
from common.models import Job, Page
from common.object_keys import result_prefix
from common.services import webhooks
from worker import batch_results
from worker.context import WorkerContext

log = logging.getLogger("ocrq.jobs")


def job_finished(ctx: WorkerContext, *, job_id: str, status: str) -> None:
    """Store large results in object storage; later steps (webhooks, batches) hang off here."""
    with ctx.db.session() as session:
        job = session.get(Job, job_id)
        pages = list(session.scalars(select(Page).where(Page.job_id == job_id)))
    log.info("job finished", extra={"job_id": job_id, "status": status})
    if status == "succeeded" and sum(len(p.text or "") for p in pages) > ctx.settings.inline_result_bytes:
        prefix = result_prefix(tenant_id=job.tenant_id, job_id=job_id)
        for fmt in results.FORMATS:
            body = results.render(job, pages, fmt).encode()
            ctx.storage.put(results.object_key(prefix, fmt), body, content_type=results.MEDIA_TYPES[fmt])
        with ctx.db.session() as session:
            session.execute(update(Job).where(Job.id == job_id).values(result_key=prefix))
    webhooks.notify_job_ended(db=ctx.db, celery=ctx.app, settings=ctx.settings, job_id=job_id)
    if job.batch_id:
        batch_results.item_finished(ctx, job=job, pages=pages, status=status)
