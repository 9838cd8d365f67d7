"""docling-serve's tasks as ocrq jobs: a task is a job of one document, its id the job's id, its tenant the key's."""

from __future__ import annotations

import base64
import binascii
import hashlib
import tempfile
from pathlib import Path

from sqlalchemy.orm import Session

from common.docling.document import docling_document
from common.docling.options import ConvertOptions, admits
from common.docling.schemas import (
    ConvertDocumentResponse,
    ConvertSourcesRequest,
    ErrorItem,
    ExportDocumentResponse,
    FileSourceRequest,
    ProfilingItem,
    TaskProcessingMeta,
    TaskStatusResponse,
)
from common.errors import NotFound, Rejected
from common.formats.plain import markdown_to_text
from common.jobs import service as jobs
from common.jobs.models import Job
from common.jobs.schemas import JobOptions
from common.jobs.service import Source
from common.jobs.states import JOB_TERMINAL
from common.netguard import UrlRefused, check_url
from common.queue.names import Priority
from common.services import Services

TASK_STATUS = {"queued": "pending", "running": "started", "failed": "failure", "canceled": "failure"}
# The answers docling-serve gives, word for word: its client tells "not found" from "not ready" by them.
TASK_NOT_FOUND = "Task not found."
RESULT_NOT_READY = "Task result not found. Please wait for a completion status."
# Where the job keeps how its result is to be answered (a job's metadata is the tenant's to read).
META_KEY = "docling"


def task_not_found() -> Rejected:
    return Rejected(404, TASK_NOT_FOUND, code="not_found")


def check_target(kind: str) -> None:
    """Only `inbody` is offered; docling's client falls back to it on this very sentence for presigned_url."""
    if kind == "presigned_url":
        raise Rejected(422, "target presigned_url requires artifact storage to be configured and enabled on the "
                            "server; ocrq answers inbody only", code="option_not_supported")
    if kind != "inbody":
        raise Rejected(422, f"target {kind} is not offered; ocrq answers inbody only", code="option_not_supported")


def refuse_callbacks(callbacks: list) -> None:
    """docling's callbacks are not offered: ocrq's webhooks (POST /jobs, webhook_url) are signed and retried."""
    if callbacks:
        raise Rejected(422, "option callbacks: ocrq cannot honour it; use POST /jobs with webhook_url",
                       code="option_not_supported")


def one_source(svc: Services, request: ConvertSourcesRequest) -> Source:
    """The request's one source: a base64 file, or an http(s) URL that the SSRF guard lets through (checked here,
    and again by the worker on every connection and redirect it fetches)."""
    if len(request.sources) != 1:
        raise Rejected(422, "sources: ocrq converts one document a request; send each on its own",
                       code="too_many_sources")
    refuse_callbacks(request.callbacks)
    check_target(request.target.kind)
    source = request.sources[0]
    if isinstance(source, FileSourceRequest):
        return _decoded_file(source, max_bytes=svc.settings.max_upload_bytes)
    if source.headers:
        raise Rejected(422, "sources[0].headers: ocrq fetches a URL without headers of the caller's",
                       code="option_not_supported")
    try:
        check_url(source.url, allowlist=svc.settings.net_allowlist)
    except UrlRefused as exc:
        raise Rejected(422, f"sources[0].url refused: {exc}", code="url_refused") from exc
    return Source(kind="url", uri=source.url, filename=source.url.rsplit("/", 1)[-1].split("?")[0] or None)


