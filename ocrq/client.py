"""Python clients for the ocrq HTTP API: `Client` (blocking) and `AsyncClient`, both on httpx.

Every request is retried on transport errors and on 429/503 answers, waiting as Retry-After says; each submit
carries an Idempotency-Key, the same on each of its retries, so a retry never makes a second job. A job's event
stream reconnects where it dropped, with Last-Event-ID.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import httpx
from httpx_sse import EventSource, aconnect_sse, connect_sse
from pydantic import BaseModel

from common.batches.schemas import BatchAccepted, BatchCreate, BatchList, BatchView
from common.jobs.schemas import (
    JobAccepted,
    JobFromSource,
    JobList,
    JobOptions,
    JobStatus,
    JobSummary,
    JobView,
    PageList,
    PageText,
    ResultFormat,
)

__all__ = ["AsyncClient", "AsyncJob", "Client", "Event", "Job", "OcrqError", "Retry", "Source", "TERMINAL"]

TERMINAL: frozenset[JobStatus] = frozenset({"succeeded", "failed", "canceled"})
RETRY_STATUSES = frozenset({429, 503})
TextFormat = Literal["markdown", "text", "hocr", "alto"]
BinaryFormat = Literal["pdf", "page", "csv", "xlsx"]
PageFormat = Literal["markdown", "text", "json"]
# A document to read: a local file (path), its bytes, an http(s) URL or an s3:// URI the service fetches.
Source = str | os.PathLike[str] | bytes
Model = TypeVar("Model", bound=BaseModel)


class OcrqError(Exception):
    """An answer the API refused with, or no answer at all (`status` None): its code and its sentence."""

    def __init__(self, status: int | None, code: str, message: str, *, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status or 'no answer'} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.body = body or {}

    @classmethod
    def from_response(cls, response: httpx.Response) -> OcrqError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("code"), str):
            return cls(response.status_code, body["code"], str(body.get("detail", "")), body=body)
        code = f"http_{response.status_code}"
        if isinstance(body, dict) and isinstance(body.get("detail"), list):  # FastAPI's own validation errors
            return cls(response.status_code, code, "; ".join(map(_validation_message, body["detail"]))
                       or "invalid request", body=body)
        return cls(response.status_code, code, response.text[:200].strip() or response.reason_phrase)

    @property
    def unreachable(self) -> bool:
        """No answer came: the server could not be reached, or did not answer in time."""
        return self.status is None


def _validation_message(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = [str(part) for part in item.get("loc", []) if part not in ("query", "body", "path", "header")]
    message = str(item.get("msg", "invalid"))
    return f"{'.'.join(where)}: {message}" if where else message


@dataclass(frozen=True)
class Retry:
    """How often and how long to retry transport errors and 429/503 answers.

    `connect_attempts` caps the tries that found no server (the connection failed) or no answer in time (None:
    `attempts`), for a caller that would rather say soon that the server is down.
    """

    attempts: int = 6
    backoff_s: float = 0.5
    max_wait_s: float = 60.0
    connect_attempts: int | None = None

    def gives_up(self, attempt: int, connects_failed: int) -> bool:
        """Whether the try numbered `attempt`, after `connects_failed` connections that failed, was the last."""
        return attempt >= self.attempts or connects_failed >= (self.connect_attempts or self.attempts)

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before attempt `attempt + 1`: Retry-After where the answer gives one, else backoff."""
        told = retry_after(response.headers.get("retry-after")) if response is not None else None
        if told is None:
            told = self.backoff_s * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
        return min(max(told, 0.0), self.max_wait_s)


def retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()


