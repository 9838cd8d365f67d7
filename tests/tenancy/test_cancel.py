"""DELETE /jobs/{id}: pages not started never run, a running page finishes unseen, the job ends canceled."""

from __future__ import annotations

import time

from sqlalchemy import select

from common.jobs.models import Page
from tests.documents.hostile import text_pdf


def pages_of(stack, job_id: str) -> list[Page]:
    with stack.services.db.session() as session:
        return list(session.scalars(select(Page).where(Page.job_id == job_id).order_by(Page.index)))


def wait_until(predicate, *, timeout: float = 90, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def cancel_while_a_page_runs(stack, client, pdf: bytes) -> tuple[str, set[int]]:
    """Submit, cancel while a page runs; returns the job and the pages still running just after the cancel."""
    for _ in range(3):  # the running page may finish between seeing it and canceling: then try a new job
        # ocr=always: these pages have a text layer, which would be read at once and never run as pages.
        job_id = client.post("/jobs", files={"file": ("four.pdf", pdf)}, data={"ocr": "always"}).json()["id"]
        wait_until(lambda: any(p.status == "running" for p in pages_of(stack, job_id)), what="a page runs")
        canceled = client.delete(f"/jobs/{job_id}")
        assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
        running = {p.index for p in pages_of(stack, job_id) if p.status == "running"}
        if running:
            return job_id, running
    raise AssertionError("no page was still running when the job was canceled, three times")


def test_cancel_stops_pages_not_started_and_drops_the_running_ones_result(tenancy_stack, tenant_b, tmp_path):
    # The tenancy stack runs one page per tenant at a time, so while one page runs the others wait.
    pdf = text_pdf(tmp_path / "four.pdf", [f"Page {n} of a job that is canceled midway." for n in range(1, 5)])
    job_id, running = cancel_while_a_page_runs(tenancy_stack, tenant_b, pdf.read_bytes())
    wait_until(lambda: not any(p.status == "running" for p in pages_of(tenancy_stack, job_id)),
               what="the running page finishes")
    time.sleep(tenancy_stack.settings.tenant_defer_s * 2 + 1)  # let deferred deliveries of the other pages arrive

    pages = {p.index: p for p in pages_of(tenancy_stack, job_id)}
    assert all(pages[i].status == "succeeded" for i in running)  # finished, but nobody will see it
    dropped = [p for p in pages.values() if p.status == "canceled"]
    assert dropped and all(p.started_at is None and p.attempts == 0 for p in dropped)
    assert {p.status for p in pages.values()} <= {"succeeded", "canceled"}

    job = tenant_b.get(f"/jobs/{job_id}").json()
    assert job["status"] == "canceled" and job["links"]["download"] is None
    result = tenant_b.get(f"/jobs/{job_id}/result")
    assert result.status_code == 409 and result.json()["status"] == "canceled"
    assert tenant_b.delete(f"/jobs/{job_id}").json()["status"] == "canceled"  # a second cancel changes nothing
