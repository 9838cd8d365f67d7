"""Submitting, reading and canceling jobs. Routes and the CLI call these; they never do OCR."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from botocore.exceptions import ParamValidationError
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from common import faults, listing, tracing
from common.documents import DocumentInfo, DocumentRejected, PageRangeError, inspect, parse_page_ranges
from common.errors import NotFound, Rejected
from common.jobs import ending
from common.jobs import states as job_states
from common.jobs.models import Job, Page, page_rows
from common.jobs.schemas import JobOptions
from common.netguard import UrlRefused, check_url
from common.object_keys import source_key
from common.orm import new_id, utcnow
from common.queue import publish as dispatch
from common.services import Services
from common.storage import ObjectMissing, head_object
from common.tenancy.s3_grants import InvalidLocation, NotGranted, S3Location, UnknownProfile, grant_for

log = logging.getLogger("ocrq.jobs")


# docling's page_range ends where the document does instead of being refused past it (docling's base_pipeline
# keeps the pages in range); common.docling marks its jobs so in their metadata.
CLAMPED_BY = ("docling", "page_range")

REJECTION_STATUS = {"unsupported_type": 415, "empty_file": 400, "too_many_pages": 413, "macros_refused": 415,
                    "office_unavailable": 415}


@dataclass(frozen=True)
class Source:
    kind: str  # upload | url | s3
    uri: str
    filename: str | None = None
    path: Path | None = None
    sha256: str | None = None  # of an upload's bytes, taken while it was read
    profile: str | None = None  # the S3 grant the request named, if any


def submit(svc: Services, *, tenant_id: str, source: Source, options: JobOptions,
           record: Callable[[Session, Job], None] | None = None) -> Job:
    """Validate, store the document, commit the job, then publish; a crash between steps is swept up.

    `record` runs in the job's transaction: what it writes (the Idempotency-Key's answer) commits with the job.
    """
    job_id = new_id()
    _check_outbound(svc, options.webhook_url, field="webhook_url")
    key, info, pages, size, profile = None, None, [], None, None
    if source.kind == "upload":
        info, pages = _check_document(svc, source.path, options.pages, clamp=clamps_pages(options.metadata))
        key = source_key(tenant_id=tenant_id, job_id=job_id)
        size = source.path.stat().st_size
        with source.path.open("rb") as body:
            svc.storage.put(key, body)
        faults.reach(svc.settings, "after_upload")
    elif source.kind == "url":
        _check_outbound(svc, source.uri, field="source_url")
    else:
        profile = _check_s3_object(svc, tenant_id=tenant_id, uri=source.uri, profile=source.profile)
    job = Job(
        id=job_id, tenant_id=tenant_id, status="queued", source_kind=source.kind, source_uri=source.uri,
        source_key=key, source_profile=profile, filename=source.filename, doc_kind=info and info.kind,
        size_bytes=size, pages_spec=options.pages, output=options.output, ocr=options.ocr, priority=options.priority,
        webhook_url=options.webhook_url, meta=options.metadata, enqueued_at=utcnow(), pages_total=len(pages),
    )
    with svc.db.session() as session:
        session.add(job)
        session.flush()
        if pages:  # inspected here, so the worker need not open the document again to split it
            session.execute(insert(Page), page_rows(job_id, pages, info.page_sizes))
        if record:
            record(session, job)
        faults.reach(svc.settings, "after_row")
    faults.reach(svc.settings, "after_commit")
    tracing.annotate(job=job_id, tenant=tenant_id, lane=options.priority)
    try:
        dispatch.publish_prepare(svc.celery, job_id=job_id, lane=options.priority)
    except Exception:  # the job is committed: the sweeper publishes it once the broker is back
        log.exception("publishing failed; the sweeper will publish job %s", job_id, extra={"job_id": job_id})
    faults.reach(svc.settings, "after_publish")
    return job


def clamps_pages(metadata: dict | None) -> bool:
    """Whether a job's page selection ends at the document's end rather than being refused past it."""
    entry = (metadata or {}).get(CLAMPED_BY[0])
    return isinstance(entry, dict) and entry.get(CLAMPED_BY[1]) is not None


def _check_document(svc: Services, path: Path, pages: str | None, *,
                    clamp: bool) -> tuple[DocumentInfo, list[int]]:
    try:
        info = inspect(path, limits=svc.limits)
        if not info.page_count:  # an office file: split by the worker once it is converted
            return info, []
        return info, parse_page_ranges(pages, info.page_count, clamp=clamp)
    except DocumentRejected as exc:
        raise Rejected(REJECTION_STATUS.get(exc.code, 422), str(exc), code=exc.code) from exc
    except PageRangeError as exc:
        raise Rejected(422, str(exc), code="invalid_pages") from exc


def _check_outbound(svc: Services, url: str | None, *, field: str) -> None:
    if url is None:
        return
    try:
        check_url(url, allowlist=svc.settings.net_allowlist)
    except UrlRefused as exc:
        raise Rejected(422, f"{field} refused: {exc}", code="url_refused") from exc


def _check_s3_object(svc: Services, *, tenant_id: str, uri: str, profile: str | None) -> str:
    """The grant that lets the tenant read `uri`, once the object is seen to exist and fit the limit."""
    try:
        location = S3Location.parse(uri)
        profile = grant_for(svc.settings, tenant_id=tenant_id, access=[("read", location)], profile=profile)
    except InvalidLocation as exc:
        raise Rejected(422, f"s3_uri is not a valid S3 location: {exc}", code="invalid_s3_uri") from exc
    except UnknownProfile as exc:
        raise Rejected(422, f"no S3 source profile named {exc} for this tenant", code="unknown_source_profile") from exc
    except NotGranted as exc:
        raise Rejected(403, str(exc), code="s3_not_granted") from exc
    try:
        info = head_object(svc.s3_clients.get(profile), location.bucket, location.key)
    except ObjectMissing as exc:
        raise Rejected(422, f"s3_uri cannot be read: {exc}", code="s3_unreadable") from exc
    except ParamValidationError as exc:  # what S3's client refuses and the parse above let through
        raise Rejected(422, "s3_uri is not a valid S3 location", code="invalid_s3_uri") from exc
    if info.size > svc.settings.max_upload_bytes:
        raise Rejected(413, f"object is {info.size} bytes; the limit is {svc.settings.max_upload_bytes}",
                       code="too_large")
    return profile


def get_job(session: Session, *, tenant_id: str, job_id: str) -> Job:
    """The tenant's job; another tenant's job is as missing as an unknown one."""
    job = session.scalar(select(Job).where(Job.id == job_id, Job.tenant_id == tenant_id))
    if job is None:
        raise NotFound(job_id)
    return job


@dataclass(frozen=True)
class JobFilters:
    """What `GET /jobs` narrows the tenant's jobs by; every field optional, `metadata` matched as strings."""

    status: tuple[str, ...] = ()
    priority: str | None = None
    batch_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    metadata: tuple[tuple[str, str], ...] = ()


