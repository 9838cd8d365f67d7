"""The GPU path when things go wrong, with the project's OpenAI-compatible CPU engine standing in for vLLM: a page
long at the engine read once, a lost pool child's page read again at once, pages waiting out an engine outage or a
dead engine core without using their attempts, and a batch past its soft time limit failed with the reason.
Buckets, pairs and capacity retries: test_gpu_path.py."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from sqlalchemy import select

from common.jobs.models import Page
from common.queue.names import CONTROL_QUEUE
from tests.conftest import KEY_A, make_settings
from tests.support.engine_server import MODEL
from tests.support.gpu_pages import submit_page
from tests.support.servers import free_port
from tests.support.stack import Stack, children, wait_for_job, wait_until
from worker.engines import launcher as engine_launcher


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
        job_id = submit_page(client, "Once lattice")
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
        job_id = submit_page(client, "Killed quiver")
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
        job_id = submit_page(client, "Outage granite")
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
        job_id = submit_page(client, "Restart saffron")
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
        job_id = submit_page(client, "Stuck quiver")
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
