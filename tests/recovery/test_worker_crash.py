"""Workers killed at the worst moments: the job's event still goes out once."""

from __future__ import annotations

import json
import socket
import uuid
from contextlib import contextmanager

import pytest
from sqlalchemy import select

from common.jobs.models import Page
from common.orm import utcnow
from common.queue.depth import QueueDepths, depths_of
from common.queue.leases import Lease
from common.queue.names import (
    CONTROL_QUEUE,
    PREPARE_BULK_QUEUE,
    SWEEP_WEBHOOKS,
    WEBHOOK_QUEUE,
    cpu_worker_queues,
    page_queue,
)
from common.webhooks.models import WebhookDelivery
from tests.batches.support import word_image
from tests.conftest import KEY_A, make_settings
from tests.support import webhook_receiver
from tests.support.stack import Stack, beat_period, task_results, wait_for_job, wait_for_task_runs, wait_until

TIMERS = {"stale_requeue_after_s": 3, "sweep_interval_s": 2, "webhook_retry_schedule_s": [0, 0.5, 1]}


@pytest.fixture(scope="module")
def crash_stack(tmp_path_factory, module_pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("wcrash-home"), pg_url=module_pg_url, redis_url=redis_url,
                             s3=s3, **TIMERS)
    with Stack(settings, logs=tmp_path_factory.mktemp("wcrash-logs")) as stack:
        yield stack


@pytest.fixture(scope="module")
def receiver(crash_stack):
    server = webhook_receiver.start()
    server.secrets = [crash_stack.client(KEY_A).get("/webhooks/secret").json()["secret"]]
    yield server
    server.shutdown()
    server.server_close()



def test_worker_killed_between_a_jobs_last_page_and_its_event_delivers_it_once(crash_stack, receiver):
    stack, client, path = crash_stack, crash_stack.client(KEY_A), f"/hook/{uuid.uuid4().hex[:8]}"
    # This worker's pool child kills itself right after the commit that ends a job, before anything is published.
    doomed = stack.start_worker(extra_env={"OCRQ_FAULT_POINT": "after_job_final"})
    job_id = client.post("/jobs", files={"file": ("last.png", word_image("lastpage"))},
                         data={"output": "text", "webhook_url": receiver.plan(path)}).json()["id"]
    assert wait_for_job(client, job_id, timeout=60)["status"] == "succeeded"
    wait_until(lambda: b"fault point reached" in doomed.log.read_bytes(), timeout=20, what="the crash")
    doomed.stop()
    with stack.services.db.session() as session:
        (pending,) = session.scalars(select(WebhookDelivery).where(WebhookDelivery.job_id == job_id)).all()
    assert pending.status == "pending" and pending.event_type == "job.succeeded"
    assert receiver.to(path) == []

    survivor = stack.start_worker("--beat", "--queues", ",".join([*cpu_worker_queues(), WEBHOOK_QUEUE]))
    try:
        (received,) = wait_until(lambda: receiver.to(path), timeout=30, what="the event")
        # A second copy would come from the webhook sweep: wait for its next run, which must find nothing to send.
        swept = len(task_results(survivor, SWEEP_WEBHOOKS))
        later = wait_for_task_runs(survivor, SWEEP_WEBHOOKS, after=swept,
                                   timeout=beat_period(stack.settings, "sweep-webhooks") + 20)
        assert later == ["0"] * len(later), later
    finally:
        survivor.stop()
    assert len(receiver.to(path)) == 1
    assert json.loads(received.body)["data"]["id"] == job_id
    with stack.services.db.session() as session:
        statuses = list(session.scalars(select(WebhookDelivery.status).where(WebhookDelivery.job_id == job_id)))
    assert statuses == ["delivered"]


def test_a_killed_workers_running_and_prefetched_pages_are_read_again_within_a_minute(tmp_path_factory, own_pg_url,
                                                                                      redis_url, s3, record_property):
    # A visibility timeout far past the test: only the heartbeat's lapse can bring the pages back in time.
    # Its own database: the workers run the sweepers, which would otherwise pick up other tests' leftovers.
    settings = make_settings(home=tmp_path_factory.mktemp("hb-home"), pg_url=own_pg_url, redis_url=redis_url, s3=s3,
                             heartbeat_interval_s=1, heartbeat_lapse_s=6, visibility_timeout_s=900, **TIMERS)
    with Stack(settings, logs=tmp_path_factory.mktemp("hb-logs")) as stack, black_hole() as store:
        client, db = stack.client(KEY_A), stack.services.db
        jobs = [client.post("/jobs", files={"file": (f"hb{n}.png", word_image(f"beat{n}"))},
                            data={"output": "text"}).json()["id"] for n in range(3)]
        # All three pages queued before the doomed worker starts, so it takes two at once: were the jobs split while
        # it read, it would hold one page at a time (seen on a loaded machine).
        splitter = stack.start_worker("--queues", f"{CONTROL_QUEUE},{PREPARE_BULK_QUEUE}")
        wait_until(lambda: depths_of(settings, [page_queue("bulk")])[page_queue("bulk")] == len(jobs)
                   and not held_messages(settings), timeout=60, what="the three pages queued and the splitter idle")
        splitter.stop()
        # Both run the schedule; the doomed one holds 2 messages (1 running, 1 prefetched), the survivor the third.
        # The doomed one's storage never answers, so its running page stays running, however fast the machine. The
        # survivor's two processes take both at once: what the test times is the recovery, not the survivor's reads
        # (with four held pages and one process, the last started 63-65 s after the kill at load 5 to 23).
        doomed = stack.start_worker("--beat", extra_env={"OCRQ_WORKER_PREFETCH_MULTIPLIER": "2",
                                                         "OCRQ_S3_ENDPOINT_URL": store})
        stack.start_worker("--beat", "--concurrency", "2")

        def doomed_holds() -> tuple[Lease, set[str]] | None:
            with db.session() as session:
                lease = session.scalar(select(Lease).where(Lease.holder.endswith(f"pid {doomed.process.pid}")))
                running = set(session.scalars(select(Page.id).where(
                    Page.job_id.in_(jobs), Page.status == "running", Page.claimed_by == (lease and lease.name))))
            return (lease, running) if lease and running and len(lease.pages or []) >= 2 else None

        lease, running = wait_until(doomed_holds, timeout=60, what="the doomed worker holding 2 pages")
        killed_at = utcnow()
        doomed.kill()
        for job_id in jobs:
            assert wait_for_job(client, job_id, timeout=90)["status"] == "succeeded"
        with db.session() as session:
            pages = {p.id: p for p in session.scalars(select(Page).where(Page.job_id.in_(jobs)))}
    held = set(lease.pages)
    assert running <= held and held - running, (running, held)
    waited = {page_id: (pages[page_id].started_at - killed_at).total_seconds() for page_id in held}
    record_property("kill_to_restart_s", round(max(waited.values()), 1))
    assert max(waited.values()) <= 60, waited
    # Every read is a claim: the running page was read once more, every other page once.
    assert {p.id: p.attempts for p in pages.values()} == {p: 2 if p in running else 1 for p in pages}


def held_messages(settings) -> list:
    """The messages workers hold unacked (a prepare task the splitter has not acked would be given to the next)."""
    reader = QueueDepths(settings, known=())
    try:
        return reader.held()
    finally:
        reader.close()


@contextmanager
def black_hole():
    """An S3 endpoint URL on loopback that takes connections and never answers them."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
