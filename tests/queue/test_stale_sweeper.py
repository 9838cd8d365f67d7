"""A broker that loses its messages (Redis restarted without persistence) loses no job: the sweeper
republishes what the database still holds as queued, and only when its queue is empty."""

from __future__ import annotations

import time

import redis
from sqlalchemy import delete, select

from common.jobs import states
from common.jobs.models import Page
from common.queue import publish as dispatch
from common.queue.app import create_celery
from common.queue.depth import depths_of
from common.queue.leases import Lease
from common.queue.names import CONTROL_QUEUE, PREPARE_BULK_QUEUE, page_queue
from tests.batches.support import word_image
from tests.conftest import KEY_A, make_settings
from tests.support.stack import Stack, wait_for_job, wait_until
from worker.context import WorkerContext
from worker.jobs import stale
from worker.queue import liveness


def _lose_everything(settings) -> int:
    client = redis.Redis.from_url(settings.broker_url)
    keys = list(client.scan_iter(match=f"{settings.broker_key_prefix}*"))
    return client.delete(*keys) if keys else 0


def test_lost_prepare_and_page_messages_are_republished(tmp_path, own_pg_url, redis_url, s3, samples):
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3,
                             stale_requeue_after_s=1)
    ctx = WorkerContext(app=create_celery(settings), settings=settings)
    with Stack(settings, logs=tmp_path) as stack:
        client = stack.client(KEY_A)
        png = (samples / "typewriter.png").read_bytes()
        job_id = client.post("/jobs", files={"file": ("t.png", png)}).json()["id"]
        assert depths_of(settings, [PREPARE_BULK_QUEUE]) == {PREPARE_BULK_QUEUE: 1}
        assert _lose_everything(settings) > 0
        time.sleep(settings.stale_requeue_after_s + 0.2)  # past the age at which a queued job counts as lost
        assert stale.requeue_stale(ctx)["jobs"] == 1
        assert depths_of(settings, [PREPARE_BULK_QUEUE]) == {PREPARE_BULK_QUEUE: 1}
        assert stale.requeue_stale(ctx)["jobs"] == 0  # its message is back in the queue: no second copy

        # Split the job into pages, but read none of them, then lose the page message too.
        control = stack.start_worker("--queues", f"{CONTROL_QUEUE},{PREPARE_BULK_QUEUE}")
        deadline = time.monotonic() + 60
        while depths_of(settings, [page_queue("bulk")])[page_queue("bulk")] == 0:
            assert time.monotonic() < deadline, "the job was never split into pages"
            time.sleep(0.1)
        control.stop()
        _lose_everything(settings)
        time.sleep(settings.stale_requeue_after_s + 0.2)  # past the age at which a queued page counts as lost
        assert stale.requeue_stale(ctx)["pages"] == 1

        stack.start_worker()
        job = wait_for_job(client, job_id)
        assert job["status"] == "succeeded" and job["pages_done"] == 1
    ctx.close()


def test_an_upload_whose_prepare_died_after_starting_it_is_read(tmp_path, own_pg_url, redis_url, s3):
    """An upload's pages are committed with the job at submit; the prepare task that would publish them dies
    right after marking the job running. The sweeper must find those pages, never published, and send them."""
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3,
                             stale_requeue_after_s=1)
    ctx = WorkerContext(app=create_celery(settings), settings=settings)
    with Stack(settings, logs=tmp_path) as stack:
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("w.png", word_image("upload7"))}).json()["id"]
        _lose_everything(settings)
        with stack.services.db.session() as session:  # what prepare_job did before it died
            assert states.start_job(session, job_id=job_id)
        time.sleep(settings.stale_requeue_after_s + 0.2)  # past the age at which a queued page counts as lost
        assert stale.requeue_stale(ctx) == {"jobs": 0, "pages": 1, "closed": 0}
        stack.start_worker()
        job = wait_for_job(client, job_id)
        assert job["status"] == "succeeded" and "upload7" in client.get(f"/jobs/{job_id}/result").text
    ctx.close()