@dataclass
class _Call:
    """One API request, sans I/O: what to send, which statuses are answers, and how to read them."""

    method: str
    path: str
    ok: tuple[int, ...] = (200,)
    params: Any = None
    json: Any = None
    data: dict[str, str] | None = None
    upload: tuple[str, Path | bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    follow_redirects: bool = False

    def kwargs(self, files: ExitStack) -> dict[str, Any]:
        """httpx.request's arguments, the upload opened afresh for each attempt."""
        sent: dict[str, Any] = {"params": self.params, "json": self.json, "data": self.data,
                                "headers": self.headers, "follow_redirects": self.follow_redirects}
        if self.upload is not None:
            name, content = self.upload
            body = files.enter_context(content.open("rb")) if isinstance(content, Path) else content
            sent["files"] = {"file": (name, body)}
        return sent


def _submit_call(source: Source, *, filename: str | None, idempotency_key: str | None,
                 options: dict[str, Any]) -> _Call:
    headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
    if isinstance(source, str) and source.startswith(("http://", "https://", "s3://")):
        kind = "s3_uri" if source.startswith("s3://") else "source_url"
        body = JobFromSource.model_validate({kind: source, **options})
        return _Call("POST", "/jobs", ok=(202,), json=body.model_dump(mode="json", exclude_unset=True),
                     headers=headers)
    fields = JobOptions.model_validate(options).model_dump(mode="json", exclude_unset=True)
    data = {k: json.dumps(v) if k == "metadata" else str(v) for k, v in fields.items() if v is not None}
    if isinstance(source, (bytes, bytearray, memoryview)):
        upload: tuple[str, Path | bytes] = (filename or "upload", bytes(source))
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        upload = (filename or path.name, path)
    return _Call("POST", "/jobs", ok=(202,), data=data, upload=upload, headers=headers)


def _list_params(filters: dict[str, Any], cursor: str | None) -> list[tuple[str, str]]:
    """GET /jobs's query: `status` may be a list, `metadata` a dict (sent as metadata.KEY=VALUE)."""
    params: list[tuple[str, str]] = []
    for name, value in filters.items():
        if value is None:
            continue
        if name == "metadata":
            params += [(f"metadata.{k}", str(v)) for k, v in value.items()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            params += [(name, str(v)) for v in value]
        else:
            params.append((name, value.isoformat() if isinstance(value, datetime) else str(value)))
    if cursor:
        params.append(("cursor", cursor))
    return params


def _result_call(job_id: str, fmt: str | None) -> _Call:
    return _Call("GET", f"/jobs/{job_id}/result", params={"format": fmt} if fmt else None, follow_redirects=True)


def _result_value(response: httpx.Response, fmt: str | None) -> str | bytes | dict[str, Any]:
    media = response.headers.get("content-type", "")
    if fmt == "json" or (fmt is None and media.startswith("application/json")):
        return response.json()
    if fmt in ("pdf", "page", "csv", "xlsx") or (fmt is None and not media.startswith(("text/", "application/xhtml",
                                                                          "application/xml"))):
        return response.content
    return response.text


@dataclass(frozen=True)
class Event:
    """One event of a job's stream: `page.done`, `page.failed`, then `job.succeeded`, `job.failed` or
    `job.canceled`, the last. `id` is what Last-Event-ID resumes after."""

    id: str | None
    type: str
    data: dict[str, Any]

    @property
    def terminal(self) -> bool:
        return self.type.startswith("job.")


class _Resumption:
    """What the sync and async event loops share: where to resume, and when a refused, dropped or ended stream
    is given up on (each failure raises then, else says how long to wait before opening it again)."""

    def __init__(self, job_id: str, last_event_id: str | None, client: Any) -> None:
        self.job_id, self.last, self.failures, self.client = job_id, last_event_id, 0, client

    def request(self) -> tuple[str, dict[str, str]]:
        return f"/jobs/{self.job_id}/events", {"Last-Event-ID": self.last} if self.last else {}

    @staticmethod
    def refusal(source: EventSource) -> httpx.Response | None:
        """The answer when it is a refusal rather than the stream, else None."""
        response = source.response
        return None if response.status_code == 200 else response

    def refused(self, response: httpx.Response) -> float:
        self.failures += 1
        if response.status_code not in RETRY_STATUSES or self.client.retry.gives_up(self.failures, 0):
            raise OcrqError.from_response(response)
        return self.client.retry.delay(self.failures, response)

    def event(self, sse: Any) -> Event | None:
        """The stream's event, or None for the stream's `retry:` hint alone."""
        if sse.event == "message" and not sse.data:
            return None
        event = Event(id=sse.id or None, type=sse.event, data=json.loads(sse.data or "{}"))
        self.failures, self.last = 0, event.id or self.last
        return event

    def dropped(self, exc: httpx.TransportError) -> float:
        self.failures += 1
        if self.client.retry.gives_up(self.failures, 0):
            raise self.client._unreachable(exc) from exc
        return self.client.retry.delay(self.failures, None)

    def ended(self) -> float:
        self.failures += 1  # ended without the terminal event: a server going down ends its streams so
        if self.client.retry.gives_up(self.failures, 0):
            raise OcrqError(None, "stream_ended", f"the event stream of job {self.job_id} kept ending early")
        return self.client.retry.delay(self.failures, None)


# The stream waits on events as long as the job takes (the server sends a comment when silent too long).
STREAM_TIMEOUT = httpx.Timeout(60.0, read=None)


class _Base:
    def __init__(self, url: str | None, key: str | None, *, timeout: float, retry: Retry | None) -> None:
        self.url = (url or os.environ.get("OCRQ_URL") or "http://127.0.0.1:8000").rstrip("/")
        key = key or os.environ.get("OCRQ_API_KEY")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.timeout = timeout
        self.retry = retry or Retry()

    def _answer(self, call: _Call, response: httpx.Response) -> httpx.Response:
        if response.status_code not in call.ok:
            raise OcrqError.from_response(response)
        return response

    def _unreachable(self, exc: httpx.TransportError) -> OcrqError:
        code = "timeout" if isinstance(exc, httpx.TimeoutException) else "unreachable"
        return OcrqError(None, code, f"{self.url}: {exc.__class__.__name__}: {exc}")


class Client(_Base):
    """A blocking client. `Client(url, key)`; both default to OCRQ_URL and OCRQ_API_KEY.

    `http` lends an httpx.Client of your own (its base URL and headers are then yours to set).
    """

    def __init__(self, url: str | None = None, key: str | None = None, *, timeout: float = 60.0,
                 retry: Retry | None = None, http: httpx.Client | None = None) -> None:
        super().__init__(url, key, timeout=timeout, retry=retry)
        self._own = http is None
        self.http = http or httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)
        self.jobs = _Jobs(self)
        self.batches = _Batches(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own:
            self.http.close()

    def _send(self, call: _Call) -> httpx.Response:
        connects_failed = 0
        for attempt in range(1, self.retry.attempts + 1):
            try:
                with ExitStack() as files:
                    response = self.http.request(call.method, call.path, **call.kwargs(files))
            except httpx.TransportError as exc:
                connects_failed += isinstance(exc, (httpx.ConnectError, httpx.TimeoutException))
                if self.retry.gives_up(attempt, connects_failed):
                    raise self._unreachable(exc) from exc
                time.sleep(self.retry.delay(attempt, None))
                continue
            if response.status_code not in RETRY_STATUSES or self.retry.gives_up(attempt, 0):
                return self._answer(call, response)
            time.sleep(self.retry.delay(attempt, response))
        raise AssertionError("unreachable")

    def _model(self, call: _Call, model: type[Model]) -> Model:
        return model.model_validate(self._send(call).json())

    def submit(self, source: Source, *, filename: str | None = None, idempotency_key: str | None = None,
               **options: Any) -> Job:
        """Submit a document: a path, bytes, an http(s) URL or an s3:// URI. Options as POST /jobs takes them
        (pages, output, webhook_url, priority, metadata; source_profile for s3://)."""
        call = _submit_call(source, filename=filename, idempotency_key=idempotency_key, options=options)
        accepted = self._model(call, JobAccepted)
        return Job(self, accepted.id, accepted.status)

    def job(self, job_id: str) -> Job:
        """A handle on an existing job; nothing is sent until it is used."""
        return Job(self, job_id)


class Job:
    """A job of a `Client`: poll it, read its pages and result, cancel or erase it."""

    def __init__(self, client: Client, job_id: str, status: JobStatus | None = None) -> None:
        self.client, self.id, self.status = client, job_id, status
        self.erase_pending = False

    def __repr__(self) -> str:
        return f"Job({self.id!r}, status={self.status!r})"

    def get(self) -> JobView:
        view = self.client._model(_Call("GET", f"/jobs/{self.id}"), JobView)
        self.status = view.status
        return view

    def wait(self, timeout: float | None = None, *, poll_s: float = 0.5) -> JobView:
        """Poll until the job ends (succeeded, failed or canceled); TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(0.1, poll_s)
        while (view := self.get()).status not in TERMINAL:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise TimeoutError(f"job {self.id} still {view.status} after {timeout} s")
            time.sleep(delay)
            delay = min(delay * 2, poll_s)
        return view

    def pages(self, format: PageFormat = "markdown", *, limit: int = 50) -> Iterator[PageText]:
        """The pages done or failed so far, each once, in page order; all of them once the job has ended."""
        seen: set[int] = set()
        after = 0
        while True:
            call = _Call("GET", f"/jobs/{self.id}/pages", params={"after": after, "limit": limit, "format": format})
            listing = self.client._model(call, PageList)
            self.status = listing.status
            for page in listing.pages:
                if page.page not in seen:
                    seen.add(page.page)
                    yield page
            if listing.next_after is None or listing.next_after == after or not listing.pages:
                return
            after = listing.next_after

    @overload
    def result(self, format: TextFormat) -> str: ...
    @overload
    def result(self, format: Literal["json"]) -> dict[str, Any]: ...
    @overload
    def result(self, format: BinaryFormat) -> bytes: ...
    @overload
    def result(self, format: None = None) -> str | bytes | dict[str, Any]: ...

    def result(self, format: ResultFormat | None = None) -> str | bytes | dict[str, Any]:
        """The result in `format` (default: the job's `output`): text, the json document, or pdf/page/csv/xlsx bytes.
        OcrqError 409 `not_finished` until the job has succeeded."""
        return _result_value(self.client._send(_result_call(self.id, format)), format)

    def content(self, format: ResultFormat | None = None) -> bytes:
        """The result's bytes as the API sent them, in any format."""
        return self.client._send(_result_call(self.id, format)).content

    def save(self, path: str | os.PathLike[str], format: ResultFormat | None = None) -> Path:
        """Write the result to the file `path`; the path written."""
        target = Path(path)
        target.write_bytes(self.content(format))
        return target

    def events(self, *, last_event_id: str | None = None) -> Iterator[Event]:
        """The job's events from the start (or after `last_event_id`), live, until the terminal one. A stream that
        drops is opened again after the last event seen; transport errors and 429/503 are retried as requests."""
        stream = _Resumption(self.id, last_event_id, self.client)
        while True:
            path, headers = stream.request()
            try:
                with connect_sse(self.client.http, "GET", path, headers=headers, timeout=STREAM_TIMEOUT) as source:
                    if (refused := stream.refusal(source)) is not None:
                        refused.read()
                        time.sleep(stream.refused(refused))
                        continue
                    for sse in source.iter_sse():
                        if (event := stream.event(sse)) is not None:
                            yield event
                            if event.terminal:
                                return
            except httpx.TransportError as exc:
                delay = stream.dropped(exc)
            else:
                delay = stream.ended()
            time.sleep(delay)

    def cancel(self) -> JobAccepted:
        accepted = self.client._model(_Call("DELETE", f"/jobs/{self.id}"), JobAccepted)
        self.status = accepted.status
        return accepted

    def erase(self) -> JobSummary:
        """Erase the job's documents and texts, keeping a tombstone (its `erased_at` set). `erase_pending` is then
        True while the storage did not answer (202): the service finishes the erase once it does."""
        response = self.client._send(_Call("POST", f"/jobs/{self.id}/erase", ok=(200, 202)))
        summary = JobSummary.model_validate(response.json())
        self.status, self.erase_pending = summary.status, response.status_code == 202
        return summary


class _Jobs:
    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, job_id: str) -> JobView:
        return self._client.job(job_id).get()

    def page(self, *, limit: int = 50, cursor: str | None = None, **filters: Any) -> JobList:
        """One page of the tenant's jobs, newest first, as GET /jobs answers it (`next`: the following page's cursor)."""
        return self._client._model(_Call("GET", "/jobs", params=_list_params({**filters, "limit": limit}, cursor)),
                                   JobList)

    def list(self, *, page_size: int = 50, **filters: Any) -> Iterator[JobSummary]:
        """The tenant's jobs, newest first, across every page. Filters: status (one or a list), priority,
        batch_id, created_after, created_before, metadata={key: value}."""
        cursor = None
        while True:
            page = self.page(limit=page_size, cursor=cursor, **filters)
            yield from page.jobs
            if not (cursor := page.next):
                return


class _Batches:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, input_prefix: str, output_prefix: str, *, idempotency_key: str | None = None,
               **options: Any) -> BatchAccepted:
        """Read every document under an s3:// input prefix into an s3:// output prefix."""
        body = BatchCreate.model_validate({"input_prefix": input_prefix, "output_prefix": output_prefix, **options})
        call = _Call("POST", "/batches", ok=(202,), json=body.model_dump(mode="json", exclude_unset=True),
                     headers={"Idempotency-Key": idempotency_key or str(uuid.uuid4())})
        return self._client._model(call, BatchAccepted)

    def get(self, batch_id: str) -> BatchView:
        return self._client._model(_Call("GET", f"/batches/{batch_id}"), BatchView)

    def cancel(self, batch_id: str) -> BatchView:
        return self._client._model(_Call("DELETE", f"/batches/{batch_id}"), BatchView)

    def erase(self, batch_id: str) -> BatchView:
        return self._client._model(_Call("POST", f"/batches/{batch_id}/erase", ok=(200, 202)), BatchView)

    def list(self, *, status: str | list[str] | None = None, page_size: int = 50) -> Iterator[BatchView]:
        cursor = None
        while True:
            call = _Call("GET", "/batches", params=_list_params({"status": status, "limit": page_size}, cursor))
            page = self._client._model(call, BatchList)
            yield from page.batches
            if not (cursor := page.next):
                return


class AsyncClient(_Base):
    """The asyncio twin of `Client`: the same methods, awaited (listings are async iterators)."""

    def __init__(self, url: str | None = None, key: str | None = None, *, timeout: float = 60.0,
                 retry: Retry | None = None, http: httpx.AsyncClient | None = None) -> None:
        super().__init__(url, key, timeout=timeout, retry=retry)
        self._own = http is None
        self.http = http or httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=timeout)
        self.jobs = _AsyncJobs(self)
        self.batches = _AsyncBatches(self)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self.http.aclose()

    async def _send(self, call: _Call) -> httpx.Response:
        connects_failed = 0
        for attempt in range(1, self.retry.attempts + 1):
            try:
                with ExitStack() as files:
                    response = await self.http.request(call.method, call.path, **call.kwargs(files))
            except httpx.TransportError as exc:
                connects_failed += isinstance(exc, (httpx.ConnectError, httpx.TimeoutException))
                if self.retry.gives_up(attempt, connects_failed):
                    raise self._unreachable(exc) from exc
                await asyncio.sleep(self.retry.delay(attempt, None))
                continue
            if response.status_code not in RETRY_STATUSES or self.retry.gives_up(attempt, 0):
                return self._answer(call, response)
            await asyncio.sleep(self.retry.delay(attempt, response))
        raise AssertionError("unreachable")

    async def _model(self, call: _Call, model: type[Model]) -> Model:
        return model.model_validate((await self._send(call)).json())

    async def submit(self, source: Source, *, filename: str | None = None, idempotency_key: str | None = None,
                     **options: Any) -> AsyncJob:
        """As `Client.submit`."""
        call = _submit_call(source, filename=filename, idempotency_key=idempotency_key, options=options)
        accepted = await self._model(call, JobAccepted)
        return AsyncJob(self, accepted.id, accepted.status)

    def job(self, job_id: str) -> AsyncJob:
        return AsyncJob(self, job_id)


