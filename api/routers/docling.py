"""docling-serve's convert API over ocrq jobs: /v1/convert/{file,source}[/async], /v1/status/poll, /v1/result.

Thin over common.docling.service; the shapes are docling-serve's (common/docling/schemas.py), the key a Bearer or
an X-Api-Key, the tenant, limits and SSRF guard those of POST /jobs.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from api import uploads
from api.deps import KeyTenantDep, ServicesDep, SessionDep, tenant_of_key
from common.docling import options as docling_options
from common.docling import service as docling
from common.docling.schemas import (
    ConvertDocumentResponse,
    ConvertSourcesRequest,
    TaskStatusResponse,
    WebsocketMessage,
)
from common.errors import NotFound, Rejected
from common.jobs import service as jobs
from common.jobs.service import Source
from common.jobs.states import JOB_TERMINAL
from common.services import Services

router = APIRouter(prefix="/v1", tags=["docling-serve"])
ERRORS = {400: {}, 401: {}, 404: {}, 413: {}, 415: {}, 422: {}, 429: {}, 504: {}}
# The form's fields other than the options, and how many fields a form may carry (options repeat: to_formats...).
FORM_FIELDS = ("files", "target_type", "callbacks")
MAX_FORM_FIELDS = 200
MAX_FORM_FILES = 16  # more than one is refused with a sentence; past this the form is not read at all
# How long the status websocket waits for the task to end before it sends the next update anyway.
WS_UPDATE_EVERY_S = 5.0

FILE_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"],
    "properties": {"files": {"type": "string", "format": "binary"},
                   "target_type": {"type": "string", "enum": ["inbody"]},
                   "to_formats": {"type": "array",
                                  "items": {"type": "string", "enum": list(docling_options.TO_FORMATS)}},
                   "do_ocr": {"type": "boolean"}, "force_ocr": {"type": "boolean"},
                   "page_range": {"type": "array", "items": {"type": "integer"}},
                   "md_page_break_placeholder": {"type": "string"}},
}}}}}


async def _file_request(request: Request, svc: Services) -> tuple[Source, docling_options.ConvertOptions]:
    """The multipart form's one file, copied to a temp file, and its options checked."""
    try:
        form = await request.form(max_files=MAX_FORM_FILES, max_fields=MAX_FORM_FIELDS)
    except Exception as exc:  # starlette raises several types for malformed or oversized multipart bodies
        if exc.__class__.__name__ == "BodyTooLarge":
            raise
        raise Rejected(400, f"malformed multipart body: {exc}", code="bad_multipart") from exc
    try:
        uploads_sent = [part for part in form.getlist("files") if isinstance(part, UploadFile)]
        if len(uploads_sent) > 1:
            raise Rejected(422, "files: ocrq converts one document a request; send each on its own",
                           code="too_many_sources")
        if not uploads_sent:
            raise Rejected(422, "a multipart 'files' part is required", code="missing_file")
        upload = uploads_sent[0]
        fields = [(k, v) for k, v in form.multi_items() if k not in FORM_FIELDS and isinstance(v, str)]
        target = form.get("target_type")
        docling.check_target("inbody" if target is None else str(target))
        docling.refuse_callbacks(form.getlist("callbacks"))
        options = docling_options.from_form(fields)
        return uploads.save_upload(upload, max_bytes=svc.settings.max_upload_bytes), options
    finally:
        await form.close()


async def _source_request(svc: Services, body: ConvertSourcesRequest) -> tuple[Source, docling_options.ConvertOptions]:
    options = docling_options.from_json(body.options)
    return await run_in_threadpool(docling.one_source, svc, body), options


async def _submit(svc: Services, tenant: str, source: Source, options, *, priority: str):
    try:
        return await run_in_threadpool(docling.submit, svc, tenant_id=tenant, source=source, options=options,
                                       priority=priority)
    finally:
        if source.path:
            source.path.unlink(missing_ok=True)


async def _answer(svc: Services, tenant: str, job_id: str) -> ConvertDocumentResponse:
    job = await jobs.wait_for_end(svc, tenant_id=tenant, job_id=job_id, timeout_s=svc.settings.sync_wait_s)
    if job.status not in JOB_TERMINAL:
        raise Rejected(504, f"the conversion is taking longer than {svc.settings.sync_wait_s:g} s; it goes on as "
                            f"task {job.id}: poll /v1/status/poll/{job.id}", code="timeout")
    return await run_in_threadpool(docling.result_of, svc, job=job)


