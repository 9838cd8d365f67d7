"""The end of a batch's job and of the batch: the result under the output prefix, the item, the manifest, events."""

from __future__ import annotations

import logging
from datetime import timedelta

from botocore.exceptions import ClientError
from sqlalchemy import case, exists, or_, select, true, update

from common import outages
from common.batches.models import Batch, BatchItem
from common.batches.objects import relative_key, result_key
from common.batches.progress import progress
from common.batches.service import describe_s3_error
from common.documents import DocumentRejected
from common.jobs import results
from common.jobs.models import Job, Page
from common.orm import utcnow
from common.pdf_output import job_pdf
from common.storage import ObjectMissing
from common.tenancy.s3_grants import NotGranted
from common.webhooks import service as webhooks
from common.webhooks.events import base_url, batch_data
from worker.batches.manifest import write_manifest
from worker.context import WorkerContext

log = logging.getLogger("ocrq.batches")
ERROR_CHARS = 2000


def item_finished(ctx: WorkerContext, *, job: Job, pages: list[Page], status: str) -> None:
    """Write a batch job's result under the output prefix, record its item once, and close the batch if last."""
    with ctx.db.session() as session:
        row = session.execute(
            select(BatchItem.id, BatchItem.key, Batch).join(Batch, Batch.id == BatchItem.batch_id)
            .where(BatchItem.job_id == job.id, BatchItem.status == "queued")
        ).first()
    if row is None:
        return
    item_id, key, batch = row
    values = {"status": status, "pages": job.pages_total, "error": _error(job, pages), "finished_at": utcnow()}
    if status == "succeeded":
        try:
            values["result_key"] = _write_result(ctx, batch=batch, key=key, job=job, pages=pages)
        except (ClientError, NotGranted) as exc:
            if outages.outage_of(exc):  # busy: the item stays queued, and the batch sweeper writes it later
                log.warning("storage unreachable while writing a batch result; written later: %s",
                            exc.__class__.__name__)
                return
            values |= {"status": "failed", "error": f"the result could not be written: {describe_s3_error(exc)}"}
        except (DocumentRejected, ObjectMissing, OSError) as exc:
            values |= {"status": "failed", "error": f"the searchable PDF could not be built: {exc}"}
    with ctx.db.session() as session:
        session.execute(update(BatchItem).where(BatchItem.id == item_id, BatchItem.status == "queued").values(**values))
    _maybe_send_progress(ctx, batch=batch)
    finish_if_done(ctx, batch_id=batch.id)


def _write_result(ctx: WorkerContext, *, batch: Batch, key: str, job: Job, pages: list[Page]) -> str:
    """Write the object's result in `output` and in each of `output_formats`; the first's URI."""
    relative = relative_key(key, prefix=batch.input_prefix)
    written = []
    for fmt in (batch.output, *(batch.output_formats or ())):
        if fmt == "pdf" and job.result_key and job.output == "pdf":
            body = ctx.storage.read(results.object_key(job.result_key, "pdf"))  # built once, as the job closed
        elif fmt == "pdf":
            body = job_pdf(job, pages, source=ctx.sources.path(job), limits=ctx.limits)
        else:
            body = results.body(job, pages, fmt)
        out_key = result_key(relative, output_prefix=batch.output_prefix, output=fmt, body=body)
        ctx.s3_for_batch(batch, "write").put_object(Bucket=batch.output_bucket, Key=out_key, Body=body,
                                                    ContentType=results.media_type(fmt, body))
        written.append(f"s3://{batch.output_bucket}/{out_key}")
    return written[0]


def _error(job: Job, pages: list[Page]) -> str | None:
    """The job's error, or the failed pages of a job that otherwise succeeded."""
    if job.error:
        return job.error[:ERROR_CHARS]
    failed = sorted((p for p in pages if p.status == "failed"), key=lambda p: p.index)
    if not failed:
        return None
    return "; ".join(f"page {p.index + 1}: {p.error}" for p in failed)[:ERROR_CHARS]


def finish_if_done(ctx: WorkerContext, *, batch_id: str) -> str | None:
    """Once listing has ended and no item is in flight, write the manifest and close the batch, once.

    Callers run it after their own commit (an item recorded, the last page listed), so whichever of two
    racing callers commits last sees the other's work; both may write the same manifest, one closes.
    """
    with ctx.db.session() as session:
        batch = session.get(Batch, batch_id)
        if batch is None or batch.finished_at is not None or not (batch.listing_done or batch.status == "canceled"):
            return None
        if session.scalar(select(exists().where(BatchItem.batch_id == batch_id, BatchItem.status == "queued"))):
            return None
    error = None
    try:
        manifest = write_manifest(ctx, batch=batch)
    except (ClientError, NotGranted) as exc:
        manifest, error = None, f"the manifest could not be written: {describe_s3_error(exc)}"
    with ctx.db.session() as session:
        failed = Batch.error.is_not(None) if error is None else true()
        final = case((Batch.status == "canceled", "canceled"), (failed, "failed"), else_="completed")
        values = {"status": final, "finished_at": utcnow(), "manifest_key": manifest}
        if error:
            values["error"] = "; ".join(filter(None, (batch.error, error)))
        row = session.execute(
            update(Batch).where(Batch.id == batch_id, Batch.finished_at.is_(None)).values(**values)
            .returning(Batch.status)
        ).first()
    if row is None:
        return None
    log.info("batch finished", extra={"batch_id": batch_id, "status": row[0]})
    _send_event(ctx, batch_id=batch_id, event_type="batch.completed", key=f"batch.completed:{batch_id}")
    return row[0]


def _maybe_send_progress(ctx: WorkerContext, *, batch: Batch) -> None:
    """A batch.progress event at most once per batch_progress_interval_s, claimed with a compare-and-set."""
    if not batch.webhook_url:
        return
    now = utcnow()
    due = now - timedelta(seconds=ctx.settings.batch_progress_interval_s)
    with ctx.db.session() as session:
        claimed = session.execute(
            update(Batch).where(Batch.id == batch.id, Batch.finished_at.is_(None),
                                or_(Batch.progress_sent_at.is_(None), Batch.progress_sent_at <= due))
            .values(progress_sent_at=now)
        ).rowcount
    if claimed:
        _send_event(ctx, batch_id=batch.id, event_type="batch.progress", key=None)


def _send_event(ctx: WorkerContext, *, batch_id: str, event_type: str, key: str | None) -> None:
    with ctx.db.session() as session:
        batch = session.get(Batch, batch_id)
        if not batch.webhook_url:
            return
        state = progress(session, batch=batch)
    counts = state.counts | {"pages_done": state.pages_done, "pages_failed": state.pages_failed}
    links = {"manifest": batch.manifest_key} if batch.manifest_key else None
    data = batch_data(batch_id=batch.id, status=batch.status, counts=counts, base=base_url(ctx.settings),
                      metadata=batch.meta, links=links)
    webhooks.enqueue_event(db=ctx.db, celery=ctx.app, settings=ctx.settings, tenant_id=batch.tenant_id,
                           url=batch.webhook_url, event_type=event_type, data=data, key=key, batch_id=batch.id)