class AsyncJob:
    """A job of an `AsyncClient`; as `Job`, awaited."""

    def __init__(self, client: AsyncClient, job_id: str, status: JobStatus | None = None) -> None:
        self.client, self.id, self.status = client, job_id, status
        self.erase_pending = False

    def __repr__(self) -> str:
        return f"AsyncJob({self.id!r}, status={self.status!r})"

    async def get(self) -> JobView:
        view = await self.client._model(_Call("GET", f"/jobs/{self.id}"), JobView)
        self.status = view.status
        return view

    async def wait(self, timeout: float | None = None, *, poll_s: float = 0.5) -> JobView:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(0.1, poll_s)
        while (view := await self.get()).status not in TERMINAL:
            if deadline is not None and time.monotonic() + delay > deadline:
                raise TimeoutError(f"job {self.id} still {view.status} after {timeout} s")
            await asyncio.sleep(delay)
            delay = min(delay * 2, poll_s)
        return view

    async def pages(self, format: PageFormat = "markdown", *, limit: int = 50) -> AsyncIterator[PageText]:
        seen: set[int] = set()
        after = 0
        while True:
            call = _Call("GET", f"/jobs/{self.id}/pages", params={"after": after, "limit": limit, "format": format})
            listing = await self.client._model(call, PageList)
            self.status = listing.status
            for page in listing.pages:
                if page.page not in seen:
                    seen.add(page.page)
                    yield page
            if listing.next_after is None or listing.next_after == after or not listing.pages:
                return
            after = listing.next_after

    async def result(self, format: ResultFormat | None = None) -> str | bytes | dict[str, Any]:
        return _result_value(await self.client._send(_result_call(self.id, format)), format)

    async def content(self, format: ResultFormat | None = None) -> bytes:
        return (await self.client._send(_result_call(self.id, format))).content

    async def save(self, path: str | os.PathLike[str], format: ResultFormat | None = None) -> Path:
        target = Path(path)
        target.write_bytes(await self.content(format))
        return target

    async def events(self, *, last_event_id: str | None = None) -> AsyncIterator[Event]:
        """As `Job.events`."""
        stream = _Resumption(self.id, last_event_id, self.client)
        while True:
            path, headers = stream.request()
            try:
                async with aconnect_sse(self.client.http, "GET", path, headers=headers,
                                        timeout=STREAM_TIMEOUT) as source:
                    if (refused := stream.refusal(source)) is not None:
                        await refused.aread()
                        await asyncio.sleep(stream.refused(refused))
                        continue
                    async for sse in source.aiter_sse():
                        if (event := stream.event(sse)) is not None:
                            yield event
                            if event.terminal:
                                return
            except httpx.TransportError as exc:
                delay = stream.dropped(exc)
            else:
                delay = stream.ended()
            await asyncio.sleep(delay)

    async def cancel(self) -> JobAccepted:
        accepted = await self.client._model(_Call("DELETE", f"/jobs/{self.id}"), JobAccepted)
        self.status = accepted.status
        return accepted

    async def erase(self) -> JobSummary:
        response = await self.client._send(_Call("POST", f"/jobs/{self.id}/erase", ok=(200, 202)))
        summary = JobSummary.model_validate(response.json())
        self.status, self.erase_pending = summary.status, response.status_code == 202
        return summary


