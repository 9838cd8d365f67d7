"""/jobs: submit, poll, fetch results, cancel."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Literal, get_args

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BeforeValidator, ValidationError

from api import uploads
from api.deps import ServicesDep, SessionDep, TenantDep
from api.errors import problem
from api.idempotency import IdempotencyKeyHeader, replayed
from common import listing
from common.errors import Rejected
from common.jobs import erase, pdf_results, results
from common.jobs import service as jobs
from common.jobs.schemas import (
    JobAccepted,
    JobFromSource,
    JobLinks,
    JobList,
    JobOptions,
    JobStatus,
    JobSummary,
    JobView,
    OcrMode,
    Output,
    PageError,
    PageList,
    PageText,
    ResultFormat,
)
from common.jobs.service import Source
from common.queue.names import Priority
from common.services import Services
from common.storage import ObjectMissing
from common.tenancy import idempotency

router = APIRouter(prefix="/jobs", tags=["jobs"])


def _iso_text(value: object) -> object:
    """An ISO 8601 time as the schema says; pydantic would also take a bare number as seconds since 1970."""
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return value
    raise ValueError("give an ISO 8601 date-time, e.g. 2026-12-01T00:00:00Z")


IsoTime = Annotated[datetime, BeforeValidator(_iso_text)]
log = logging.getLogger("ocrq.api")

# Read by create_job itself rather than by FastAPI, so the app adds them to the schema's components.
BODY_MODELS = (JobFromSource,)

SUBMIT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {"schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "pages": {"type": "string"},
                    "output": {"type": "string", "enum": list(get_args(Output))},
                    "ocr": {"type": "string", "enum": list(get_args(OcrMode))},
                    "webhook_url": {"type": "string"},
                    "priority": {"type": "string", "enum": ["interactive", "bulk"]},
                    "metadata": {"type": "string", "description": "a JSON object, echoed back"},
                },
                "additionalProperties": False,
            }},
            "application/json": {"schema": {"$ref": "#/components/schemas/JobFromSource"}},
        },
    }
}


def links(request: Request, job_id: str, download: str | None = None) -> JobLinks:
    base = str(request.base_url).rstrip("/")
    return JobLinks(self=f"{base}/jobs/{job_id}", result=f"{base}/jobs/{job_id}/result", download=download)


@router.post("", status_code=202, response_model=JobAccepted, openapi_extra=SUBMIT_BODY,
             responses={400: {}, 401: {}, 409: {}, 413: {}, 415: {}, 422: {}, 429: {}})
async def create_job(request: Request, svc: ServicesDep, tenant: TenantDep,
                     idempotency_key: IdempotencyKeyHeader = None) -> Response:
    """Submit a document: a multipart upload (`file`) or a JSON body with `source_url` or `s3_uri`."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        source, options = await uploads.read_multipart(request, max_bytes=svc.settings.max_upload_bytes)
    elif content_type.startswith("application/json"):
        try:
            body = JobFromSource.model_validate_json(await request.body())
        except ValidationError as exc:
            raise Rejected(422, uploads.validation_message(exc), code="invalid_body") from exc
        kind, uri = ("url", body.source_url) if body.source_url is not None else ("s3", body.s3_uri)
        source, options = Source(kind=kind, uri=uri, profile=body.source_profile), body
    else:
        raise Rejected(415, "send multipart/form-data with a file, or application/json with source_url or s3_uri")
    request_fingerprint = idempotency.fingerprint("POST /jobs", source.sha256, source.filename,
                                                  options.model_dump(mode="json"))
    try:
        return await run_in_threadpool(_submit_once, request, svc, tenant, source, options,
                                       key=idempotency_key, request_fingerprint=request_fingerprint)
    finally:
        if source.path:
            source.path.unlink(missing_ok=True)


def _submit_once(request: Request, svc: Services, tenant: str, source: Source, options: JobOptions, *,
                 key: str | None, request_fingerprint: str) -> Response:
    """Submit, or answer a repeat of an earlier request with the same Idempotency-Key as it was answered."""
    with idempotency.idempotent(svc, tenant_id=tenant, key=key, fingerprint=request_fingerprint) as slot:
        if slot.replay:
            return replayed(slot.replay)

        def accepted(job) -> dict:
            return JobAccepted(id=job.id, status=job.status, links=links(request, job.id)).model_dump(mode="json")

        job = jobs.submit(svc, tenant_id=tenant, source=source, options=options,
                          record=lambda session, job: slot.save(session, 202, accepted(job)))
    return JSONResponse(accepted(job), status_code=202)


