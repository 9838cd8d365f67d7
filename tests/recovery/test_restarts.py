"""Restarts the outage tests do not cover: SeaweedFS (S3) restarted mid-run, and Redis restarted keeping its
data, each on a private server that the test itself restarts; every job submitted around it finishes. And S3
answering 500 InternalError, as SeaweedFS did once while it came back: wherever a document is read (a page, a
submitted s3_uri, a PDF built on demand or as a job ends), that is an outage, never a missing document."""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import func, select

from common.batches.models import BatchItem
from common.jobs import states as job_states
from common.jobs.models import Job, Page
from common.queue.app import create_celery
from tests.batches.support import word_for, word_image
from tests.conftest import BUCKET, KEY_A, USER_BUCKET, make_settings
from tests.recovery.test_outages import TIMERS, finished, run_through, submit
from tests.support import seaweed
from tests.support.s3_busy import BusyS3Proxy
from tests.support.servers import RedisServer
from tests.support.stack import Stack, wait_until
from worker.batches import listing as batch_listing
from worker.batches import sweeper as batch_sweep
from worker.context import WorkerContext
from worker.jobs import pipeline
from worker.jobs.ending import close_job_if_done


@pytest.fixture(scope="module")
def own_s3(tmp_path_factory):
    server = seaweed.start(tmp_path_factory.mktemp("restart-seaweed"))
    for bucket in (BUCKET, USER_BUCKET):
        server.client().create_bucket(Bucket=bucket)
    yield server
    server.stop()


@pytest.fixture()
def busy_s3(tmp_path, own_pg_url, redis_url, own_s3):
    """A Stack (no worker) whose API reaches S3 through a proxy that answers InternalError while armed."""
    proxy = BusyS3Proxy(own_s3.endpoint)
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=own_s3,
                             batch_stale_after_s=1, **TIMERS)
    settings = settings.model_copy(update={"s3_endpoint_url": proxy.endpoint})
    try:
        with Stack(settings, logs=tmp_path) as stack:
            yield stack, proxy
    finally:
        proxy.close()


def failed_pages(stack) -> int:
    with stack.services.db.session() as session:
        return session.scalar(select(func.count()).where(Page.status == "failed"))


def test_s3_restarted_mid_run_every_job_finishes_and_no_page_fails(tmp_path_factory, own_pg_url, redis_url,
                                                                    own_s3):
    settings = make_settings(home=tmp_path_factory.mktemp("s3-restart-home"), pg_url=own_pg_url, redis_url=redis_url,
                             s3=own_s3, **TIMERS)
    with Stack(settings, logs=tmp_path_factory.mktemp("s3-restart-logs")) as stack:
        stack.start_worker("--beat")
        statuses = run_through(stack, lambda: own_s3.restart(down_s=5), jobs=6)
        assert failed_pages(stack) == 0
    assert 503 in statuses, "no upload landed in the outage"


def test_s3_answering_internal_error_puts_the_page_back_and_never_fails_it(tmp_path, own_pg_url, redis_url, own_s3):
    # Seen in a fresh-clone run of the restart test above: reading a job's source during the restart got S3's
    # InternalError, which became ObjectMissing, and the page failed as if its source were gone.
    proxy = BusyS3Proxy(own_s3.endpoint)
    settings = make_settings(home=tmp_path / "home", pg_url=own_pg_url, redis_url=redis_url, s3=own_s3, **TIMERS)
    try:
        with Stack(settings, logs=tmp_path) as stack:
            stack.start_worker("--beat", extra_env={"OCRQ_S3_ENDPOINT_URL": proxy.endpoint})
            client = stack.client(KEY_A)
            proxy.busy_for(15)  # longer than boto's own five attempts at one read
            jobs = submit_jobs(client, 300, 2)
            assert_all_read(stack, jobs)
            assert failed_pages(stack) == 0
    finally:
        proxy.close()
    assert proxy.busy_answers > 5, proxy.busy_answers


def submit_jobs(client, first: int, count: int) -> dict[str, str]:
    jobs = {}
    for n in range(first, first + count):
        response = submit(client, word_for(n))
        assert response.status_code == 202, response.text
        jobs[response.json()["id"]] = word_for(n)
    return jobs


