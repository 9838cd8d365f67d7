"""The GPU path through the queue, with the project's OpenAI-compatible CPU engine standing in for vLLM:
size-bucketed queues, same-size batches of the profile's pair size, and batch-1 retries after 503 or OOM."""

from __future__ import annotations

import io
import json
import os
import signal
import time

import pytest
from sqlalchemy import select

from common.jobs.models import Page
from common.queue import buckets
from common.queue.names import CONTROL_QUEUE
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import pdf_of, text_page
from tests.support.engine_server import MODEL
from tests.support.servers import free_port
from tests.support.stack import Stack, children, wait_for_job, wait_until
from worker.engines import launcher as engine_launcher

WORDS = ["granite", "saffron", "lattice", "quiver"]


@pytest.fixture()
def gpu_stack(tmp_path, pg_url, redis_url, s3, server):
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=2,
                             engine_backoff_s=0.2, engine_layout=False)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        yield stack, server


def _document(tmp_path):
    # Two Letter pages and two wide receipts: PDF pages render to 1540 px, so the aspect ratio sets the bucket.
    pages = [text_page(f"Page {i + 1} {w}", size=(850, 1100) if i < 2 else (600, 300), font_size=48)
             for i, w in enumerate(WORDS)]
    return pdf_of(pages, tmp_path / "mixed.pdf").read_bytes()


def _read(stack, client, tmp_path):
    job_id = client.post("/jobs", files={"file": ("mixed.pdf", _document(tmp_path))}).json()["id"]
    job = wait_for_job(client, job_id, timeout=180)
    assert job["status"] == "succeeded", job
    pages = client.get(f"/jobs/{job_id}/result", params={"format": "json"}).json()["pages"]
    assert [p["page"] for p in pages] == [1, 2, 3, 4]
    for page, word in zip(pages, WORDS, strict=True):
        assert word in page["text"] and page["engine"] == "vllm" and page["model"] == MODEL
        # The detector is off (the default): the markdown's blocks, boxes estimated, confidence from logprobs.
        assert page["rotation"] == 0 and 0 < page["confidence"] <= 1
        assert page["blocks"] and all(block["box_estimated"] for block in page["blocks"])
        words = [w for block in page["blocks"] for line in block["lines"] for w in line["words"]]
        assert word in [w["text"] for w in words] and all(0 < w["confidence"] <= 1 for w in words)
    with stack.services.db.session() as session:
        return job_id, list(session.scalars(select(Page).where(Page.job_id == job_id).order_by(Page.index)))


def test_pages_are_bucketed_by_size_and_sent_in_pairs(gpu_stack, tmp_path):
    stack, engine = gpu_stack
    _, pages = _read(stack, stack.client(KEY_A), tmp_path)
    assert [buckets.bucket_of(p.width, p.height) for p in pages] == ["t3025", "t3025", "t2048", "t2048"]
    requests = engine.requests()
    assert len(requests) == 4
    # Each pair of a bucket reaches the engine together: the two requests overlap in time.
    pairs = [requests[0:2], requests[2:4]]
    for first, second in pairs:
        assert second["start"] < first["end"], requests


@pytest.mark.parametrize("fault", ["503", "oom"])
def test_capacity_errors_are_retried_alone(gpu_stack, tmp_path, fault):
    stack, engine = gpu_stack
    engine.faults(fault, count=2)
    _, pages = _read(stack, stack.client(KEY_A), tmp_path)
    assert all(p.status == "succeeded" for p in pages)
    statuses = [r["status"] for r in engine.requests()]
    assert statuses.count(200) == 4 and len(statuses) == 6, statuses