def _decoded_file(source: FileSourceRequest, *, max_bytes: int) -> Source:
    if len(source.base64_string) > (max_bytes + 2) // 3 * 4 + 4:
        raise Rejected(413, f"the file is larger than the {max_bytes}-byte limit", code="too_large")
    try:
        data = base64.b64decode(source.base64_string, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Rejected(422, "sources[0].base64_string is not valid base64", code="invalid_body") from exc
    with tempfile.NamedTemporaryFile(prefix="ocrq-docling-", delete=False) as tmp:
        tmp.write(data)
    return Source(kind="upload", uri=source.filename, filename=source.filename, path=Path(tmp.name),
                  sha256=hashlib.sha256(data).hexdigest())


def submit(svc: Services, *, tenant_id: str, source: Source, options: ConvertOptions, priority: Priority) -> Job:
    """The job of one docling conversion, checked and queued as any other (limits, SSRF guard, page selection)."""
    if not admits(options, source.filename):
        raise Rejected(422, "option from_formats: it excludes this document's format", code="format_excluded")
    asked = {"to_formats": list(options.to_formats), "md_page_break_placeholder": options.page_break}
    if options.page_range:
        asked["page_range"] = list(options.page_range)  # read by common.jobs.service.clamps_pages
    job_options = JobOptions(pages=options.pages, output="markdown", ocr=options.ocr, priority=priority,
                             metadata={META_KEY: asked})
    return jobs.submit(svc, tenant_id=tenant_id, source=source, options=job_options)


def task_status(job: Job) -> TaskStatusResponse:
    """The job as docling's task status."""
    ended = job.status in JOB_TERMINAL
    status = _conversion_status(job)
    meta = TaskProcessingMeta(num_docs=1, num_processed=int(ended), num_succeeded=int(status == "success"),
                              num_partially_succeeded=int(status == "partial_success"),
                              num_failed=int(status == "failure"))
    error = (job.error or f"the job was {job.status}") if status == "failure" else None
    return TaskStatusResponse(task_id=job.id, task_status=status, task_meta=meta, error_message=error)


def _conversion_status(job: Job) -> str:
    if job.status == "succeeded":
        return "partial_success" if job.pages_failed else "success"
    return TASK_STATUS[job.status]


def tenant_job(session: Session, *, tenant_id: str, task_id: str) -> Job:
    """The tenant's job of that task id; another tenant's is as unknown as a made-up one."""
    try:
        return jobs.get_job(session, tenant_id=tenant_id, job_id=task_id)
    except NotFound:
        raise task_not_found() from None


def result_of(svc: Services, *, job: Job) -> ConvertDocumentResponse:
    """As `result`, in a session of its own."""
    with svc.db.session() as session:
        return result(session, job=job)


def result(session: Session, *, job: Job) -> ConvertDocumentResponse:
    """The ended job's result in docling's shape, in the formats its request asked for."""
    if job.status not in JOB_TERMINAL or job.erased_at or job.expired_at:
        raise Rejected(404, RESULT_NOT_READY if not (job.erased_at or job.expired_at)
                       else "Task result not found: it was erased or has expired.", code="result_not_found")
    asked = (job.meta or {}).get(META_KEY) or {}
    formats = asked.get("to_formats") or ["md"]
    page_break = asked.get("md_page_break_placeholder") or ""
    pages = jobs.pages_of(session, job_id=job.id)
    done = [p for p in pages if p.status == "succeeded"]
    name = job.filename or job.id
    document = ExportDocumentResponse(filename=name)
    if "md" in formats:
        document.md_content = (f"\n\n{page_break}\n\n" if page_break else "\n\n").join(
            (p.text or "").strip() for p in done)
    if "text" in formats:
        document.text_content = "\n\n".join(markdown_to_text(p.text or "").strip() for p in done)
    if "json" in formats:
        document.json_content = docling_document(name.rsplit(".", 1)[0] or name, done)
    errors = [ErrorItem(error_message=p.error or "the page failed", page_no=p.index + 1)
              for p in pages if p.status == "failed"]
    if job.status != "succeeded" and not errors:
        errors = [ErrorItem(component_type="pipeline", error_message=job.error or f"the job was {job.status}",
                            category="unknown")]
    return ConvertDocumentResponse(document=document, status=_conversion_status(job), errors=errors,
                                   processing_time=_seconds(job), timings=_timings(job, pages))


def _seconds(job: Job) -> float:
    if job.finished_at and job.created_at:
        return round((job.finished_at - job.created_at).total_seconds(), 3)
    return 0.0


def _timings(job: Job, pages: list) -> dict[str, ProfilingItem]:
    timed = [p for p in pages if p.seconds is not None]
    timings = {"pipeline_total": ProfilingItem(scope="document", count=1, times=[_seconds(job)],
                                               start_timestamps=[job.created_at] if job.created_at else [])}
    if timed:
        timings["page_ocr"] = ProfilingItem(scope="page", count=len(timed), times=[round(p.seconds, 4) for p in timed])
    return timings
