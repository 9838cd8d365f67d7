"""An `ocrq api` SIGKILLed at each step of POST /jobs and POST /batches with an Idempotency-Key: resending
the request with the key until it answers 202 leaves exactly one job, one result and one webhook event."""

from __future__ import annotations

import io
import json
import signal
import time
import uuid

import httpx
import pytest
from PIL import Image
from sqlalchemy import func, select

from common.batches.models import Batch
from common.jobs.models import Job, Page
from common.queue.names import SWEEP_WEBHOOKS, WEBHOOK_QUEUE, cpu_worker_queues
from common.webhooks.models import WebhookDelivery
from tests.batches.support import new_bucket, upload, word_for, word_image
from tests.conftest import KEY_A, make_settings
from tests.support import webhook_receiver
from tests.support.api_process import ApiProcess
from tests.support.stack import Stack, beat_period, task_results, wait_for_task_runs, wait_until

JOB_POINTS = ("after_upload", "after_row", "after_commit", "after_publish")
BATCH_POINTS = ("after_row", "after_commit", "after_publish")
# Short timers: a cut-off key is taken over after 2 s, the sweepers look every 2 s at work 3 s old.
TIMERS = {"idempotency_lock_s": 2, "idempotency_wait_s": 0.5, "stale_requeue_after_s": 3, "sweep_interval_s": 2,
          "batch_stale_after_s": 3, "batch_sweep_interval_s": 2, "webhook_retry_schedule_s": [0, 0.5, 1, 2]}
AUTH = {"Authorization": f"Bearer {KEY_A}"}


@pytest.fixture(scope="module")
def crash_stack(tmp_path_factory, module_pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("crash-home"), pg_url=module_pg_url, redis_url=redis_url,
                             s3=s3, **TIMERS)
    with Stack(settings, logs=tmp_path_factory.mktemp("crash-logs")) as stack:
        stack.start_worker("--beat", "--queues", ",".join([*cpu_worker_queues(), WEBHOOK_QUEUE]))
        healthy = ApiProcess(settings, log=stack.logs / "api.log").wait_ready()
        stack.api = healthy
        try:
            yield stack
        finally:
            healthy.stop()


@pytest.fixture(scope="module")
def receiver(crash_stack):
    server = webhook_receiver.start()
    server.secrets = [httpx.get(f"{crash_stack.api.url}/webhooks/secret", headers=AUTH).json()["secret"]]
    yield server
    server.shutdown()
    server.server_close()


def doomed_apis(stack, points) -> dict[str, ApiProcess]:
    """One API per fault point, started side by side."""
    apis = {p: ApiProcess(stack.settings, log=stack.logs / f"api-{p}.log", extra_env={"OCRQ_FAULT_POINT": p})
            for p in points}
    return {p: api.wait_ready() for p, api in apis.items()}


def crash(api: ApiProcess, send) -> None:
    """The first try: the API dies mid-request, and the client sees the connection drop."""
    with pytest.raises(httpx.TransportError):
        send(api.url)
    assert api.wait_exit() == -signal.SIGKILL