def assert_all_read(stack, jobs: dict[str, str]) -> None:
    client = stack.client(KEY_A)
    for job_id, word in jobs.items():
        body = wait_until(lambda job_id=job_id: finished(client, job_id), timeout=90, what=f"job {job_id} finished")
        assert body["status"] == "succeeded", body
        assert word in client.get(f"/jobs/{job_id}/result").text


def test_redis_restarted_keeping_its_data_loses_nothing(tmp_path_factory, own_pg_url, s3):
    # The stale-work sweeper waits far past the test, so it cannot make up for a lost message: what was queued
    # before the restart must come out of Redis's own snapshot (SHUTDOWN SAVE, started again on its folder).
    timers = TIMERS | {"stale_requeue_after_s": 600, "heartbeat_interval_s": 1, "heartbeat_lapse_s": 6}
    with RedisServer() as rd:
        settings = make_settings(home=tmp_path_factory.mktemp("redis-keep-home"), pg_url=own_pg_url, redis_url=rd.url,
                                 s3=s3, **timers)
        with Stack(settings, logs=tmp_path_factory.mktemp("redis-keep-logs")) as stack:
            client = stack.client(KEY_A)
            waiting = submit_jobs(client, 200, 4)  # no worker yet: their messages wait in Redis
            rd.restart(keep_data=True)
            stack.start_worker("--beat")
            assert_all_read(stack, waiting)
            in_flight = submit_jobs(client, 210, 4)  # now restarted while the worker reads them
            time.sleep(1.5)
            rd.restart(keep_data=True)
            assert_all_read(stack, in_flight)
            assert failed_pages(stack) == 0


def test_s3_busy_on_a_submitted_s3_uri_answers_503_not_a_missing_object(busy_s3, own_s3):
    stack, proxy = busy_s3
    own_s3.client().put_object(Bucket=USER_BUCKET, Key="scans/busy.png", Body=word_image("busy"))
    client = stack.client(KEY_A)
    proxy.busy_for(30, methods=("HEAD", "GET"), path_part="/scans/")
    busy = client.post("/jobs", json={"s3_uri": f"s3://{USER_BUCKET}/scans/busy.png", "output": "text"})
    assert busy.status_code == 503, busy.text
    assert busy.json()["code"] == "storage_unavailable" and int(busy.headers["Retry-After"]) >= 1
    assert proxy.busy_answers >= 1
    proxy.calm()
    later = client.post("/jobs", json={"s3_uri": f"s3://{USER_BUCKET}/scans/busy.png", "output": "text"})
    assert later.status_code == 202, later.text
    missing = client.post("/jobs", json={"s3_uri": f"s3://{USER_BUCKET}/scans/none.png", "output": "text"})
    assert missing.status_code == 422 and missing.json()["code"] == "s3_unreadable", missing.text


def test_a_job_whose_result_meets_a_busy_store_stays_open_and_ends_once_it_answers(busy_s3):
    # Every page read, output=pdf: building the PDF reads the source again. A busy store made that ObjectMissing,
    # and the job failed for good ("the searchable PDF could not be built"); the sweeper closes such jobs later.
    stack, proxy = busy_s3
    client = stack.client(KEY_A)
    job_id = client.post("/jobs", files={"file": ("late.png", word_image("late"))}, data={"output": "pdf"}).json()["id"]
    with stack.services.db.session() as session:
        (page_id,) = session.scalars(select(Page.id).where(Page.job_id == job_id))
        assert job_states.start_job(session, job_id=job_id)
    with stack.services.db.session() as session:  # what a worker wrote for the page
        assert job_states.claim_page(session, page_id=page_id) == 1
        assert job_states.finish_page(session, page_id=page_id, outcome=job_states.PageOutcome(text="late"))
    ctx = WorkerContext(app=create_celery(stack.settings), settings=stack.settings)  # no cached source
    proxy.busy_for(60)
    close_job_if_done(ctx, job_id=job_id)
    assert proxy.busy_answers >= 1
    with stack.services.db.session() as session:
        job = session.get(Job, job_id)
        assert (job.status, job.error, job.result_key) == ("running", None, None)
    proxy.calm()
    close_job_if_done(ctx, job_id=job_id)
    body = client.get(f"/jobs/{job_id}").json()
    assert body["status"] == "succeeded", body
    stored = client.get(f"/jobs/{job_id}/result", params={"format": "pdf"}, follow_redirects=False)
    assert stored.status_code == 303, stored.text  # the PDF built as the job ended, behind a presigned link
    assert httpx.get(stored.headers["location"]).content.startswith(b"%PDF")


