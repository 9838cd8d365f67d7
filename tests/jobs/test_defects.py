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


@pytest.mark.parametrize("defect", ["render", "write"])
def test_a_defect_on_the_page_path_fails_the_page_at_once_with_its_reason(defect, tmp_path, pg_url, redis_url, s3):
    # The sweeper's waits are long next to the test's: a page left running would still be running at its end.
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, page_retries=2,
                             stale_requeue_after_s=600, task_soft_time_limit_s=300, task_time_limit_s=600,
                             visibility_timeout_s=700)
    png = io.BytesIO()
    text_page("Nine harbour lights", size=(600, 200), font_size=28).save(png, "PNG")
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker(module="tests.support.defective_worker", extra_env={"OCRQ_TEST_DEFECT": defect})
        client = stack.client(KEY_A)
        started = time.monotonic()
        job_id = client.post("/jobs", files={"file": ("lights.png", png.getvalue())}).json()["id"]
        job = wait_for_job(client, job_id, timeout=60)
        took = time.monotonic() - started
        with stack.services.db.session() as session:
            (row,) = session.scalars(select(Page).where(Page.job_id == job_id))
        pages = client.get(f"/jobs/{job_id}/pages").json()
    assert job["status"] == "failed", job
    attempts = 1 if defect == "write" else 3
    assert row.attempts == attempts, (row.attempts, row.error)
    assert row.error.startswith("internal_error: page 1 could not be read because of an unexpected error"), row.error
    assert "blew up" not in row.error and "/srv" not in row.error and "Defect" not in row.error
    assert "died" not in row.error
    assert str(pages).count("internal_error") == 1, pages
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
