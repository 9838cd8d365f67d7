"""Listing a batch's prefix one page per task: record every object, create jobs in bulk, chain the next page.

The batch row holds the continuation token of the next page. A page is recorded in one transaction that
first moves the token on with a compare-and-set, so a task delivered twice (a redelivery after a crash,
or the sweeper's restart) finds the page taken and stops; a crash mid-page leaves nothing behind, and
the listing resumes from the last page recorded. Only one page of keys is ever held in memory.
"""

from __future__ import annotations

import logging

from botocore.exceptions import ClientError
from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from common.batches.models import Batch, BatchItem
from common.batches.objects import fingerprint, relative_key, skip_reason
from common.batches.service import describe_s3_error
from common.jobs.models import Job
from common.orm import new_id, utcnow
from common.queue import publish as dispatch
from common.tenancy.s3_grants import NotGranted
from worker.batches.results import finish_if_done
from worker.context import WorkerContext

log = logging.getLogger("ocrq.batches")

# Worth another try later (the sweeper restarts the listing); any other S3 error ends the listing with a reason.
TRANSIENT_S3_ERRORS = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling",
                       "RequestTimeTooSkewed"}


def list_next_page(ctx: WorkerContext, *, batch_id: str) -> None:
    """List the page after the last one recorded, record its objects, enqueue their jobs, and chain the next."""
    with ctx.db.session() as session:
        batch = session.get(Batch, batch_id)
    if batch is None or batch.status != "listing":
        return
    request = {"Bucket": batch.input_bucket, "Prefix": batch.input_prefix, "MaxKeys": ctx.settings.batch_list_page_size}
    if batch.list_token:
        request["ContinuationToken"] = batch.list_token
    try:
        page = ctx.s3_for_batch(batch, "read").list_objects_v2(**request)
    except (ClientError, NotGranted) as exc:
        if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in TRANSIENT_S3_ERRORS:
            raise
        _end_listing(ctx, batch, error=f"listing stopped after {batch.list_pages} page(s): {describe_s3_error(exc)}")
        return
    token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
    with ctx.db.session() as session:
        if not _take_page(session, batch, next_token=token):
            return
        job_ids = _record(session, ctx, batch, page.get("Contents", []))
    try:
        dispatch.publish_prepares(ctx.app, job_ids=job_ids)
        if token:
            dispatch.publish_list_batch(ctx.app, batch_id=batch_id)
    except Exception:  # committed: the job sweeper publishes lost prepares, the batch sweeper the next page
        log.exception("publishing after page %d of batch %s failed", batch.list_pages + 1, batch_id)
    if token is None:
        finish_if_done(ctx, batch_id=batch_id)


def _take_page(session: Session, batch: Batch, *, next_token: str | None) -> bool:
    """Move the listing past the page just listed, unless another task already did; first in the transaction."""
    done = next_token is None
    values = {"list_token": next_token, "list_pages": Batch.list_pages + 1, "listing_done": done}
    if done:
        values |= {"status": "running", "listed_at": utcnow()}
    return session.execute(
        update(Batch)
        .where(Batch.id == batch.id, Batch.status == "listing", Batch.list_pages == batch.list_pages)
        .values(**values)
    ).rowcount == 1


def _record(session: Session, ctx: WorkerContext, batch: Batch, objects: list[dict]) -> list[str]:
    """One item per object: skipped, skipped_existing, or queued with a new job; returns the new jobs' ids."""
    now = utcnow()
    items = []
    for obj in objects:
        key, size, etag = obj["Key"], obj.get("Size", 0), obj.get("ETag", "").strip('"')
        reason = skip_reason(relative_key(key, prefix=batch.input_prefix), size=size, include=batch.include,
                             exclude=batch.exclude, max_bytes=ctx.settings.max_upload_bytes)
        item = {"batch_id": batch.id, "key": key, "etag": etag, "size": size, "status": "skipped", "reason": reason,
                "fingerprint": None, "job_id": None, "result_key": None, "pages": None, "error": None,
                "finished_at": now}
        if reason is None:
            item |= {"status": "queued", "finished_at": None, "fingerprint": fingerprint(
                tenant_id=batch.tenant_id, bucket=batch.input_bucket, key=key, etag=etag, options=batch.options_digest)}
        items.append(item)
    earlier = _earlier_results(session, batch, [i["fingerprint"] for i in items if i["fingerprint"]])
    jobs = []
    for item in items:
        if item["status"] != "queued":
            continue
        if prior := earlier.get(item["fingerprint"]):
            item |= {"status": "skipped_existing", "result_key": prior.result_key, "pages": prior.pages,
                     "error": prior.error, "reason": f"{prior.status} in batch {prior.batch_id}", "finished_at": now}
            continue
        item["job_id"] = new_id()
        jobs.append({
            "id": item["job_id"], "tenant_id": batch.tenant_id, "status": "queued", "source_kind": "s3",
            "source_uri": f"s3://{batch.input_bucket}/{item['key']}", "filename": item["key"].rsplit("/", 1)[-1][:512],
            "size_bytes": item["size"], "output": batch.output, "priority": batch.priority, "batch_id": batch.id,
            "source_profile": batch.source_profile, "enqueued_at": now, "created_at": now,
        })
    if jobs:
        session.execute(insert(Job), jobs)
    if items:
        session.execute(insert(BatchItem), items)
    return [job["id"] for job in jobs]


def _earlier_results(session: Session, batch: Batch, fingerprints: list[str]) -> dict[str, BatchItem]:
    """Finished items of any batch with these fingerprints; a success wins over a failure."""
    if not fingerprints:
        return {}
    statuses = ("succeeded",) if batch.retry_failed else ("succeeded", "failed")
    found: dict[str, BatchItem] = {}
    for item in session.scalars(
        select(BatchItem).where(BatchItem.fingerprint.in_(fingerprints), BatchItem.status.in_(statuses))
    ):
        if item.fingerprint not in found or item.status == "succeeded":
            found[item.fingerprint] = item
    return found


def _end_listing(ctx: WorkerContext, batch: Batch, *, error: str) -> None:
    """The prefix can no longer be listed: what was listed finishes, and the batch ends failed with the reason."""
    with ctx.db.session() as session:
        ended = session.execute(
            update(Batch)
            .where(Batch.id == batch.id, Batch.status == "listing", Batch.list_pages == batch.list_pages)
            .values(status="running", listing_done=True, listed_at=utcnow(), error=error)
        ).rowcount
    if ended:
        log.warning("batch listing failed", extra={"batch_id": batch.id, "error": error})
        finish_if_done(ctx, batch_id=batch.id)
