"""Open WebUI's external document loader: `PUT /process` with the file as the body (common/openwebui)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from api import uploads
from api.deps import ServicesDep, TenantDep
from common.errors import Rejected
from common.jobs import service as jobs
from common.jobs.states import JOB_TERMINAL
from common.openwebui import service as openwebui

router = APIRouter(tags=["open-webui"])

PROCESS_BODY = {"requestBody": {"required": True, "content": {"application/octet-stream": {
    "schema": {"type": "string", "format": "binary"}}}},
    "parameters": [{"name": "X-Filename", "in": "header", "required": False, "schema": {"type": "string"},
                    "description": "the file's name, URL-quoted"}]}


@router.put("/process", responses={200: {"content": {"application/json": {}}}, 400: {}, 401: {}, 413: {}, 415: {},
                                   422: {}, 429: {}, 504: {}}, openapi_extra=PROCESS_BODY)
async def process(request: Request, svc: ServicesDep, tenant: TenantDep) -> list[dict]:
    """OCR the file sent as the body and answer one `{page_content, metadata}` a page, when the job has ended."""
    filename = openwebui.filename_of(request.headers.get("x-filename"))
    source = await uploads.save_body(request, filename=filename, max_bytes=svc.settings.max_upload_bytes)
    try:
        job = await run_in_threadpool(openwebui.submit, svc, tenant_id=tenant, source=source)
    finally:
        source.path.unlink(missing_ok=True)
    job = await jobs.wait_for_end(svc, tenant_id=tenant, job_id=job.id, timeout_s=svc.settings.sync_wait_s)
    if job.status not in JOB_TERMINAL:
        raise Rejected(504, f"the document is taking longer than {svc.settings.sync_wait_s:g} s; it goes on as job "
                            f"{job.id}", code="timeout")
    return await run_in_threadpool(openwebui.documents, svc, job=job)
