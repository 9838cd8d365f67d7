"""A worker group killed while it holds a page's message unacked for later: a page deferred by the tenant cap, or
one waiting out an outage retry's countdown. Neither is running nor in the queue, and Redis keeps its message in
the "unacked" hash until the visibility timeout; the page must still start again within the minute."""

from __future__ import annotations

import json

import redis
from sqlalchemy import select

from common.jobs.models import Page
from common.orm import utcnow
from common.queue.leases import Lease
from tests.batches.support import word_image
from tests.conftest import KEY_A, make_settings
from tests.documents.hostile import pdf_of, text_page
from tests.support.stack import Stack, wait_for_job, wait_until
from worker.queue.liveness import SCHEDULER
from worker.run import ENGINE_LOADED

# A visibility timeout far past the test: only the worker's lease can bring its messages back in time.
TIMERS = {"heartbeat_interval_s": 0.5, "heartbeat_lapse_s": 4, "visibility_timeout_s": 900,
          "stale_requeue_after_s": 3, "sweep_interval_s": 2}
# The doomed worker holds its countdowns far longer than the test waits for the restart.
HOLD_S = "120"



def held_for_later(settings, page_id: str) -> bool:
    """Whether a worker holds `page_id`'s message unacked with an ETA (a countdown it waits out)."""
    client = redis.Redis.from_url(settings.broker_url)
    try:
        raws = client.hvals(f"{settings.broker_key_prefix}unacked")
    finally:
        client.close()
    messages = [json.loads(raw)[0] for raw in raws]
    return any(m["headers"].get("eta") and page_id in m["headers"].get("argsrepr", "") for m in messages)


def held_page_ids(settings) -> set[str]:
    """The first argument of every message in the unacked hash."""
    client = redis.Redis.from_url(settings.broker_url)
    try:
        raws = client.hvals(f"{settings.broker_key_prefix}unacked")
    finally:
        client.close()
    return {m["headers"].get("argsrepr", "") for m in (json.loads(raw)[0] for raw in raws)}


def pages_of(stack, job_ids: list[str]) -> dict[str, Page]:
    """The jobs' pages by page id."""
    with stack.services.db.session() as session:
        return {page.id: page for page in session.scalars(select(Page).where(Page.job_id.in_(job_ids)))}


def kill_and_restart(stack, doomed, *, job_ids: list[str], page_id: str) -> float:
    """Kill the doomed group while it holds `page_id` for later; seconds from the kill until the page starts."""
    client = stack.client(KEY_A)
    wait_until(lambda: held_for_later(stack.settings, page_id), timeout=60, what="the page held for later")
    stack.start_worker("--beat", "--concurrency", "2")  # the survivor: its queues are empty until the kill
    with stack.services.db.session() as session:  # a survivor that runs the schedule already, as a deployed one does
        wait_until(lambda: session.scalar(select(Lease.name).where(Lease.name.startswith(SCHEDULER))), timeout=60,
                   what="the survivor leading the schedule")
    assert held_for_later(stack.settings, page_id), "the doomed worker let go of the page before the kill"
    killed_at = utcnow()
    doomed.kill()
    for job_id in job_ids:
        assert wait_for_job(client, job_id, timeout=90)["status"] == "succeeded"
    pages = pages_of(stack, job_ids)
    # Read once: the stale copies in the unacked hash were dropped, not left to come back at the visibility timeout.
    # (The survivor acks its own just after the job ends.)
    wait_until(lambda: not any(page_id in args for args in held_page_ids(stack.settings) for page_id in pages),
               timeout=15, what="no copy of the pages left unacked")
    return (pages[page_id].started_at - killed_at).total_seconds()


def test_a_page_deferred_by_the_tenant_cap_starts_again_within_a_minute_of_its_worker_groups_kill(
        tmp_path, own_pg_url, redis_url, s3, record_property):
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3,
                             tenant_max_running_pages=1, **TIMERS)
    # One job of two pages, published together: each child takes one at once. As two one-page jobs, on a fast CPU
    # the first page was read before the second job was even split, and nothing was deferred.
    document = pdf_of([text_page(f"Page {n}: capped", size=(850, 1100), font_size=48) for n in (1, 2)],
                      tmp_path / "two.pdf").read_bytes()
    with Stack(settings, logs=tmp_path) as stack:
        client = stack.client(KEY_A)
        # Two pool children: the second finds its tenant at the cap and defers its page, a countdown it holds. Both
        # must have loaded their engine before the pages come, or one child reads both pages in turn (seen on a
        # busy machine: the other child was still loading when the first page, 0.2 s of work, ended).
        doomed = stack.start_worker("--concurrency", "2", extra_env={"OCRQ_TENANT_DEFER_S": HOLD_S})
        wait_until(lambda: doomed.log.read_text().count(ENGINE_LOADED) >= 2, timeout=60,
                   what="both pool children's engines")
        job_ids = [client.post("/jobs", files={"file": ("two.pdf", document)}, data={"output": "text"}).json()["id"]]

        def deferred() -> str | None:
            pages = pages_of(stack, job_ids)
            return next((p.id for p in pages.values() if held_for_later(settings, p.id) and p.attempts == 0), None)

        page_id = wait_until(deferred, timeout=60, what="a page deferred by the tenant cap")
        waited = kill_and_restart(stack, doomed, job_ids=job_ids, page_id=page_id)
        record_property("kill_to_restart_s", round(waited, 1))
        assert waited <= 60, waited
        # Never claimed before the kill: the survivor's claim only. (A second copy of its message, a sweeper's or the
        # countdown's, once reached the survivor too and claimed it again: job_states.claimable.)
        assert pages_of(stack, job_ids)[page_id].attempts == 1


def test_a_page_waiting_out_a_storage_outage_retry_starts_again_within_a_minute_of_its_workers_kill(
        tmp_path, own_pg_url, redis_url, s3, record_property):
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3, **TIMERS)
    with Stack(settings, logs=tmp_path) as stack:
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("outage.png", word_image("outage"))},
                             data={"output": "text"}).json()["id"]
        # This worker cannot reach storage: it renders nothing and puts the page back with a countdown it holds.
        doomed = stack.start_worker(extra_env={"OCRQ_S3_ENDPOINT_URL": "http://127.0.0.1:9",
                                               "OCRQ_ENGINE_OUTAGE_RETRY_S": HOLD_S})

        def held() -> str | None:
            (page,) = pages_of(stack, [job_id]).values()
            return page.id if held_for_later(settings, page.id) and page.status == "queued" else None

        page_id = wait_until(held, timeout=60, what="the page's outage retry")
        waited = kill_and_restart(stack, doomed, job_ids=[job_id], page_id=page_id)
        record_property("kill_to_restart_s", round(waited, 1))
        assert waited <= 60, waited
        # The outage retry was refunded: only the survivor's claim counts.
        assert pages_of(stack, [job_id])[page_id].attempts == 1