def summary(request: Request, svc: Services, job) -> dict:
    """What every view of a job shows: the fields of JobSummary."""
    download = None
    if job.result_key:
        download = svc.storage.presign(results.object_key(job.result_key, job.output), ttl_s=svc.settings.presign_ttl_s)
    return {
        "id": job.id, "status": job.status, "source": job.source_kind, "filename": job.filename,
        "output": job.output, "ocr": job.ocr, "priority": job.priority, "batch_id": job.batch_id, "pages_total": job.pages_total,
        "pages_done": job.pages_done, "pages_failed": job.pages_failed, "error": job.error, "metadata": job.meta,
        "created_at": job.created_at, "started_at": job.started_at, "finished_at": job.finished_at,
        "expired_at": job.expired_at, "erased_at": job.erased_at, "links": links(request, job.id, download),
    }


@router.get("", response_model=JobList, responses={422: {}})
def list_jobs(request: Request, svc: ServicesDep, session: SessionDep, tenant: TenantDep,
              status: Annotated[list[JobStatus] | None, Query()] = None, priority: Priority | None = None,
              batch_id: Annotated[str | None, Query(max_length=64)] = None, created_after: IsoTime | None = None,
              created_before: IsoTime | None = None, cursor: Annotated[str | None, Query(max_length=512)] = None,
              limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT)] = 50) -> JobList:
    """The tenant's jobs, newest first; `next` is the cursor of the following page. Filters: `status` (repeat it
    for several), `priority`, `batch_id`, `created_after`, `created_before`, and `metadata.KEY=VALUE`."""
    filters = jobs.JobFilters(status=tuple(status or ()), priority=priority, batch_id=batch_id,
                              created_after=created_after, created_before=created_before,
                              metadata=metadata_filters(request))
    rows, after = jobs.list_jobs(session, tenant_id=tenant, filters=filters, cursor=cursor, limit=limit)
    return JobList(jobs=[JobSummary(**summary(request, svc, job)) for job in rows], next=after)


def metadata_filters(request: Request) -> tuple[tuple[str, str], ...]:
    """`metadata.KEY=VALUE` query parameters: the job's metadata holds KEY with the string VALUE."""
    found = tuple((name.removeprefix("metadata."), value) for name, value in request.query_params.multi_items()
                  if name.startswith("metadata."))
    if any(not key or len(key) > 128 or len(value) > 1024 for key, value in found):
        raise Rejected(422, "a metadata filter needs a key of 1 to 128 characters and a value of at most 1024",
                       code="invalid_filter")
    return found


@router.get("/{job_id}", response_model=JobView, responses={404: {}})
def get_job(job_id: str, request: Request, svc: ServicesDep, session: SessionDep, tenant: TenantDep) -> JobView:
    """The job's status, page counts, per-page errors and timestamps."""
    job = jobs.get_job(session, tenant_id=tenant, job_id=job_id)
    errors = [PageError(page=p.index + 1, error=p.error or "") for p in jobs.failed_pages(session, job_id=job.id)]
    threshold = svc.settings.confidence_threshold_of(tenant)
    return JobView(**summary(request, svc, job), page_errors=errors, confidence_threshold=threshold,
                   low_confidence_pages=jobs.low_confidence_pages(session, job_id=job.id, threshold=threshold))


@router.get("/{job_id}/pages", response_model=PageList, responses={404: {}, 410: {}})
def get_pages(job_id: str, session: SessionDep, tenant: TenantDep,
              after: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
              limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT)] = 50,
              format: Literal["markdown", "text", "json"] = "markdown") -> Response:
    """The pages done or failed so far numbered above `after`, in page order; it works while the job runs."""
    job = jobs.get_job(session, tenant_id=tenant, job_id=job_id)
    if gone := _gone(job):
        return gone
    pages, next_after = jobs.finished_pages(session, job=job, after=after, limit=limit)
    body = PageList(job_id=job.id, status=job.status, pages_total=job.pages_total, next_after=next_after,
                    pages=[PageText(**results.page_text(page, format)) for page in pages])
    return JSONResponse(body.model_dump(mode="json"))


