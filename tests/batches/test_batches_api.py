"""POST/GET/DELETE /batches against Postgres, Redis and SeaweedFS, with the listing run in this process.

No worker consumes this stack's queues, so what the listing enqueued stays queued until a test says otherwise.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from sqlalchemy import func, select

from common.batches.models import Batch, BatchItem
from common.jobs.models import Job, Page
from common.queue.names import LISTING_QUEUE, cpu_worker_queues
from common.settings import S3SourceProfile
from common.webhooks.models import WebhookDelivery
from tests.batches.support import new_bucket, read_manifest, upload, word_image
from tests.conftest import KEY_A, KEY_B, SERVICE_GRANT, make_settings
from tests.support import seaweed
from tests.support.stack import Stack
from worker.batches import listing as batch_listing
from worker.batches import results as batch_results
from worker.batches import sweeper as batch_sweep
from worker.context import WorkerContext
from worker.jobs import pipeline

PAGE_SIZE = 7
HOOK = "http://127.0.0.1:9/hooks/batches"


@pytest.fixture(scope="module")
def quiet(tmp_path_factory, pg_url, redis_url, s3):
    everywhere = {"read": ["*"], "write": ["*"]}
    profiles = SERVICE_GRANT | {
        "archive": S3SourceProfile(tenants=["tenant-a"], access_key_id=seaweed.ACCESS_KEY,
                                   secret_access_key=seaweed.SECRET_KEY, **everywhere),
        "revoked": S3SourceProfile(tenants=["tenant-a"], access_key_id="nobody", secret_access_key="wrong-secret",
                                   **everywhere),
    }
    settings = make_settings(home=tmp_path_factory.mktemp("quiet"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             batch_list_page_size=PAGE_SIZE, s3_source_profiles=profiles, batch_progress_interval_s=0,
                             batch_stale_after_s=1)
    with Stack(settings, logs=tmp_path_factory.mktemp("quiet-logs")) as stack:
        yield stack
        with stack.services.celery.connection_for_write() as conn:
            for queue in cpu_worker_queues():
                conn.default_channel.queue_purge(queue)


@pytest.fixture(scope="module")
def ctx(quiet):
    context = WorkerContext(app=quiet.services.celery, settings=quiet.settings)
    yield context
    context.db.dispose()


@pytest.fixture()
def a(quiet):
    return quiet.client(KEY_A)


@pytest.fixture()
def b(quiet):
    return quiet.client(KEY_B)


@pytest.fixture(scope="module")
def source(s3):
    """A bucket with 23 documents and 6 other objects, over nested folders."""
    client = s3.client()
    bucket = new_bucket(client)
    objects = {f"in/{'sub/' * (n % 3)}doc{n}.png": word_image(f"w{n}") for n in range(23)}
    objects |= {f"in/notes{n}.txt": b"text" for n in range(3)} | {"in/empty.pdf": b"", "in/sub/README": b"x"}
    objects |= {"in/sub/": b""}
    upload(client, bucket, objects)
    client.create_bucket(Bucket=f"{bucket}-out")
    return bucket


def deliveries(stack, batch_id: str) -> list[dict]:
    """The webhook events recorded for a batch, oldest first."""
    with stack.services.db.session() as session:
        bodies = session.scalars(select(WebhookDelivery.body).where(WebhookDelivery.batch_id == batch_id)
                                 .order_by(WebhookDelivery.created_at))
        return [json.loads(body) for body in bodies]


def list_all(ctx, batch_id: str) -> None:
    for _ in range(100):
        with ctx.db.session() as session:
            if session.get(Batch, batch_id).listing_done:
                return
        batch_listing.list_next_page(ctx, batch_id=batch_id)
    raise AssertionError("the listing never ended")


def post(client, **body):
    return client.post("/batches", json=body)


def test_bad_input_is_refused_at_submit(a, b, source):
    out = f"s3://{source}-out/r/"
    cases = [
        ({"input_prefix": "s3://no-such-bucket-b6/in/", "output_prefix": out}, "s3_unreadable"),
        ({"input_prefix": f"s3://{source}/in/", "output_prefix": "s3://no-such-bucket-b6/r/"}, "s3_unreadable"),
        ({"input_prefix": f"s3://{source}/in/", "output_prefix": f"s3://{source}/in/results/"}, "output_inside_input"),
        ({"input_prefix": f"s3://{source}", "output_prefix": f"s3://{source}/results/"}, "output_inside_input"),
        ({"input_prefix": f"s3://{source}/in/", "output_prefix": out, "webhook_url": "http://10.1.2.3/hook"},
         "url_refused"),
        ({"input_prefix": f"s3://{source}/in/", "output_prefix": out, "source_profile": "revoked"}, "s3_unreadable"),
        ({"input_prefix": f"s3://{source}/in/", "output_prefix": out, "source_profile": "nope"},
         "unknown_source_profile"),
    ]
    for body, code in cases:
        response = post(a, **body)
        assert (response.status_code, response.json().get("code")) == (422, code), (body, response.text)
    # A profile open to tenant-a is unknown to tenant-b.
    response = post(b, input_prefix=f"s3://{source}/in/", output_prefix=out, source_profile="archive")
    assert response.json()["code"] == "unknown_source_profile"
    for body in ({"input_prefix": "http://x/y", "output_prefix": out},
                 {"input_prefix": f"s3://{source}/in/", "output_prefix": out, "output": "docx"},
                 {"input_prefix": f"s3://{source}/in/", "output_prefix": out, "aws_secret_access_key": "x"}):
        assert post(a, **body).status_code == 422, body
    assert b.post("/batches", json={}, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_listing_records_every_object_and_enqueues_the_documents(a, ctx, quiet, source):
    response = post(a, input_prefix=f"s3://{source}/in", output_prefix=f"s3://{source}-out/r/",
                    source_profile="archive", metadata={"run": 1})
    assert response.status_code == 202, response.text
    batch_id = response.json()["id"]
    assert response.json()["status"] == "listing"
    list_all(ctx, batch_id)

    body = a.get(f"/batches/{batch_id}").json()
    assert body["status"] == "running" and body["listing_done"] and body["listed_at"]
    assert body["input_prefix"] == f"s3://{source}/in/" and body["metadata"] == {"run": 1}
    assert (body["listed"], body["queued"], body["skipped"], body["running"]) == (29, 23, 6, 0)
    assert body["eta_s"] is None and body["rates"]["objects_per_s"] == 0
    with quiet.services.db.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch.list_pages == -(-29 // PAGE_SIZE) and batch.list_token is None
        jobs = list(session.scalars(select(Job).where(Job.batch_id == batch_id)))
        reasons = dict(session.execute(select(BatchItem.key, BatchItem.reason)
                                       .where(BatchItem.batch_id == batch_id, BatchItem.status == "skipped")).all())
    assert len(jobs) == 23 and {j.status for j in jobs} == {"queued"}
    assert {j.source_profile for j in jobs} == {"archive"} and {j.priority for j in jobs} == {"bulk"}
    assert all(j.source_uri.startswith(f"s3://{source}/in/") and j.source_kind == "s3" for j in jobs)
    assert reasons == {"in/empty.pdf": "empty object", "in/sub/README": "not a document type (no extension)",
                       "in/sub/": "folder marker", **{f"in/notes{n}.txt": "not a document type (.txt)"
                                                       for n in range(3)}}


def test_racing_listers_record_each_object_once(a, ctx, quiet, source):
    batch_id = post(a, input_prefix=f"s3://{source}/in/", output_prefix=f"s3://{source}-out/race/").json()["id"]
    errors = []

    def lister():
        try:
            list_all(ctx, batch_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=lister) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    with quiet.services.db.session() as session:
        items = session.scalar(select(func.count()).where(BatchItem.batch_id == batch_id))
        jobs = session.scalar(select(func.count()).where(Job.batch_id == batch_id))
        pages = session.get(Batch, batch_id).list_pages
    assert (items, jobs, pages) == (29, 23, -(-29 // PAGE_SIZE))


def test_cancel_drops_what_has_not_started(a, b, ctx, quiet, s3, source):
    batch_id = post(a, input_prefix=f"s3://{source}/in/", output_prefix=f"s3://{source}-out/cancel/",
                    webhook_url=HOOK).json()["id"]
    list_all(ctx, batch_id)
    with quiet.services.db.session() as session:
        started = session.scalars(select(Job.id).where(Job.batch_id == batch_id).limit(1)).one()
    pipeline.prepare_job(ctx, job_id=started)  # one job is running when the cancel comes

    assert b.delete(f"/batches/{batch_id}").status_code == 404
    body = a.delete(f"/batches/{batch_id}").json()
    assert body["status"] == "canceled"
    assert (body["canceled"], body["running"], body["queued"]) == (22, 1, 0)
    assert a.delete(f"/batches/{batch_id}").json()["canceled"] == 22  # a second cancel changes nothing

    with quiet.services.db.session() as session:
        canceled = session.scalars(select(Job.id).where(Job.batch_id == batch_id, Job.id != started).limit(1)).one()
    pipeline.prepare_job(ctx, job_id=canceled)  # its prepare task arrives after all
    with quiet.services.db.session() as session:
        assert session.get(Job, canceled).status == "canceled" and session.get(Job, canceled).pages_total == 0
    assert batch_results.finish_if_done(ctx, batch_id=batch_id) is None  # the running job is still out

    with quiet.services.db.session() as session:
        page_ids = list(session.scalars(select(Page.id).where(Page.job_id == started)))
    for page_id in page_ids:
        pipeline.process_page(ctx, page_id=page_id)  # the running job ends, and with it the batch

    body = a.get(f"/batches/{batch_id}").json()
    assert body["status"] == "canceled" and body["finished_at"]
    assert (body["succeeded"], body["canceled"], body["skipped"], body["listed"]) == (1, 22, 6, 29)
    lines = read_manifest(s3.client(), body["manifest"])
    assert body["manifest"] == f"s3://{source}-out/cancel/_manifest.jsonl"
    assert len(lines) == 29 and len({line["key"] for line in lines}) == 29
    assert sorted(line["status"] for line in lines).count("canceled") == 22
    done = next(line for line in lines if line["status"] == "succeeded")
    assert done["result_key"] == f"s3://{source}-out/cancel/{done['relative_key']}.md" and done["pages"] == 1
    events = deliveries(quiet, batch_id)
    assert [event["type"] for event in events] == ["batch.progress", "batch.completed"]
    assert events[-1]["data"]["status"] == "canceled"
    assert events[-1]["data"]["counts"] | {"succeeded": 1, "canceled": 22} == events[-1]["data"]["counts"]
    assert events[-1]["data"]["links"]["manifest"] == body["manifest"]


def test_an_empty_prefix_completes_with_zero(a, ctx, quiet, s3, source):
    batch_id = post(a, input_prefix=f"s3://{source}/nothing-here/", output_prefix=f"s3://{source}-out/e/",
                    webhook_url=HOOK, metadata={"k": "v"}).json()["id"]
    list_all(ctx, batch_id)
    body = a.get(f"/batches/{batch_id}").json()
    assert body["status"] == "completed" and body["listed"] == 0 and body["eta_s"] == 0
    assert read_manifest(s3.client(), body["manifest"]) == []
    assert batch_results.finish_if_done(ctx, batch_id=batch_id) is None  # closed once
    [event] = deliveries(quiet, batch_id)
    assert (event["type"], event["data"]["status"], event["data"]["metadata"]) == ("batch.completed", "completed",
                                                                                   {"k": "v"})
    assert event["data"]["counts"]["listed"] == 0


def test_another_tenants_batch_is_404(a, b, source):
    batch_id = post(a, input_prefix=f"s3://{source}/in/", output_prefix=f"s3://{source}-out/t/").json()["id"]
    assert b.get(f"/batches/{batch_id}").status_code == 404
    assert b.delete(f"/batches/{batch_id}").status_code == 404
    assert a.get(f"/batches/{batch_id}").status_code == 200
    assert a.get("/batches/0123456789abcdef0123456789abcdef").status_code == 404


def test_an_idempotency_key_answers_a_repeat_with_the_same_batch(a, source):
    body = {"input_prefix": f"s3://{source}/in/", "output_prefix": f"s3://{source}-out/idem/"}
    first = a.post("/batches", json=body, headers={"Idempotency-Key": "b6-idem-1"})
    again = a.post("/batches", json=body, headers={"Idempotency-Key": "b6-idem-1"})
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"] and again.headers.get("Idempotent-Replayed") == "true"
    other = a.post("/batches", json=body | {"output": "text"}, headers={"Idempotency-Key": "b6-idem-1"})
    assert other.status_code == 409


def test_the_batch_sweeper_restarts_a_lost_listing_and_records_jobs_ended_elsewhere(a, ctx, quiet, source):
    with quiet.services.celery.connection_for_write() as conn:
        conn.default_channel.queue_purge(LISTING_QUEUE)  # as if the first listing message were lost
    batch_id = post(a, input_prefix=f"s3://{source}/in/", output_prefix=f"s3://{source}-out/sw/").json()["id"]
    with quiet.services.celery.connection_for_write() as conn:
        conn.default_channel.queue_purge(LISTING_QUEUE)
    time.sleep(quiet.settings.batch_stale_after_s + 0.2)  # past the age at which a listing counts as stopped
    with quiet.services.db.session() as session:
        listing = session.scalar(select(func.count()).where(Batch.status == "listing"))  # earlier tests' too
    assert listing >= 1 and batch_sweep.sweep(ctx)["listings"] == listing
    assert batch_sweep.listing_queue_depth(ctx) == listing
    assert batch_sweep.sweep(ctx)["listings"] == 0  # its message is waiting: not published twice
    list_all(ctx, batch_id)

    # Each job is canceled through /jobs, which knows nothing of batches: the sweeper records the items.
    with quiet.services.db.session() as session:
        job_ids = list(session.scalars(select(Job.id).where(Job.batch_id == batch_id)))
    for job_id in job_ids:
        assert a.delete(f"/jobs/{job_id}").json()["status"] == "canceled"
    assert a.get(f"/batches/{batch_id}").json()["status"] == "running"
    time.sleep(quiet.settings.batch_stale_after_s + 0.2)  # past the age at which jobs ended elsewhere are recorded
    swept = batch_sweep.sweep(ctx)
    assert (swept["items"], swept["closed"]) == (23, 0)  # closed by the last item itself
    body = a.get(f"/batches/{batch_id}").json()
    assert (body["status"], body["canceled"], body["skipped"]) == ("completed", 23, 6) and body["manifest"]
