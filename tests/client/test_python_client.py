"""The Python client (ocrq.client) against the real stack: the API served by uvicorn, a real worker, Postgres,
Redis and SeaweedFS. Only the retry tests put a transport of their own at the edge."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest
from pydantic import ValidationError

from common.jobs.schemas import JobView, PageText
from ocrq import AsyncClient, Client, OcrqError, Retry
from ocrq.client import retry_after
from tests.conftest import KEY_A, KEY_B
from tests.formats.pages import one_column
from tests.support.api_process import ApiProcess
from tests.support.stack import ROOT

MISSING = "0123456789abcdef0123456789abcdef"


@pytest.fixture()
def tenant_a(api_url):
    with Client(api_url, KEY_A) as client:
        yield client


@pytest.fixture()
def tenant_b(api_url):
    with Client(api_url, KEY_B) as client:
        yield client


@pytest.fixture(scope="module")
def page_png() -> bytes:
    buffer = io.BytesIO()
    one_column().save(buffer, "PNG")
    return buffer.getvalue()


def test_submit_wait_and_read_every_way(tenant_a, page_png, tmp_path):
    ref = uuid.uuid4().hex
    job = tenant_a.submit(page_png, filename="survey.png", output="markdown", metadata={"ref": ref})
    assert job.status == "queued"

    view = job.wait(timeout=120)
    assert isinstance(view, JobView) and view.status == "succeeded", (view.error, view.page_errors)
    assert (view.pages_total, view.pages_done, view.metadata) == (1, 1, {"ref": ref})

    markdown = job.result("markdown")
    assert isinstance(markdown, str) and "granite" in markdown
    document = job.result("json")
    assert isinstance(document, dict) and "granite" in json.dumps(document["pages"])
    assert "granite" in job.result("text") and job.result() == markdown  # the job's output is the default
    assert job.result("pdf").startswith(b"%PDF")

    pages = list(job.pages("json"))
    assert [type(p) for p in pages] == [PageText] and pages[0].status == "succeeded"
    assert "granite" in pages[0].text and pages[0].blocks

    assert [j.id for j in tenant_a.jobs.list(metadata={"ref": ref})] == [job.id]
    assert job.content("markdown").decode() == markdown
    assert job.save(tmp_path / "survey.pdf", "pdf").read_bytes().startswith(b"%PDF")

    events = list(job.events())  # the whole stream again, from its first event, to the terminal one
    assert [e.type for e in events] == ["page.done", "job.succeeded"] and all(e.id for e in events)
    assert events[-1].data["status"] == "succeeded" and events[-1].terminal
    assert [e.type for e in job.events(last_event_id=events[0].id)] == ["job.succeeded"]

    erased = job.erase()
    assert erased.erased_at is not None and not job.erase_pending
    with pytest.raises(OcrqError) as refused:
        job.result("markdown")
    assert (refused.value.status, refused.value.code) == (410, "erased")


def test_listing_follows_the_cursor(tenant_a, page_png):
    ref = uuid.uuid4().hex
    submitted = {tenant_a.submit(page_png, output="text", metadata={"ref": ref}).id for _ in range(3)}
    listed = [j.id for j in tenant_a.jobs.list(metadata={"ref": ref}, page_size=1)]
    assert sorted(listed) == sorted(submitted)  # three pages of one job each


def test_async_client_submits_a_path_and_waits(api_url, page_png, tmp_path):
    path = tmp_path / "survey.png"
    path.write_bytes(page_png)

    async def main():
        async with AsyncClient(api_url, KEY_A) as client:
            job = await client.submit(path, output="markdown")
            view = await job.wait(timeout=120)
            pages = [page async for page in job.pages()]
            listed = [j.id async for j in client.jobs.list(status="succeeded", page_size=100)]
            return view, await job.result("markdown"), pages, listed, job.id

    view, markdown, pages, listed, job_id = asyncio.run(main())
    assert view.status == "succeeded" and view.filename == "survey.png"
    assert "granite" in markdown and "granite" in pages[0].text
    assert job_id in listed


def test_another_tenants_job_is_404_with_the_apis_code(tenant_a, tenant_b, page_png):
    job = tenant_a.submit(page_png, output="text")
    theirs = tenant_b.job(job.id)
    for attempt in (theirs.get, lambda: theirs.result("text"), lambda: list(theirs.pages()), theirs.erase):
        with pytest.raises(OcrqError) as refused:
            attempt()
        assert (refused.value.status, refused.value.code) == (404, "not_found")
        assert refused.value.message.startswith("no such resource")
    assert tenant_a.job(job.id).wait(timeout=120).status == "succeeded"  # untouched by the other tenant


def test_an_unknown_id_is_404(tenant_a):
    for job_id in (MISSING, "nope"):
        with pytest.raises(OcrqError) as refused:
            tenant_a.job(job_id).get()
        assert (refused.value.status, refused.value.code) == (404, "not_found")
    with pytest.raises(OcrqError) as refused:
        tenant_a.job(MISSING).result("markdown")
    assert refused.value.status == 404


def test_a_wrong_key_is_401(api_url):
    with Client(api_url, "ocrq_not_a_key") as stranger, pytest.raises(OcrqError) as refused:
        stranger.job(MISSING).get()
    assert refused.value.status == 401 and refused.value.code


def test_a_lost_answer_is_sent_again_with_the_same_key_and_makes_one_job(api_url, tenant_a, page_png):
    """The first POST reaches the API, which makes the job; its answer is lost on the way back."""
    keys = []

    class LosesFirstAnswer(httpx.HTTPTransport):
        def handle_request(self, request):
            response = super().handle_request(request)
            if request.method == "POST":
                keys.append(request.headers["idempotency-key"])
                if len(keys) == 1:
                    response.read()
                    raise httpx.ReadError("connection reset", request=request)
            return response

    ref = uuid.uuid4().hex
    http = httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {KEY_A}"}, transport=LosesFirstAnswer())
    with http, Client(http=http, retry=Retry(backoff_s=0.05)) as client:
        job = client.submit(page_png, output="text", metadata={"ref": ref})
    assert len(keys) == 2 and keys[0] == keys[1]
    uuid.UUID(keys[0])
    assert [j.id for j in tenant_a.jobs.list(metadata={"ref": ref})] == [job.id]


def test_the_api_killed_mid_submit_is_retried_into_one_job(settings, tmp_path, page_png):
    """`ocrq api` SIGKILLs itself once the job is committed, before it answers; the client retries while an `ocrq
    api` starts again on the same port, which answers the same Idempotency-Key with that same job."""
    doomed = ApiProcess(settings, log=tmp_path / "doomed.log", extra_env={"OCRQ_FAULT_POINT": "after_commit"})
    doomed.wait_ready()
    ended: list[int] = []
    started: list[ApiProcess] = []

    def start_again() -> None:
        ended.append(doomed.wait_exit(timeout=120))
        started.append(ApiProcess(settings, log=tmp_path / "api.log", port=doomed.port))

    posts: list[str] = []
    http = httpx.Client(base_url=doomed.url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30,
                        event_hooks={"request": [lambda r: posts.append(r.headers.get("idempotency-key", ""))
                                                 if r.method == "POST" else None]})
    restart = threading.Thread(target=start_again)
    restart.start()
    ref = uuid.uuid4().hex
    try:
        with http, Client(http=http, retry=Retry(attempts=120, backoff_s=0.25, max_wait_s=0.5)) as client:
            job = client.submit(page_png, output="text", metadata={"ref": ref})
            listed = [j.id for j in client.jobs.list(metadata={"ref": ref})]
    finally:
        restart.join(timeout=130)
        for api in started:
            api.stop()
    assert ended == [-signal.SIGKILL]
    assert len(posts) >= 2 and len(set(posts)) == 1  # sent again, with the same key
    assert listed == [job.id]


class CutStream(httpx.SyncByteStream):
    """An event stream that sends `first` and then drops, as a restarting server's does."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    def __iter__(self):
        yield self.first
        raise httpx.ReadError("connection reset")


