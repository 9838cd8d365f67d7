"""One trace per job across processes: the API, a prefork worker and a webhook worker each export over OTLP to a
collector in this process, and the spans of a two-page job form one tree rooted at POST /jobs."""

from __future__ import annotations

import io
import time

import httpx
import pytest

from common.queue.names import WEBHOOK_QUEUE
from tests.conftest import KEY_A, make_settings
from tests.support import webhook_receiver
from tests.support.api_process import ApiProcess
from tests.support.engine_server import render_page
from tests.support.otlp_collector import Collector
from tests.support.stack import Stack

SERVER, CONSUMER, PRODUCER = 2, 5, 4  # OTLP span kinds


@pytest.fixture(scope="module")
def traced(tmp_path_factory, pg_url, redis_url, s3):
    """A collector, then the API, a prefork worker and a webhook worker whose OTEL_* point at it."""
    collector = Collector()
    receiver = webhook_receiver.start()
    settings = make_settings(home=tmp_path_factory.mktemp("traced"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             inline_result_bytes=1)
    logs = tmp_path_factory.mktemp("traced-logs")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    api = ApiProcess(settings, log=logs / "api.log", extra_env=env)
    with Stack(settings, logs=logs) as stack:
        stack.start_worker("--pool", "prefork", "--concurrency", "1", extra_env=env)
        stack.start_worker("--queues", WEBHOOK_QUEUE, extra_env=env)
        api.wait_ready()
        yield api, collector, receiver
        api.stop()
        for worker in stack.workers:  # every span is in: no need to wait out a warm shutdown
            worker.kill()
    receiver.shutdown()
    collector.stop()


def two_short_pages() -> bytes:
    """A PDF of two pages of one line each: quick to read on a busy machine."""
    pages = [render_page([f"Page {n} of a traced job"], size=(700, 160)) for n in (1, 2)]
    out = io.BytesIO()
    pages[0].save(out, format="PDF", save_all=True, append_images=pages[1:], resolution=100)
    return out.getvalue()


def test_a_job_is_one_trace_from_post_to_webhook(traced):
    api, collector, receiver = traced
    headers = {"Authorization": f"Bearer {KEY_A}"}
    response = httpx.post(f"{api.url}/jobs", headers=headers, files={"file": ("two.pdf", two_short_pages())},
                          data={"webhook_url": receiver.url + "/hook"}, timeout=30)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + 120
    while (job := httpx.get(f"{api.url}/jobs/{job_id}", headers=headers).json())["status"] not in (
            "succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    receiver.wait_for("/hook", 1, timeout=60)

    (root,) = [s for s in collector.wait_for(lambda s: s.name == "POST /jobs" and s.kind == SERVER)
               if s.name == "POST /jobs" and s.kind == SERVER and s.attributes.get("ocrq.job") == job_id]
    assert root.service == "ocrq-api" and root.parent_id is None and root.attributes["ocrq.tenant"] == "tenant-a"
    trace = whole_trace(collector, root.trace_id)
    # Parent links: every span's parent is in the trace, and every chain ends at POST /jobs.
    for span in trace.values():
        chain = span
        while chain.parent_id is not None:
            assert chain.parent_id in trace, f"{chain.name} ({chain.service}) has a parent outside the trace"
            chain = trace[chain.parent_id]
        assert chain is root

    def children(parent, name=None):
        return [s for s in trace.values() if s.parent_id == parent.span_id and name in (None, s.name)]

    def parent(span):
        return trace[span.parent_id]

    (prepare,) = [s for s in trace.values() if s.name == "run/ocrq.prepare_job"]
    assert prepare.service == "ocrq-worker" and prepare.kind == CONSUMER and prepare.attributes["ocrq.job"] == job_id
    assert parent(prepare).kind == PRODUCER and parent(prepare).service == "ocrq-api"
    pages = sorted((s for s in trace.values() if s.name == "run/ocrq.ocr_page"),
                   key=lambda s: s.attributes["ocrq.page"])
    assert [p.attributes["ocrq.page"] for p in pages] == [1, 2]
    for page in pages:
        assert parent(parent(page)) is prepare  # published by the prepare task
        assert {k: page.attributes[f"ocrq.{k}"] for k in ("job", "tenant", "lane", "attempt")} == {
            "job": job_id, "tenant": "tenant-a", "lane": "bulk", "attempt": 1}
        assert page.attributes["ocrq.bucket"]
        (render,), (engine,), (write,) = (children(page, name) for name in ("render", "engine.read", "write"))
        assert render.end_ns <= engine.start_ns and engine.end_ns <= write.start_ns
        assert engine.attributes["ocrq.engine"] == "cpu"
        # The page's write: its SQL statements, not only the pool's connect.
        assert any("db.statement" in s.attributes or "db.query.text" in s.attributes for s in children(write))
    (result,) = [s for s in trace.values() if s.name == "result.store"]
    assert parent(result) in pages and any(s.attributes.get("rpc.service") == "S3" for s in children(result))
    (send,) = [s for s in trace.values() if s.name == "webhook.send"]
    delivery = parent(send)
    assert delivery.name == "run/ocrq.deliver_webhook" and delivery.service == "ocrq-webhooks"
    assert parent(parent(delivery)) in pages  # published by the page task that ended the job
    assert send.attributes["ocrq.tenant"] == "tenant-a", [(s.name, s.attributes) for s in children(send)]


def whole_trace(collector: Collector, trace_id: str, *, timeout: float = 30) -> dict:
    """The trace's spans by id, once the webhook's run span is in and no span's parent is missing: each process
    exports in its own batches, a parent (which ends last) often after its children."""
    deadline = time.monotonic() + timeout
    while True:
        with collector.lock:
            trace = {s.span_id: s for s in collector.spans if s.trace_id == trace_id}
        names = {s.name for s in trace.values()}
        complete = all(s.parent_id is None or s.parent_id in trace for s in trace.values())
        if (complete and "run/ocrq.deliver_webhook" in names) or time.monotonic() > deadline:
            return trace
        time.sleep(0.1)
