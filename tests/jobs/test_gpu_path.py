"""The GPU path through the queue, with the project's OpenAI-compatible CPU engine standing in for vLLM:
size-bucketed queues, same-size batches of the profile's pair size, batch-1 retries after 503 or OOM, and how
threads workers hold pages. Lost children, engine outages and time limits: test_gpu_path_recovery.py."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from common.jobs.models import Page
from common.queue import buckets
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import pdf_of, text_page
from tests.support.engine_server import MODEL
from tests.support.gpu_pages import submit_page
from tests.support.stack import Stack, wait_for_job, wait_until

WORDS = ["granite", "saffron", "lattice", "quiver"]


@pytest.fixture(scope="module")
def module_gpu_stack(tmp_path_factory, pg_url, redis_url, s3, cpu_engine_server):
    """One stack and worker for the module's tests of pairs and retries: each test's job is its own, and `server`
    gives each an engine with no fault armed and an empty request log."""
    logs = tmp_path_factory.mktemp("gpu-stack")
    settings = make_settings(home=logs / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[cpu_engine_server.url], engine_model=MODEL, engine_pair_size=2,
                             engine_backoff_s=0.2, engine_layout=False)
    with Stack(settings, logs=logs) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        yield stack


@pytest.fixture()
def gpu_stack(module_gpu_stack, server):
    return module_gpu_stack, server


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
    # The engine client retried the two refused pages alone, after their shared batch: the page task never had
    # to (a second attempt would have claimed the page again).
    assert [p.attempts for p in pages] == [1, 1, 1, 1], [p.attempts for p in pages]


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


def _submit_words(client, label: str) -> list[str]:
    """One single-page job a word of WORDS, each page reading `label word`."""
    return [submit_page(client, f"{label} {w}") for w in WORDS]