def _gone(job) -> Response | None:
    """410 for a job whose text is no longer kept: erased by the tenant, or expired under retention."""
    if job.erased_at:
        return problem(410, "the job was erased", code="erased", status=job.status,
                       erased_at=job.erased_at.isoformat())
    if job.expired_at:
        return problem(410, "the result has expired and was deleted", code="expired", status=job.status,
                       expired_at=job.expired_at.isoformat())
    return None


@router.get("/{job_id}/result", responses={200: {"content": {"text/markdown": {}, "text/plain": {},
                                                             "application/pdf": {}, "application/xhtml+xml": {},
                                                             "application/xml": {}, "application/zip": {},
                                                             "text/csv": {}, results.MEDIA_TYPES["xlsx"]: {}}},
                                           303: {}, 404: {}, 409: {}, 410: {}, 422: {}})
def get_result(job_id: str, svc: ServicesDep, session: SessionDep, tenant: TenantDep,
               format: ResultFormat | None = None) -> Response:
    """The result in the asked format (default: the job's `output`); 409 until the job has finished.

    `pdf`: the pages with a searchable text layer; stored when the job was submitted with output=pdf,
    built on demand otherwise (while the source is still stored). `hocr` (hOCR 1.2), `alto` (ALTO v4) and
    `page` (a zip of PAGE XML 2019, one file a page): lines and words with boxes and confidence.
    """
    job = jobs.get_job(session, tenant_id=tenant, job_id=job_id)
    fmt = format or job.output
    if gone := _gone(job):
        return gone
    if job.status != "succeeded":
        return problem(409, f"job is {job.status}", code="not_finished", status=job.status, error=job.error)
    key = (pdf_results.stored_key(job) if fmt == "pdf" else
           job.result_key and fmt in results.STORED_FORMATS and results.object_key(job.result_key, fmt))
    if key:
        url = svc.storage.presign(key, ttl_s=svc.settings.presign_ttl_s)
        if url:
            return RedirectResponse(url, status_code=303)
        try:
            stored = svc.storage.read(key)
            return Response(stored, media_type=results.media_type(fmt, stored), headers=_attachment(job, fmt, stored))
        except ObjectMissing:  # deleted from the store: built again below, as for a job stored without it
            log.warning("job %s: its stored %s result is missing; building it again", job.id, fmt)
    if fmt == "pdf":
        body = pdf_results.build_on_demand(svc, session, job=job)
    else:
        body = results.body(job, jobs.pages_of(session, job_id=job.id), fmt)
    return Response(body, media_type=results.media_type(fmt, body), headers=_attachment(job, fmt, body))


def _attachment(job, fmt: str, body: bytes) -> dict[str, str]:
    """A PDF, CSV or XLSX downloads under the document's name; text formats show inline as before."""
    if fmt not in ("pdf", *results.TABLE_FORMATS):
        return {}
    stem = (job.filename or job.id).rsplit(".", 1)[0]
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem)[:120] or job.id
    return {"Content-Disposition": f'attachment; filename="{name}.{results.extension(fmt, body)}"'}


@router.post("/{job_id}/erase", response_model=JobSummary, status_code=200, responses={202: {}, 404: {}})
def erase_job(job_id: str, request: Request, svc: ServicesDep, tenant: TenantDep) -> Response:
    """Erase the job now: cancel it if it runs, delete its source, results, PDF, page texts and webhook bodies,
    and keep a tombstone (id, counts, timestamps, `erased_at`). 200 when done; 202 while storage is unreachable
    (the retention sweep finishes it). Erasing again answers the same."""
    with svc.db.session() as session:
        job = jobs.get_job(session, tenant_id=tenant, job_id=job_id)
    done = erase.erase_job(svc, job=job)
    with svc.db.session() as session:
        job = jobs.get_job(session, tenant_id=tenant, job_id=job_id)
        body = JobSummary(**summary(request, svc, job)).model_dump(mode="json")
    return JSONResponse(body, status_code=200 if done else 202)


@router.delete("/{job_id}", response_model=JobAccepted, responses={404: {}})
def cancel_job(job_id: str, request: Request, svc: ServicesDep, tenant: TenantDep) -> JobAccepted:
    """Cancel: pages not started are dropped; a finished job is left as it is."""
    job = jobs.cancel(svc, tenant_id=tenant, job_id=job_id)
    return JobAccepted(id=job.id, status=job.status, links=links(request, job.id))