def test_a_dropped_event_stream_resumes_after_the_last_event():
    sent: list[httpx.Request] = []
    sse = {"content-type": "text/event-stream"}

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) == 1:
            return httpx.Response(200, headers=sse, stream=CutStream(
                b'retry: 2000\n\nid: 7\nevent: page.done\ndata: {"page": 1}\n\n'))
        return httpx.Response(200, headers=sse, content=b': keep-alive\n\nid: 9\nevent: job.succeeded\n'
                                                         b'data: {"status": "succeeded"}\n\n')

    client = Client(http=httpx.Client(base_url="http://ocrq.test", transport=httpx.MockTransport(handle)),
                    retry=Retry(backoff_s=0.01))
    events = list(client.job("a" * 32).events())
    assert [(e.id, e.type, e.data) for e in events] == [("7", "page.done", {"page": 1}),
                                                        ("9", "job.succeeded", {"status": "succeeded"})]
    assert "last-event-id" not in sent[0].headers and sent[1].headers["last-event-id"] == "7"


def test_an_unreachable_server_is_said_after_connect_attempts():
    tries = []

    def refuse(request: httpx.Request) -> httpx.Response:
        tries.append(request)
        raise httpx.ConnectError("connection refused", request=request)

    http = httpx.Client(base_url="http://ocrq.test", transport=httpx.MockTransport(refuse))
    with pytest.raises(OcrqError) as refused:
        Client(http=http, retry=Retry(attempts=6, backoff_s=0.01, connect_attempts=2)).job(MISSING).get()
    assert (refused.value.status, refused.value.code, len(tries)) == (None, "unreachable", 2)


