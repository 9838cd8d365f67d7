"""Submitting, reading and canceling batches; the listing itself runs in the worker."""

from __future__ import annotations

import logging
from collections.abc import Callable

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from sqlalchemy import String, cast, select, update
from sqlalchemy.orm import Session

from common import faults, listing
from common.batches import objects as batch_objects
from common.batches.models import Batch, BatchItem
from common.batches.objects import S3Prefix
from common.batches.schemas import BatchCreate
from common.errors import NotFound, Rejected
from common.jobs import ending, erase
from common.jobs.models import Job, Page
from common.netguard import UrlRefused, check_url
from common.orm import new_id, utcnow
from common.queue import publish as dispatch
from common.services import Services
from common.tenancy.s3_grants import InvalidLocation, NotGranted, S3Location, UnknownProfile, grant_for

log = logging.getLogger("ocrq.batches")

BATCH_ACTIVE = ("listing", "running")


def create_batch(svc: Services, *, tenant_id: str, request: BatchCreate,
                 record: Callable[[Session, Batch], None] | None = None) -> Batch:
    """Check the prefixes cheaply, store the batch, then publish its first listing page.

    `record` runs in the batch's transaction: what it writes (the Idempotency-Key's answer) commits with it.
    """
    source = _prefix(request.input_prefix, field="input_prefix")
    target = _prefix(request.output_prefix, field="output_prefix")
    if source.contains(target):
        raise Rejected(422, "output_prefix lies inside input_prefix: the results would be listed as input",
                       code="output_inside_input")
    if request.webhook_url is not None:
        try:
            check_url(request.webhook_url, allowlist=svc.settings.net_allowlist)
        except UrlRefused as exc:
            raise Rejected(422, f"webhook_url refused: {exc}", code="url_refused") from exc
    profile = _grant(svc, tenant_id=tenant_id, source=source, target=target, profile=request.source_profile)
    client = svc.s3_clients.get(profile)
    _check_s3(lambda: client.head_bucket(Bucket=source.bucket), field="input_prefix")
    _check_s3(lambda: client.list_objects_v2(Bucket=source.bucket, Prefix=source.prefix, MaxKeys=1),
              field="input_prefix")
    _check_s3(lambda: client.head_bucket(Bucket=target.bucket), field="output_prefix")
    settings = svc.settings
    now = utcnow()
    more = [fmt for fmt in dict.fromkeys(request.output_formats) if fmt != request.output]
    batch = Batch(
        id=new_id(), tenant_id=tenant_id, status="listing", input_bucket=source.bucket, input_prefix=source.prefix,
        output_bucket=target.bucket, output_prefix=target.prefix, include=request.include, exclude=request.exclude,
        output=request.output, output_formats=more, priority=request.priority, webhook_url=request.webhook_url,
        meta=request.metadata,
        source_profile=profile, retry_failed=request.retry_failed,
        options_digest=batch_objects.options_digest(
            output=request.output, output_prefix=target, engine=settings.engine, model=settings.engine_model,
            source_profile=profile, output_formats=more,
        ),
        list_pages=0, listing_done=False, created_at=now, progress_sent_at=now,
    )
    with svc.db.session() as session:
        session.add(batch)
        session.flush()
        if record:
            record(session, batch)
        faults.reach(settings, "after_row")
    faults.reach(settings, "after_commit")
    try:
        dispatch.publish_list_batch(svc.celery, batch_id=batch.id)
    except Exception:  # the batch is committed: the batch sweeper starts its listing once the broker is back
        log.exception("publishing failed; the sweeper will list batch %s", batch.id)
    faults.reach(settings, "after_publish")
    return batch


def _prefix(uri: str, *, field: str) -> S3Prefix:
    try:
        location = S3Location.parse(uri, folder=True)
    except InvalidLocation as exc:
        raise Rejected(422, f"{field} is not a valid S3 location: {exc}", code="invalid_prefix") from exc
    return S3Prefix(bucket=location.bucket, prefix=location.key)


def _grant(svc: Services, *, tenant_id: str, source: S3Prefix, target: S3Prefix, profile: str | None) -> str:
    """The one grant that lets the tenant list and read `source` and write `target`."""
    access = [("read", S3Location(source.bucket, source.prefix)), ("write", S3Location(target.bucket, target.prefix))]
    try:
        return grant_for(svc.settings, tenant_id=tenant_id, access=access, profile=profile)
    except UnknownProfile as exc:
        raise Rejected(422, f"no S3 source profile named {exc} for this tenant", code="unknown_source_profile") from exc
    except NotGranted as exc:
        raise Rejected(403, str(exc), code="s3_not_granted") from exc