@router.post("/convert/file", response_model=ConvertDocumentResponse, responses=ERRORS, openapi_extra=FILE_BODY)
async def convert_file(request: Request, svc: ServicesDep, tenant: KeyTenantDep) -> ConvertDocumentResponse:
    """Convert one uploaded document (`files`) and answer its result when done (docling-serve's shape)."""
    source, options = await _file_request(request, svc)
    job = await _submit(svc, tenant, source, options, priority="interactive")
    return await _answer(svc, tenant, job.id)


@router.post("/convert/source", response_model=ConvertDocumentResponse, responses=ERRORS)
async def convert_source(body: ConvertSourcesRequest, svc: ServicesDep,
                         tenant: KeyTenantDep) -> ConvertDocumentResponse:
    """Convert one document given by URL (`kind: http`) or as base64 (`kind: file`), answering its result."""
    source, options = await _source_request(svc, body)
    job = await _submit(svc, tenant, source, options, priority="interactive")
    return await _answer(svc, tenant, job.id)


@router.post("/convert/file/async", response_model=TaskStatusResponse, responses=ERRORS, openapi_extra=FILE_BODY)
async def convert_file_async(request: Request, svc: ServicesDep, tenant: KeyTenantDep) -> TaskStatusResponse:
    """Queue one uploaded document; the task id is the ocrq job's id."""
    source, options = await _file_request(request, svc)
    return docling.task_status(await _submit(svc, tenant, source, options, priority="bulk"))


@router.post("/convert/source/async", response_model=TaskStatusResponse, responses=ERRORS)
async def convert_source_async(body: ConvertSourcesRequest, svc: ServicesDep,
                               tenant: KeyTenantDep) -> TaskStatusResponse:
    """Queue one document given by URL or as base64."""
    source, options = await _source_request(svc, body)
    return docling.task_status(await _submit(svc, tenant, source, options, priority="bulk"))


@router.get("/status/poll/{task_id}", response_model=TaskStatusResponse, responses={404: {}, 401: {}})
async def poll(task_id: str, svc: ServicesDep, tenant: KeyTenantDep,
               wait: Annotated[float, Query(ge=0, description="seconds to wait for the task to end")] = 0.0,
               ) -> TaskStatusResponse:
    """The task's status, waiting up to `wait` seconds (at most OCRQ_POLL_WAIT_MAX_S) for it to end."""
    try:
        job = await jobs.wait_for_end(svc, tenant_id=tenant, job_id=task_id,
                                      timeout_s=min(wait, svc.settings.poll_wait_max_s))
    except NotFound:
        raise docling.task_not_found() from None
    return docling.task_status(job)


@router.get("/result/{task_id}", response_model=ConvertDocumentResponse, responses={404: {}, 401: {}})
def task_result(task_id: str, session: SessionDep, tenant: KeyTenantDep) -> ConvertDocumentResponse:
    """The ended task's result; 404 `Task result not found...` until then, `Task not found.` for an unknown id."""
    job = docling.tenant_job(session, tenant_id=tenant, task_id=task_id)
    return docling.result(session, job=job)


@router.websocket("/status/ws/{task_id}")
async def status_ws(websocket: WebSocket, task_id: str, api_key: str = "") -> None:
    """docling-serve's status stream: a `connection` frame, then an `update` each time the client sends a
    message (at the task's end, or after 5 s), closed once the task has ended. The key: X-Api-Key, a Bearer or
    `?api_key=`; without a good one the handshake is refused (its client then polls, and is told 401)."""
    svc = websocket.app.state.services
    scheme, _, bearer = websocket.headers.get("authorization", "").partition(" ")
    key = websocket.headers.get("x-api-key") or (bearer if scheme.lower() == "bearer" else "") or api_key
    tenant = await run_in_threadpool(tenant_of_key, svc, key)
    if tenant is None or not (await run_in_threadpool(svc.limiter.hit, tenant)).allowed:
        await websocket.close(code=1008)
        return
    await websocket.accept()
    try:
        job = await jobs.wait_for_end(svc, tenant_id=tenant, job_id=task_id, timeout_s=0)
    except NotFound:
        await websocket.send_text(WebsocketMessage(message="error", error=docling.TASK_NOT_FOUND).model_dump_json())
        await websocket.close()
        return
    try:
        frame = WebsocketMessage(message="connection", task=docling.task_status(job))
        await websocket.send_text(frame.model_dump_json())
        while True:
            frame = WebsocketMessage(message="update", task=docling.task_status(job))
            await websocket.send_text(frame.model_dump_json())
            if job.status in JOB_TERMINAL:
                await websocket.close()
                return
            await websocket.receive_text()  # each message asks for the next update
            job = await jobs.wait_for_end(svc, tenant_id=tenant, job_id=task_id, timeout_s=WS_UPDATE_EVERY_S)
    except WebSocketDisconnect:
        return
