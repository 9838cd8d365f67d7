"""A defect on a page's path (an exception that is neither an outage, a bad document nor a time limit) fails the
page within seconds with a reason that says so, after its attempts are used at once; it never leaves the page
running until the sweeper finds it and then blames a dead worker."""

from __future__ import annotations

import io
import time

import pytest

from sqlalchemy import select

from common.db import Database
from common.jobs import states
from common.jobs.models import Job, Page
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import text_page
from tests.support.stack import Stack, wait_for_job


def test_a_defect_on_the_page_path_fails_the_page_at_once_with_its_reason(tmp_path, pg_url, redis_url, s3):
    # The sweeper's waits are long next to the test's: a page left running would still be running at its end.
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, page_retries=2,
                             stale_requeue_after_s=600, task_soft_time_limit_s=300, task_time_limit_s=600,
                             visibility_timeout_s=700)
    pages = [text_page(words, size=(600, 200), font_size=28) for words in ("Nine harbour lights", "Seven gulls")]
    pdf = io.BytesIO()
    pages[0].save(pdf, "PDF", save_all=True, append_images=pages[1:], resolution=100)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker(module="tests.support.defective_worker")
        client = stack.client(KEY_A)
        started = time.monotonic()
        job_id = client.post("/jobs", files={"file": ("lights.pdf", pdf.getvalue())}).json()["id"]
        job = wait_for_job(client, job_id, timeout=60)
        took = time.monotonic() - started
        with stack.services.db.session() as session:
            rows = list(session.scalars(select(Page).where(Page.job_id == job_id).order_by(Page.index)))
        listed = client.get(f"/jobs/{job_id}/pages").json()
    assert job["status"] == "failed", job
    # Page 1 does not render: read again at once, then failed. Page 2 is read, but its result cannot be written.
    assert [row.attempts for row in rows] == [3, 1], [(row.attempts, row.error) for row in rows]
    for row in rows:
        assert row.error.startswith(f"internal_error: page {row.index + 1} could not be read because of an "
                                    "unexpected error"), row.error
        assert "blew up" not in row.error and "/srv" not in row.error and "Defect" not in row.error
        assert "died" not in row.error
    assert str(listed).count("internal_error") == 2, listed
    # Retries at once (1 s, then 2 s of back-off), nowhere near the sweeper's 600 s.
    assert took < 45, took


def test_a_page_text_with_nul_and_lone_surrogates_is_stored(pg_url):
    db = Database(pg_url)
    with db.session() as session:
        job = Job(tenant_id="tenant-a", source_kind="upload", source_uri="upload://nul.png", status="running",
                  pages_total=1)
        session.add(job)
        session.flush()
        page = Page(job_id=job.id, index=0, status="running")
        session.add(page)
        session.flush()
        page_id = page.id
    blocks = [{"kind": "text", "lines": [{"text": "a\x00b\ud800", "words": []}]}]
    outcome = states.PageOutcome(text="one\x00two \udc65", blocks=blocks, engine="vllm", model="m", seconds=0.1,
                                 text_layer={"lines": [{"text": "x\x00y", "box": [0, 0, 1, 1]}]})
    with db.session() as session:
        assert states.finish_page(session, page_id=page_id, outcome=outcome)
    with db.session() as session:
        stored = session.get(Page, page_id)
        assert stored.status == "succeeded"
        assert stored.text == "onetwo \ufffd"
        assert stored.blocks[0]["lines"][0]["text"] == "ab\ufffd"
        assert stored.text_layer["lines"][0]["text"] == "xy"


def test_a_time_limit_or_an_outage_is_no_defect_even_inside_another_error():
    # rapidocr, which the line detector for searchable PDFs runs too, wraps the task's soft time limit in its own.
    from celery.exceptions import SoftTimeLimitExceeded
    from sqlalchemy.exc import OperationalError

    from worker.jobs.pipeline import _raise_unless_defect

    limit = SoftTimeLimitExceeded()
    try:
        try:
            raise limit
        except SoftTimeLimitExceeded as inner:
            raise RuntimeError("rapidocr failed") from inner
    except RuntimeError as wrapped:
        with pytest.raises(SoftTimeLimitExceeded) as raised:
            _raise_unless_defect(wrapped)
    assert raised.value is limit
    with pytest.raises(OperationalError):
        _raise_unless_defect(OperationalError("SELECT 1", {}, ConnectionError("refused")))
    _raise_unless_defect(RuntimeError("a defect"))  # returns: the caller fails the page with its reason