def test_a_threads_worker_has_each_of_its_pages_at_the_engine_at_once(tmp_path, pg_url, redis_url, s3, server):
    """--pool threads: one process, one engine client; its cap on requests in flight (2 here) must not hold the
    worker's other threads back, or the engine would see 2 pages where the worker was sized for 4."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=1,
                             engine_max_in_flight=2)
    server.faults("delay", count=4, delay_s=4)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--pool", "threads", "--concurrency", "4")
        client = stack.client(KEY_A)
        ids = _submit_words(client, "Thread")
        jobs = [wait_for_job(client, job_id, timeout=120) for job_id in ids]
    assert [job["status"] for job in jobs] == ["succeeded"] * 4, jobs
    assert server.max_in_flight() == 4, server.requests()


def test_workers_that_send_pages_alone_hold_no_page_they_have_no_thread_for(tmp_path, pg_url, redis_url, s3,
                                                                            server):
    """Two threads workers of two threads, each page sent alone: the first one busy with two pages leaves the other
    two queued for the second. Prefetching a pair of every bucket per thread, the first took all four and two
    waited for its busy threads while the second worker had nothing."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=1)
    server.faults("delay", count=4, delay_s=15)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--pool", "threads", "--concurrency", "2")
        client = stack.client(KEY_A)
        ids = _submit_words(client, "Alone")
        wait_until(lambda: len(server.requests()) >= 2, timeout=60, what="the first worker's two pages at the engine")
        time.sleep(1)  # time for the first worker to take any page it would hold
        stack.start_worker("--gpu", "--pool", "threads", "--concurrency", "2")
        jobs = [wait_for_job(client, job_id, timeout=120) for job_id in ids]
    assert [job["status"] for job in jobs] == ["succeeded"] * 4, jobs
    assert server.max_in_flight() == 4, server.requests()


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_page_at_the_engine_for_many_heartbeats_is_read_once(tmp_path, own_pg_url, redis_url, s3, server, pool):
    """A batch handed to the pool is still the worker's: its heartbeat lists it, so the scheduler, looking every
    second here, never takes a page the engine is still reading for an orphan and has a second process read it."""
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=1,
                             heartbeat_interval_s=1, heartbeat_lapse_s=12)
    server.faults("delay", count=2, delay_s=12)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--pool", pool, "--concurrency", "2", "--beat")
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("page.png", _png(text_page("Once lattice", size=(900, 300),
                                                                                   font_size=48)))}).json()["id"]
        job = wait_for_job(client, job_id, timeout=90)
        with stack.services.db.session() as session:
            (page,) = session.scalars(select(Page).where(Page.job_id == job_id))
    assert job["status"] == "succeeded", job
    assert page.attempts == 1 and len(server.requests()) == 1, server.requests()


def test_a_pool_child_killed_with_its_batch_at_the_engine_has_the_page_read_again_within_seconds(
        tmp_path, own_pg_url, redis_url, s3, server):
    """Once the child running a batch is lost, the worker no longer lists the batch's pages, so the sweeper puts
    them back at once: not after the broker's visibility timeout (an hour here)."""
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=1,
                             heartbeat_interval_s=1, heartbeat_lapse_s=3, visibility_timeout_s=3600)
    server.faults("delay", count=1, delay_s=20)
    with Stack(settings, logs=tmp_path) as stack:
        worker = stack.start_worker("--gpu", "--concurrency", "1")
        stack.start_worker("--queues", CONTROL_QUEUE, "--concurrency", "1", "--beat")  # the sweepers, apart
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("page.png", _png(text_page("Killed quiver", size=(900, 300),
                                                                                   font_size=48)))}).json()["id"]
        wait_until(lambda: server.requests(), timeout=60, what="the page at the engine")
        (child,) = children(worker.process.pid)
        os.kill(child, signal.SIGKILL)
        killed = time.monotonic()
        job = wait_for_job(client, job_id, timeout=60)
        with stack.services.db.session() as session:
            (page,) = session.scalars(select(Page).where(Page.job_id == job_id))
    assert job["status"] == "succeeded", job
    # Read again before the stalled first request would even have ended.
    assert time.monotonic() - killed < 20 and page.attempts == 2, (time.monotonic() - killed, page.attempts)