def resend_until_accepted(send, base_url: str, *, timeout: float = 30) -> tuple[httpx.Response, list[int]]:
    """Resend as a client should, honouring Retry-After; returns the 202 and every status seen before it."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = send(base_url)
        if response.status_code == 202:
            return response, seen
        seen.append(response.status_code)
        assert response.status_code == 409, response.text
        assert response.json()["code"] == "idempotency_in_progress" and "still being decided" in response.text
        time.sleep(min(float(response.headers["Retry-After"]), 2))
    raise AssertionError(f"no 202 within {timeout}s; saw {seen}")


def png_of(word: str) -> bytes:
    buffer = io.BytesIO()
    Image.open(io.BytesIO(word_image(word))).save(buffer, "PNG")
    return buffer.getvalue()



def test_post_jobs_killed_at_each_step_makes_one_job_per_key(crash_stack, receiver):
    stack, db = crash_stack, crash_stack.services.db
    attempts = {}
    for n, (point, api) in enumerate(doomed_apis(stack, JOB_POINTS).items()):
        key, name, path = str(uuid.uuid4()), f"crash-{point}-{uuid.uuid4().hex[:8]}.png", f"/hook/{point}"
        word = word_for(n)

        def send(base_url: str, key=key, name=name, word=word, path=path) -> httpx.Response:
            return httpx.post(f"{base_url}/jobs", files={"file": (name, png_of(word))}, timeout=30,
                              data={"output": "text", "webhook_url": receiver.plan(path)},
                              headers=AUTH | {"Idempotency-Key": key})

        crash(api, send)
        accepted, seen = resend_until_accepted(send, stack.api.url)
        attempts[point] = (name, word, path, accepted, seen)

    for point, (name, word, path, accepted, seen) in attempts.items():
        committed = point in ("after_commit", "after_publish")
        # A committed job is replayed at once; an uncommitted one is taken over once its lock lapses.
        assert (accepted.headers.get("idempotent-replayed") == "true") == committed, point
        assert committed or seen, f"{point}: the cut-off key should have answered 409 first"
        job_id = accepted.json()["id"]
        job = wait_until(lambda job_id=job_id: (body := httpx.get(f"{stack.api.url}/jobs/{job_id}", headers=AUTH)
                                                .json())["status"] in {"succeeded", "failed"} and body,
                         timeout=60, what=f"job of {point} finished")
        assert job["status"] == "succeeded", (point, job)
        assert word in httpx.get(f"{stack.api.url}/jobs/{job_id}/result", headers=AUTH).text
        assert len(wait_until(lambda path=path: receiver.to(path), timeout=60, what="webhook")) == 1
        with db.session() as session:
            jobs = list(session.scalars(select(Job.id).where(Job.filename == name)))
            pages = session.scalar(select(func.count()).where(Page.job_id == job_id, Page.status == "succeeded"))
            events = session.scalar(select(func.count()).where(WebhookDelivery.job_id == job_id))
        assert (jobs, pages, events) == ([job_id], 1, 1), point
    # A duplicate event would come from the webhook sweep: its next run must find nothing to send again.
    (worker,) = stack.workers  # the one with the beat
    later = wait_for_task_runs(worker, SWEEP_WEBHOOKS, after=len(task_results(worker, SWEEP_WEBHOOKS)),
                               timeout=beat_period(stack.settings, "sweep-webhooks") + 20)
    assert later == ["0"] * len(later), later
    for point, (name, _, path, accepted, _) in attempts.items():
        assert len(receiver.to(path)) == 1, point
        with db.session() as session:
            assert session.scalar(select(func.count()).where(Job.filename == name)) == 1


def test_post_batches_killed_at_each_step_makes_one_batch_per_key(crash_stack, receiver, s3):
    stack, db, client = crash_stack, crash_stack.services.db, s3.client()
    bucket = new_bucket(client)
    client.create_bucket(Bucket=f"{bucket}-out")
    upload(client, bucket, {f"{point}/doc{n}.png": word_image(word_for(10 + n))
                            for point in BATCH_POINTS for n in range(2)})
    attempts = {}
    for point, api in doomed_apis(stack, BATCH_POINTS).items():
        key, path = str(uuid.uuid4()), f"/batch-hook/{point}"
        body = {"input_prefix": f"s3://{bucket}/{point}/", "output_prefix": f"s3://{bucket}-out/{point}/",
                "output": "text", "webhook_url": receiver.plan(path)}

        def send(base_url: str, key=key, body=body) -> httpx.Response:
            return httpx.post(f"{base_url}/batches", json=body, headers=AUTH | {"Idempotency-Key": key}, timeout=30)

        crash(api, send)
        accepted, seen = resend_until_accepted(send, stack.api.url)
        attempts[point] = (path, accepted, seen)

    for point, (path, accepted, seen) in attempts.items():
        assert (accepted.headers.get("idempotent-replayed") == "true") == (point != "after_row"), point
        batch_id = accepted.json()["id"]
        batch = wait_until(lambda batch_id=batch_id: (b := httpx.get(f"{stack.api.url}/batches/{batch_id}",
                                                                     headers=AUTH).json())["finished_at"] and b,
                           timeout=90, what=f"batch of {point} finished")
        assert (batch["status"], batch["succeeded"]) == ("completed", 2), (point, batch)
        events = wait_until(lambda path=path: receiver.to(path), timeout=60, what="batch webhook")
        assert [json.loads(e.body)["type"] for e in events] == ["batch.completed"]
        with db.session() as session:
            batches = list(session.scalars(select(Batch.id).where(Batch.input_bucket == bucket,
                                                                   Batch.input_prefix == f"{point}/")))
            jobs = session.scalar(select(func.count()).where(Job.batch_id == batch_id))
            pages = session.scalar(select(func.count()).select_from(Page).join(Job)
                                   .where(Job.batch_id == batch_id, Page.status == "succeeded"))
            deliveries = session.scalar(select(func.count()).where(WebhookDelivery.batch_id == batch_id,
                                                                   WebhookDelivery.event_type == "batch.completed"))
        assert (batches, jobs, pages, deliveries) == ([batch_id], 2, 2, 1), point
        results = client.list_objects_v2(Bucket=f"{bucket}-out", Prefix=f"{point}/")
        assert len([o for o in results.get("Contents", []) if o["Key"].endswith(".txt")]) == 2, results
