"""A busy machine slows pages; it does not fail them: a page past its task's soft time limit is read again, and
fails with "timed out" (never "the engine failed") only once its attempts are spent. The limit fires inside
rapidocr, which wraps every exception it meets in its own."""

from __future__ import annotations

import io

from sqlalchemy import select

from common.jobs.models import Page
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import text_page
from tests.support.stack import Stack, wait_for_job


def test_a_page_past_its_soft_time_limit_inside_rapidocr_is_retried_then_fails_as_timed_out(
        tmp_path, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, page_retries=1,
                             task_soft_time_limit_s=1, task_time_limit_s=20)
    # A dense full page: rapidocr's detector and recogniser take seconds on it, so the limit fires inside them.
    page = text_page("Seventeen quiet lanterns hang above the harbour wall tonight.\n" * 40, size=(1190, 1540),
                     font_size=22)
    png = io.BytesIO()
    page.save(png, "PNG")
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker()
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("dense.png", png.getvalue())}).json()["id"]
        job = wait_for_job(client, job_id, timeout=90)
        with stack.services.db.session() as session:
            (row,) = session.scalars(select(Page).where(Page.job_id == job_id))
    assert job["status"] == "failed", job
    assert row.error == "timed out after 1 s" and row.attempts == 2, (row.error, row.attempts)