class _AsyncJobs:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, job_id: str) -> JobView:
        return await self._client.job(job_id).get()

    async def page(self, *, limit: int = 50, cursor: str | None = None, **filters: Any) -> JobList:
        return await self._client._model(
            _Call("GET", "/jobs", params=_list_params({**filters, "limit": limit}, cursor)), JobList)

    async def list(self, *, page_size: int = 50, **filters: Any) -> AsyncIterator[JobSummary]:
        cursor = None
        while True:
            page = await self.page(limit=page_size, cursor=cursor, **filters)
            for job in page.jobs:
                yield job
            if not (cursor := page.next):
                return


class _AsyncBatches:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, input_prefix: str, output_prefix: str, *, idempotency_key: str | None = None,
                     **options: Any) -> BatchAccepted:
        body = BatchCreate.model_validate({"input_prefix": input_prefix, "output_prefix": output_prefix, **options})
        call = _Call("POST", "/batches", ok=(202,), json=body.model_dump(mode="json", exclude_unset=True),
                     headers={"Idempotency-Key": idempotency_key or str(uuid.uuid4())})
        return await self._client._model(call, BatchAccepted)

    async def get(self, batch_id: str) -> BatchView:
        return await self._client._model(_Call("GET", f"/batches/{batch_id}"), BatchView)

    async def cancel(self, batch_id: str) -> BatchView:
        return await self._client._model(_Call("DELETE", f"/batches/{batch_id}"), BatchView)

    async def erase(self, batch_id: str) -> BatchView:
        return await self._client._model(_Call("POST", f"/batches/{batch_id}/erase", ok=(200, 202)), BatchView)

    async def list(self, *, status: str | list[str] | None = None, page_size: int = 50) -> AsyncIterator[BatchView]:
        cursor = None
        while True:
            call = _Call("GET", "/batches", params=_list_params({"status": status, "limit": page_size}, cursor))
            page = await self._client._model(call, BatchList)
            for batch in page.batches:
                yield batch
            if not (cursor := page.next):
                return