def test_a_pdf_built_on_demand_from_a_busy_store_answers_503_not_source_gone(busy_s3):
    stack, proxy = busy_s3
    client = stack.client(KEY_A)
    job_id = client.post("/jobs", files={"file": ("demand.png", word_image("demand"))},
                         data={"output": "text"}).json()["id"]
    with stack.services.db.session() as session:
        (page_id,) = session.scalars(select(Page.id).where(Page.job_id == job_id))
        assert job_states.start_job(session, job_id=job_id)
    with stack.services.db.session() as session:
        assert job_states.claim_page(session, page_id=page_id) == 1
        assert job_states.finish_page(session, page_id=page_id, outcome=job_states.PageOutcome(text="demand"))
    close_job_if_done(WorkerContext(app=create_celery(stack.settings), settings=stack.settings), job_id=job_id)
    assert client.get(f"/jobs/{job_id}").json()["status"] == "succeeded"
    proxy.busy_for(60)
    busy = client.get(f"/jobs/{job_id}/result", params={"format": "pdf"})
    assert busy.status_code == 503, busy.text
    assert busy.json()["code"] == "storage_unavailable"
    proxy.calm()
    built = client.get(f"/jobs/{job_id}/result", params={"format": "pdf"})
    assert built.status_code == 200 and built.content.startswith(b"%PDF"), built.text[:200]


def test_a_batch_result_meeting_a_busy_store_stays_queued_until_the_sweeper_writes_it(busy_s3, own_s3):
    # Writing a batch job's result under the output prefix got S3's InternalError: the item failed for good with
    # "the result could not be written". It now waits for the batch sweeper, as after a crash.
    stack, proxy = busy_s3
    own_s3.client().put_object(Bucket=USER_BUCKET, Key="in-busy/doc.png", Body=word_image("batchy"))
    client = stack.client(KEY_A)
    batch_id = client.post("/batches", json={"input_prefix": f"s3://{USER_BUCKET}/in-busy/",
                                             "output_prefix": f"s3://{USER_BUCKET}/out-busy/"}).json()["id"]
    ctx = WorkerContext(app=create_celery(stack.settings), settings=stack.settings)
    batch_listing.list_next_page(ctx, batch_id=batch_id)
    with stack.services.db.session() as session:
        (job_id,) = session.scalars(select(Job.id).where(Job.batch_id == batch_id))
    pipeline.prepare_job(ctx, job_id=job_id)
    with stack.services.db.session() as session:
        (page_id,) = session.scalars(select(Page.id).where(Page.job_id == job_id))
    proxy.busy_for(120, methods=("PUT",), path_part="/out-busy/")
    pipeline.process_page(ctx, page_id=page_id)  # read; the job ends, and its item's result meets the busy store
    assert proxy.busy_answers >= 1
    waiting = batch_item(stack, job_id)
    assert (waiting.status, waiting.error) == ("queued", None)
    proxy.calm()
    time.sleep(stack.settings.batch_stale_after_s + 0.5)
    batch_sweep.sweep(ctx)
    written = batch_item(stack, job_id)
    assert (written.status, written.result_key) == ("succeeded", f"s3://{USER_BUCKET}/out-busy/doc.png.md")
    body = own_s3.client().get_object(Bucket=USER_BUCKET, Key="out-busy/doc.png.md")["Body"].read().decode()
    assert "batchy" in body


def batch_item(stack, job_id: str) -> BatchItem:
    with stack.services.db.session() as session:
        return session.scalars(select(BatchItem).where(BatchItem.job_id == job_id)).one()