def test_pages_a_worker_holds_unacked_are_not_republished(tmp_path, own_pg_url, redis_url, s3, samples):
    """A GPU worker prefetches a batch and holds it until the batch fills or its wait ends: those pages are
    still `queued` in the database and their queue is empty, yet nothing is lost."""
    from tests.support.engine_server import MODEL, running_cpu_engine

    with running_cpu_engine() as engine:
        settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3,
                                 stale_requeue_after_s=1, engine="vllm", engine_urls=[engine.url],
                                 engine_model=MODEL, engine_pair_size=4, engine_batch_wait_s=8)
        ctx = WorkerContext(app=create_celery(settings), settings=settings)
        with Stack(settings, logs=tmp_path) as stack:
            stack.start_worker("--gpu", "--concurrency", "1")
            client = stack.client(KEY_A)
            png = (samples / "typewriter.png").read_bytes()
            job_id = client.post("/jobs", files={"file": ("t.png", png)}).json()["id"]
            deadline = time.monotonic() + 60
            while not any(args and args[0].startswith(job_id[:16]) for args in _held(settings)):
                assert time.monotonic() < deadline, "the GPU worker never took the page"
                time.sleep(0.2)
            # Held past the age at which a queued page would count as lost; held is not lost: no requeue.
            time.sleep(settings.stale_requeue_after_s + 0.2)
            body = client.get(f"/jobs/{job_id}").json()
            assert body["status"] == "running" and body["pages_done"] == 0, body
            assert stale.requeue_stale(ctx)["pages"] == 0
            job = wait_for_job(client, job_id, timeout=120)
        assert job["status"] == "succeeded", job
        assert len(engine.requests()) == 1


def test_a_page_held_by_a_dead_worker_is_republished_once_no_lease_names_it(tmp_path, own_pg_url, redis_url, s3):
    """A message a killed worker held for later (a countdown) stays in Redis's unacked hash until the visibility
    timeout. While a lease names it the sweeper leaves it (a lapsed lease's pages are recover_lapsed's); a message
    its worker took after its last beat is named by none: then the sweeper publishes the page again, whatever else
    waits in the queue, and drops the stale copy. No worker runs the lapsed-lease recovery here."""
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=s3,
                             stale_requeue_after_s=1, heartbeat_interval_s=0.5, heartbeat_lapse_s=2,
                             visibility_timeout_s=900)
    ctx = WorkerContext(app=create_celery(settings), settings=settings)
    with Stack(settings, logs=tmp_path) as stack:
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("w.png", word_image("held9"))}).json()["id"]
        _lose_everything(settings)  # its prepare message: the page goes out below, with a countdown
        with stack.services.db.session() as session:
            assert states.start_job(session, job_id=job_id)
            page_id = session.scalar(select(Page.id).where(Page.job_id == job_id))
        dispatch.publish_pages(ctx.app, page_ids=[page_id], lane="bulk", countdown=600)
        doomed = stack.start_worker()
        with stack.services.db.session() as session:
            wait_until(lambda: page_id in liveness.leased_pages(session), timeout=30, what="the page in a lease")
        assert stale.requeue_stale(ctx)["pages"] == 0  # held by a live worker
        doomed.kill()
        assert stale.requeue_stale(ctx)["pages"] == 0  # its lapsed lease is recover_lapsed's
        with stack.services.db.session() as session:  # as if taken after its last beat (and its lease taken back)
            session.execute(delete(Lease).where(Lease.name.startswith(liveness.WORKER_PREFIX)))
        # Another message waits in the page queue: the held page's is not among them, so it goes out all the same.
        dispatch.publish_pages(ctx.app, page_ids=["not-a-page"], lane="bulk")
        wait_until(lambda: stale.requeue_stale(ctx)["pages"] == 1, timeout=30, what="the held page republished")
        assert depths_of(settings, [page_queue("bulk")]) == {page_queue("bulk"): 2}
        assert not any(args[:1] == [page_id] for args in _held(settings))
    ctx.close()


def test_pages_sent_again_are_read_before_the_backlog(tmp_path, pg_url, redis_url, s3):
    """A page a dead worker held had waited through its queue once: sent again, it goes ahead of what waits."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3)
    app = create_celery(settings)
    dispatch.publish_pages(app, page_ids=["waiting-1", "waiting-2"], lane="bulk")
    dispatch.publish_pages(app, page_ids=["sent-again"], lane="bulk", ahead=True)
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(page_queue("bulk"), no_ack=True)
        order = [queue.get(timeout=5).headers["argsrepr"] for _ in range(3)]
        queue.close()
    assert order == ["['sent-again']", "['waiting-1']", "['waiting-2']"], order


def _held(settings) -> list[list]:
    from common.queue.depth import QueueDepths

    reader = QueueDepths(settings, known=())
    try:
        return reader.held_task_args()
    finally:
        reader.close()