def list_jobs(session: Session, *, tenant_id: str, filters: JobFilters, cursor: str | None,
              limit: int) -> tuple[list[Job], str | None]:
    """The tenant's jobs, newest first, and the cursor of the next page."""
    query = select(Job).where(Job.tenant_id == tenant_id)
    if filters.status:
        query = query.where(Job.status.in_(filters.status))
    if filters.priority:
        query = query.where(Job.priority == filters.priority)
    if filters.batch_id:
        query = query.where(Job.batch_id == filters.batch_id)
    if filters.created_after:
        query = query.where(Job.created_at > _utc(filters.created_after))
    if filters.created_before:
        query = query.where(Job.created_at < _utc(filters.created_before))
    for key, value in filters.metadata:
        query = query.where(Job.meta[key].as_string() == value)
    rows = list(session.scalars(listing.newest_first(query, Job, cursor=cursor, limit=limit)))
    return listing.page(rows, limit=limit)


def _utc(moment: datetime) -> datetime:
    """A time without an offset is UTC; one with is turned to UTC (SQLite compares the stored text)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def pages_of(session: Session, *, job_id: str) -> list[Page]:
    return list(session.scalars(select(Page).where(Page.job_id == job_id).order_by(Page.index)))


def finished_pages(session: Session, *, job: Job, after: int, limit: int) -> tuple[list[Page], int | None]:
    """Pages done or failed so far numbered over `after`, in page order, and the `after` of the next call: short of
    the first page still active, so a page finishing out of order is never stepped over."""
    pages = list(session.scalars(
        select(Page).where(Page.job_id == job.id, Page.status.in_(job_states.PAGE_DONE), Page.index >= after)
        .order_by(Page.index).limit(limit)
    ))
    first_active = session.scalar(select(func.min(Page.index)).where(
        Page.job_id == job.id, Page.status.in_(job_states.PAGE_ACTIVE), Page.index >= after))
    if job.status in job_states.JOB_TERMINAL and first_active is None and len(pages) < limit:
        return pages, None
    reached = pages[-1].index + 1 if pages else after
    return pages, reached if first_active is None else min(reached, first_active)
def low_confidence_pages(session: Session, *, job_id: str, threshold: float) -> list[int]:
    """The 1-based numbers of the job's pages read with a confidence under the threshold."""
    return [index + 1 for index in session.scalars(
        select(Page.index).where(Page.job_id == job_id, Page.status == "succeeded", Page.confidence < threshold)
        .order_by(Page.index))]


def failed_pages(session: Session, *, job_id: str) -> list[Page]:
    return list(session.scalars(
        select(Page).where(Page.job_id == job_id, Page.status == "failed").order_by(Page.index)
    ))


def cancel(svc: Services, *, tenant_id: str, job_id: str) -> Job:
    """Cancel a job not yet finished; canceling a finished job changes nothing."""
    with svc.db.session() as session:
        get_job(session, tenant_id=tenant_id, job_id=job_id)
        if job_states.cancel_job(session, job_id=job_id):
            ended = ending.record_end(session, settings=svc.settings, job_id=job_id, status="canceled")
        else:
            ended = None
    ending.announce(svc.celery, svc.settings, ended)
    with svc.db.session() as session:
        return get_job(session, tenant_id=tenant_id, job_id=job_id)


async def wait_for_end(svc: Services, *, tenant_id: str, job_id: str, timeout_s: float,
                       poll_s: float = 0.25) -> Job:
    """The tenant's job once it has ended, or as it stands when `timeout_s` has passed; the event loop stays free."""
    deadline = time.monotonic() + max(0.0, timeout_s)

    def read() -> Job:
        with svc.db.session() as session:
            job = get_job(session, tenant_id=tenant_id, job_id=job_id)
            session.expunge(job)
            return job

    while True:
        job = await asyncio.to_thread(read)
        if job.status in job_states.JOB_TERMINAL or time.monotonic() >= deadline:
            return job
        await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
