"""No job is lost or duplicated when workers die: mid-page, or after writing a result but before the ack."""

from __future__ import annotations

import time
from datetime import UTC

import pytest
from sqlalchemy import select

from common.jobs.models import Job, Page
from common.orm import utcnow
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import pdf_of, text_page
from tests.support.stack import Stack, wait_for_job

WORDS = ["harbour lantern", "copper meadow", "violet engine"]


@pytest.fixture()
def fragile(tmp_path, pg_url, redis_url, s3):
    """A stack with short limits, so a dead worker's message comes back within seconds."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3,
                             task_soft_time_limit_s=20, task_time_limit_s=25, visibility_timeout_s=30)
    with Stack(settings, logs=tmp_path) as stack:
        yield stack


def _document(tmp_path):
    return pdf_of([text_page(f"Page {i + 1}: {w}", size=(850, 1100), font_size=48) for i, w in enumerate(WORDS)],
                  tmp_path / "three.pdf").read_bytes()


def _pages(stack, job_id):
    with stack.services.db.session() as session:
        return list(session.scalars(select(Page).where(Page.job_id == job_id).order_by(Page.index)))


def _assert_read_once(stack, client, job_id):
    job = wait_for_job(client, job_id, timeout=180)
    assert job["status"] == "succeeded", job
    assert (job["pages_total"], job["pages_done"], job["pages_failed"]) == (3, 3, 0)
    pages = _pages(stack, job_id)
    assert [p.index for p in pages] == [0, 1, 2]
    assert all(p.status == "succeeded" for p in pages)
    markdown = client.get(f"/jobs/{job_id}/result").text
    positions = [markdown.find(w) for w in WORDS]
    assert all(pos >= 0 for pos in positions) and positions == sorted(positions), markdown
    with stack.services.db.session() as session:
        assert session.scalar(select(Job.status).where(Job.id == job_id)) == "succeeded"
    return pages


def test_worker_killed_mid_page_loses_nothing(fragile, tmp_path):
    client = fragile.client(KEY_A)
    first = fragile.start_worker("--concurrency", "1")
    job_id = client.post("/jobs", files={"file": ("three.pdf", _document(tmp_path))}).json()["id"]
    deadline = time.monotonic() + 60
    while not any(p.status == "running" for p in _pages(fragile, job_id)):
        assert time.monotonic() < deadline, "no page started"
        time.sleep(0.02)
    first.kill()
    killed_at = utcnow()
    running = [p for p in _pages(fragile, job_id) if p.status == "running"]
    assert running, "the kill came after the page finished; the test proved nothing"

    fragile.start_worker("--concurrency", "1")
    pages = _assert_read_once(fragile, client, job_id)
    again = pages[running[0].index]
    assert again.attempts == 2  # redelivered once, written once
    # Redis gives the message back once its visibility timeout has passed, at the next scan for such messages
    # (every 5 s; kombu's default was every 100 s). No sweeper runs here.
    started = again.started_at if again.started_at.tzinfo else again.started_at.replace(tzinfo=UTC)
    waited = (started - killed_at).total_seconds()
    assert waited < fragile.settings.visibility_timeout_s + 25, waited


def test_worker_dying_between_result_and_ack_writes_once(fragile, tmp_path):
    client = fragile.client(KEY_A)
    mark = tmp_path / "crashed"
    worker = fragile.start_worker("--concurrency", "1", module="tests.support.crashing_worker",
                                  extra_env={"OCRQ_TEST_CRASH_MARK": str(mark)})
    job_id = client.post("/jobs", files={"file": ("three.pdf", _document(tmp_path))}).json()["id"]
    pages = _assert_read_once(fragile, client, job_id)
    assert mark.exists(), "the child never crashed after a write"
    assert [p.attempts for p in pages] == [1, 1, 1]  # the redelivered message found its page done
    log = worker.log.read_text()
    assert "WorkerLostError" in log or "exited prematurely" in log
    assert log.count("ocrq.ocr_page[") > 3