def scripted(*answers: httpx.Response):
    """A transport answering each request with the next of `answers`, recording the requests."""
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        request.read()
        sent.append(request)
        return answers[len(sent) - 1]

    return httpx.MockTransport(handle), sent


ACCEPTED = {"id": "a" * 32, "status": "queued", "links": {"self": "x", "result": "y"}}


def test_429_and_503_are_retried_after_retry_after(page_png):
    transport, sent = scripted(
        httpx.Response(429, headers={"Retry-After": "1"}, json={"code": "rate_limited", "detail": "slow down"}),
        httpx.Response(503, headers={"Retry-After": "0"}, json={"code": "storage_unavailable", "detail": "later"}),
        httpx.Response(202, json=ACCEPTED))
    http = httpx.Client(base_url="http://ocrq.test", transport=transport)
    started = time.monotonic()
    job = Client(http=http).submit(page_png, output="json")
    assert time.monotonic() - started >= 1.0
    assert job.id == ACCEPTED["id"] and len(sent) == 3
    assert len({r.headers["idempotency-key"] for r in sent}) == 1
    assert all(page_png in r.content for r in sent)  # the whole upload, each time


def test_retries_give_up_with_the_last_answer():
    busy = httpx.Response(429, headers={"Retry-After": "0"}, json={"code": "rate_limited", "detail": "slow down"})
    transport, sent = scripted(*[busy] * 3)
    client = Client(http=httpx.Client(base_url="http://ocrq.test", transport=transport), retry=Retry(attempts=3))
    with pytest.raises(OcrqError) as refused:
        client.job(MISSING).get()
    assert (refused.value.status, refused.value.code, refused.value.message) == (429, "rate_limited", "slow down")
    assert len(sent) == 3


def test_two_submits_send_two_keys(page_png):
    transport, sent = scripted(httpx.Response(202, json=ACCEPTED), httpx.Response(202, json=ACCEPTED))
    client = Client(http=httpx.Client(base_url="http://ocrq.test", transport=transport))
    client.submit(page_png)
    client.submit("s3://bucket/scan.pdf", source_profile="service")
    assert sent[0].headers["idempotency-key"] != sent[1].headers["idempotency-key"]
    assert json.loads(sent[1].content) == {"s3_uri": "s3://bucket/scan.pdf", "source_profile": "service"}


def test_options_are_checked_before_sending(page_png):
    transport, sent = scripted()
    client = Client(http=httpx.Client(base_url="http://ocrq.test", transport=transport))
    with pytest.raises(ValidationError):
        client.submit(page_png, output="docx")
    assert sent == []


def test_retry_after_reads_seconds_and_dates():
    assert retry_after("3") == 3.0 and retry_after(None) is None and retry_after("soon") is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after(later) <= 30


def test_the_client_imports_only_httpx_pydantic_and_schemas():
    code = ("import sys, ocrq.client; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] "
            "not in sys.stdlib_module_names)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split())
    ours = {m for m in loaded if m.split(".")[0] in ("api", "worker", "cli", "common")}
    assert ours <= {"common", "common.jobs", "common.jobs.schemas", "common.batches", "common.batches.schemas",
                    "common.queue", "common.queue.names", "common.queue.buckets"}, ours
    server_only = {"sqlalchemy", "fastapi", "starlette", "celery", "redis", "boto3", "botocore", "psycopg",
                   "pydantic_settings", "PIL", "numpy", "opentelemetry"}
    assert not server_only & {m.split(".")[0] for m in loaded}
