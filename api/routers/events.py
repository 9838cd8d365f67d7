"""/jobs/{id}/events and /batches/{id}/events: Server-Sent Events, read from the database (common.events)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from api.deps import ServicesDep, TenantDep
from api.errors import problem
from common.batches import service as batches
from common.errors import Rejected
from common.events import service as events
from common.jobs import service as jobs
from common.services import Services

router = APIRouter(tags=["events"])
STREAM = {200: {"content": {"text/event-stream": {}}, "description": "a stream of events"}, 404: {}, 410: {},
          422: {}}
MAX_EVENT_ID = 10**9
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", max_length=20)]


@router.get("/jobs/{job_id}/events", response_class=StreamingResponse, responses=STREAM)
async def job_events(job_id: str, svc: ServicesDep, tenant: TenantDep, last_event_id: LastEventId = None,
                     after: Annotated[int | None, Query(ge=0, le=MAX_EVENT_ID)] = None):
    """`page.done`, `page.failed`, then `job.succeeded`, `job.failed` or `job.canceled`, which ends the stream.
    Each event has an `id:`; reconnecting with `Last-Event-ID` (or `?after=`) resumes after it."""
    start = _start(last_event_id, after)
    job = await run_in_threadpool(_owned, svc, lambda s: jobs.get_job(s, tenant_id=tenant, job_id=job_id))
    if job.erased_at:
        return problem(410, "the job was erased", code="erased", erased_at=job.erased_at.isoformat())

    def read(session, seen: int):
        return events.job_events(session, job=jobs.get_job(session, tenant_id=tenant, job_id=job_id), after=seen)

    return _stream(svc, read, start)


@router.get("/batches/{batch_id}/events", response_class=StreamingResponse, responses=STREAM)
async def batch_events(batch_id: str, svc: ServicesDep, tenant: TenantDep, last_event_id: LastEventId = None,
                       after: Annotated[int | None, Query(ge=0, le=MAX_EVENT_ID)] = None):
    """`batch.progress` as objects end (with the counts), then `batch.completed` (or `.failed`, `.canceled`)."""
    start = _start(last_event_id, after)
    await run_in_threadpool(_owned, svc, lambda s: batches.get_batch(s, tenant_id=tenant, batch_id=batch_id))

    def read(session, seen: int):
        return events.batch_events(session, batch=batches.get_batch(session, tenant_id=tenant, batch_id=batch_id),
                                   after=seen)

    return _stream(svc, read, start)


def _start(last_event_id: str | None, after: int | None) -> int:
    if last_event_id is None:
        return after or 0
    if not (last_event_id.isascii() and last_event_id.isdigit()) or int(last_event_id) > MAX_EVENT_ID:
        raise Rejected(422, "Last-Event-ID must be an id this stream sent", code="invalid_event_id")
    return int(last_event_id)


def _owned(svc: Services, get: Callable):
    """The tenant's job or batch, or NotFound before any byte of the stream is sent."""
    with svc.db.session() as session:
        return get(session)


def _stream(svc: Services, read: Callable, start: int) -> StreamingResponse:
    return StreamingResponse(_events(svc, read, start), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def _events(svc: Services, read: Callable, seen: int) -> AsyncIterator[str]:
    """Poll for events after `seen` and send them; a comment when silent too long; end after the terminal one."""
    settings = svc.settings
    yield f"retry: {int(settings.events_poll_s * 4000)}\n\n"
    quiet_since = time.monotonic()
    while True:
        batch, ended = await run_in_threadpool(_read, svc, read, seen)
        for event in batch:
            yield f"id: {event.id}\nevent: {event.type}\ndata: {json.dumps(event.data, ensure_ascii=False)}\n\n"
            seen = event.id
        if ended:
            return
        if batch:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= settings.events_heartbeat_s:
            yield ": keep-alive\n\n"
            quiet_since = time.monotonic()
        await asyncio.sleep(settings.events_poll_s)


def _read(svc: Services, read: Callable, seen: int):
    with svc.db.session() as session:
        return read(session, seen)