def test_pages_wait_for_an_engine_that_is_down_without_using_their_attempts(tmp_path, pg_url, redis_url, s3):
    """An engine restarting (or its weight holder lost) must not fail pages: they wait, then are read."""
    port = free_port()
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[f"http://127.0.0.1:{port}"], engine_model=MODEL, engine_pair_size=1,
                             engine_retries=1, engine_backoff_s=0.1, engine_outage_retry_s=1.0, page_retries=1)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        client = stack.client(KEY_A)
        image = text_page("Outage granite", size=(900, 300), font_size=48)
        job_id = client.post("/jobs", files={"file": ("page.png", _png(image))}).json()["id"]
        # Three tries at the page, each claim stamping its started_at: with attempts counted, page_retries=1
        # would have failed the job at the second. Between tries the page is queued with its attempt given back.
        tries, most_attempts = _wait_for_tries(stack, job_id, count=3, timeout=60)
        assert most_attempts <= 1, (most_attempts, tries)
        assert client.get(f"/jobs/{job_id}").json()["status"] in ("queued", "running")
        (spec,) = engine_launcher.plan_cpu(served_model_name=MODEL, port=port)
        engine = engine_launcher.start(spec)
        try:
            assert engine_launcher.wait_ready(engine, timeout_s=60)
            job = wait_for_job(client, job_id, timeout=120)
        finally:
            engine_launcher.stop_engine(engine, grace_s=10)
    assert job["status"] == "succeeded", job
    assert "granite" in client.get(f"/jobs/{job_id}/result", params={"format": "text"}).text


def test_pages_in_flight_when_an_engine_core_dies_are_read_again(tmp_path, pg_url, redis_url, s3, server):
    """vLLM answers 500 "EngineCore encountered an issue" to requests in flight when its engine dies (a killed
    weight holder): the page goes back to the queue without using an attempt, and is read after the restart."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=1, engine_retries=0,
                             engine_outage_retry_s=0.5, page_retries=0)
    server.faults("dead", count=2)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        client = stack.client(KEY_A)
        image = text_page("Restart saffron", size=(900, 300), font_size=48)
        job_id = client.post("/jobs", files={"file": ("page.png", _png(image))}).json()["id"]
        job = wait_for_job(client, job_id, timeout=120)
        assert job["status"] == "succeeded", job
        with stack.services.db.session() as session:
            (page,) = session.scalars(select(Page).where(Page.job_id == job_id))
            assert page.attempts == 1
    assert [r["status"] for r in server.requests()] == [500, 500, 200]


def test_a_batch_past_its_soft_time_limit_fails_its_pages_with_the_reason(tmp_path, pg_url, redis_url, s3,
                                                                           server):
    """With no retries left, as for a single page task: not left `running` until the sweeper's dead-page
    threshold."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=1, page_retries=0,
                             engine_timeout_s=60, task_soft_time_limit_s=2, task_time_limit_s=8)
    server.faults("delay", count=1, delay_s=15)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        client = stack.client(KEY_A)
        image = text_page("Stuck quiver", size=(900, 300), font_size=48)
        job_id = client.post("/jobs", files={"file": ("page.png", _png(image))}).json()["id"]
        started = time.monotonic()
        job = wait_for_job(client, job_id, timeout=60)
        elapsed = time.monotonic() - started
    assert job["status"] == "failed", job
    assert "timed out after 2" in json.dumps(job), job
    assert elapsed < 14, f"the page waited for the engine ({elapsed:.1f} s), not for its time limit"


def _wait_for_tries(stack, job_id: str, *, count: int, timeout: float) -> tuple[list[tuple], int]:
    """Poll the job's one page until `count` claims of it were seen (each sets a new started_at); fail at once
    if the page ends meanwhile. Returns (started_at, status, attempts) where each claim was first seen, and
    the most attempts any poll saw."""
    seen: dict = {}
    most_attempts = 0
    deadline = time.monotonic() + timeout
    while len(seen) < count:
        with stack.services.db.session() as session:
            page = session.scalar(select(Page).where(Page.job_id == job_id))
        if page is not None:
            assert page.status in ("queued", "running"), (page.status, page.attempts, page.error)
            most_attempts = max(most_attempts, page.attempts)
            if page.started_at is not None:
                seen.setdefault(page.started_at, (page.started_at, page.status, page.attempts))
        assert time.monotonic() < deadline, f"{len(seen)} tries at the page within {timeout}s, not {count}"
        time.sleep(0.1)
    return list(seen.values()), most_attempts


def _submit_words(client, label: str) -> list[str]:
    """One single-page job a word of WORDS, each page reading `label word`."""
    return [client.post("/jobs", files={"file": ("page.png", _png(text_page(f"{label} {w}", size=(900, 300),
                                                                           font_size=48)))}).json()["id"]
            for w in WORDS]


def _png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()