def _check_s3(call, *, field: str) -> None:
    try:
        call()
    except ClientError as exc:
        raise Rejected(422, f"{field} cannot be read: {describe_s3_error(exc)}", code="s3_unreadable") from exc
    except ParamValidationError as exc:  # a bucket name S3 does not allow: the request is wrong, not the endpoint
        raise Rejected(422, f"{field} is not a valid S3 location: {exc}", code="invalid_prefix") from exc
    except BotoCoreError as exc:
        raise Rejected(503, f"the S3 endpoint did not answer: {exc.__class__.__name__}", code="s3_unavailable") from exc


def describe_s3_error(exc: ClientError | NotGranted) -> str:
    """A short reason from an S3 error (HEAD answers carry only the status code) or a refused grant."""
    if isinstance(exc, NotGranted):
        return str(exc)
    error = exc.response.get("Error", {})
    code = error.get("Code") or str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?"))
    named = {"404": "NoSuchBucket", "403": "AccessDenied", "301": "the bucket is in another region"}
    return named.get(code, code) + (f" ({error['Message']})" if error.get("Message") else "")


def get_batch(session: Session, *, tenant_id: str, batch_id: str) -> Batch:
    """The tenant's batch; another tenant's batch is as missing as an unknown one."""
    batch = session.scalar(select(Batch).where(Batch.id == batch_id, Batch.tenant_id == tenant_id))
    if batch is None:
        raise NotFound(batch_id)
    return batch


def erase_batch(svc: Services, *, tenant_id: str, batch_id: str) -> tuple[Batch, int]:
    """Cancel the batch, erase every job of it, and clear what its items say of the documents; returns the batch
    and how many of its jobs wait for storage to be erased (the retention sweep finishes them)."""
    cancel_batch(svc, tenant_id=tenant_id, batch_id=batch_id)
    with svc.db.session() as session:
        job_ids = list(session.scalars(select(Job.id).where(Job.batch_id == batch_id, Job.tenant_id == tenant_id)))
        ended = [erase.begin(session, settings=svc.settings, job_id=job_id) for job_id in job_ids]
        session.execute(update(BatchItem).where(BatchItem.batch_id == batch_id).values(
            key=cast(BatchItem.id, String), etag=None, reason=None, error=None, result_key=None,
            fingerprint=None))
        session.execute(update(Batch).where(Batch.id == batch_id, Batch.erased_at.is_(None))
                        .values(erased_at=utcnow(), meta=None, webhook_url=None, error=None))
    for end in ended:
        ending.announce(svc.celery, svc.settings, end)
    pending = sum(not erase.finish_or_defer(db=svc.db, storage=svc.storage, job_id=job_id) for job_id in job_ids)
    with svc.db.session() as session:
        return get_batch(session, tenant_id=tenant_id, batch_id=batch_id), pending


def list_batches(session: Session, *, tenant_id: str, status: tuple[str, ...], cursor: str | None,
                 limit: int) -> tuple[list[Batch], str | None]:
    """The tenant's batches, newest first, and the cursor of the next page."""
    query = select(Batch).where(Batch.tenant_id == tenant_id)
    if status:
        query = query.where(Batch.status.in_(status))
    rows = list(session.scalars(listing.newest_first(query, Batch, cursor=cursor, limit=limit)))
    return listing.page(rows, limit=limit)


def cancel_batch(svc: Services, *, tenant_id: str, batch_id: str) -> Batch:
    """Stop the listing and cancel jobs not yet started; running ones finish and are recorded."""
    with svc.db.session() as session:
        get_batch(session, tenant_id=tenant_id, batch_id=batch_id)
        canceled = session.execute(
            update(Batch).where(Batch.id == batch_id, Batch.status.in_(BATCH_ACTIVE)).values(status="canceled")
        ).rowcount
        if canceled:
            now = utcnow()
            session.execute(update(Job).where(Job.batch_id == batch_id, Job.status == "queued")
                            .values(status="canceled", finished_at=now))
            ended = select(Job.id).where(Job.batch_id == batch_id, Job.status == "canceled")
            session.execute(update(Page).where(Page.job_id.in_(ended), Page.status == "queued")
                            .values(status="canceled"))
            session.execute(update(BatchItem)
                            .where(BatchItem.batch_id == batch_id, BatchItem.status == "queued",
                                   BatchItem.job_id.in_(ended))
                            .values(status="canceled", finished_at=now))
    if canceled:
        try:
            dispatch.publish_finish_batch(svc.celery, batch_id=batch_id)
        except Exception:  # the batch sweeper closes it
            log.exception("publishing failed; the sweeper will close batch %s", batch_id)
    with svc.db.session() as session:
        return get_batch(session, tenant_id=tenant_id, batch_id=batch_id)
