"""Erase now, seen from the storage and the database: a tenant's erase leaves nothing of the document but the
tombstone row, whether S3 answers or is stopped during the erase; tenant B cannot erase A's job or batch."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from common.batches.models import BatchItem
from common.jobs.models import Job, Page
from common.webhooks.models import WebhookAttempt, WebhookDelivery
from tests.batches.support import wait_for_batch, word_image, word_pdf
from tests.conftest import KEY_A, KEY_B, USER_BUCKET, make_settings
from tests.support import seaweed
from tests.support.stack import Stack, wait_for_job, wait_until

BUCKET = "ocrq-erase"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """SeaweedFS of this module's own: a test stops it."""
    server = seaweed.start(tmp_path_factory.mktemp("erase-seaweed"))
    for bucket in (BUCKET, USER_BUCKET):
        server.client().create_bucket(Bucket=bucket)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, module_pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("erase"), pg_url=module_pg_url, redis_url=redis_url, s3=s3,
                             storage_url=f"s3://{BUCKET}", inline_result_bytes=1, retention_sweep_interval_s=1.0)
    with Stack(settings, logs=tmp_path_factory.mktemp("erase-logs")) as running:
        running.start_worker("--beat")
        yield running


def stored(s3, job_id: str) -> list[str]:
    listing = s3.client().list_objects_v2(Bucket=BUCKET)
    return sorted(item["Key"] for item in listing.get("Contents", []) if f"/jobs/{job_id}/" in item["Key"])


def rows(stack, job_id: str) -> dict[str, int]:
    with stack.services.db.session() as session:
        deliveries = select(WebhookDelivery.id).where(WebhookDelivery.job_id == job_id)
        return {
            "pages": session.scalar(select(func.count()).where(Page.job_id == job_id)),
            "deliveries": session.scalar(select(func.count()).select_from(deliveries.subquery())),
            "attempts": session.scalar(select(func.count()).where(WebhookAttempt.delivery_id.in_(deliveries))),
        }


def tombstone(stack, job_id: str) -> Job:
    with stack.services.db.session() as session:
        return session.get(Job, job_id)


def test_an_erase_leaves_only_the_tombstone_and_b_cannot_erase(stack, s3):
    a, b = stack.client(KEY_A), stack.client(KEY_B)
    job_id = a.post("/jobs", files={"file": ("contract.pdf", word_pdf("confidential"))},
                    data={"output": "pdf", "webhook_url": "http://127.0.0.1:9/hook",
                          "metadata": '{"client": "Acme"}'}).json()["id"]
    assert wait_for_job(a, job_id)["status"] == "succeeded"
    wait_until(lambda: rows(stack, job_id)["deliveries"], timeout=30, what="a webhook delivery")
    before = stored(s3, job_id)
    assert {key.rsplit("/", 1)[1] for key in before} >= {"source", "result.pdf"}, before
    assert rows(stack, job_id)["pages"] == 1

    assert b.post(f"/jobs/{job_id}/erase").status_code == 404
    assert stored(s3, job_id) == before and tombstone(stack, job_id).erased_at is None

    first = a.post(f"/jobs/{job_id}/erase")
    assert first.status_code == 200, first.text
    assert stored(s3, job_id) == []
    assert rows(stack, job_id) == {"pages": 0, "deliveries": 0, "attempts": 0}
    job = tombstone(stack, job_id)
    assert (job.status, job.pages_total, job.pages_done, job.tenant_id) == ("succeeded", 1, 1, "tenant-a")
    assert (job.filename, job.meta, job.source_uri, job.source_key, job.result_key, job.webhook_url) == (
        None, None, "", None, None, None)
    assert first.json()["erased_at"] and first.json()["metadata"] is None
    again = a.post(f"/jobs/{job_id}/erase")
    assert (again.status_code, again.json()) == (200, first.json())
    for path in ("result", "result?format=pdf", "pages"):
        gone = a.get(f"/jobs/{job_id}/{path}")
        assert (gone.status_code, gone.json()["code"]) == (410, "erased"), (path, gone.text)
    assert a.get(f"/jobs/{job_id}").json()["erased_at"] == first.json()["erased_at"]


def test_an_erase_meeting_an_s3_outage_finishes_once_s3_is_back(stack, s3):
    a = stack.client(KEY_A)
    job_id = a.post("/jobs", files={"file": ("late.png", word_image("outage"))}).json()["id"]
    assert stored(s3, job_id) == [f"tenants/tenant-a/jobs/{job_id}/source"]
    s3.stop()
    try:
        pending = a.post(f"/jobs/{job_id}/erase")
        assert pending.status_code == 202, pending.text
        assert pending.json()["erased_at"] and pending.json()["status"] in ("canceled", "succeeded", "failed")
        assert (a.get(f"/jobs/{job_id}/result").json()["code"]) == "erased"
        assert tombstone(stack, job_id).erase_pending
    finally:
        s3.start_again()
    wait_until(lambda: not tombstone(stack, job_id).erase_pending, timeout=60, what="the sweep to finish the erase")
    assert stored(s3, job_id) == []
    assert rows(stack, job_id)["pages"] == 0 and tombstone(stack, job_id).filename is None
    assert a.post(f"/jobs/{job_id}/erase").status_code == 200


def test_a_batch_is_erased_with_its_jobs(stack, s3):
    a, b = stack.client(KEY_A), stack.client(KEY_B)
    prefix = uuid.uuid4().hex[:8]
    for word in ("alpha", "bravo"):
        s3.client().put_object(Bucket=USER_BUCKET, Key=f"{prefix}/in/{word}.png", Body=word_image(word))
    batch_id = a.post("/batches", json={"input_prefix": f"s3://{USER_BUCKET}/{prefix}/in/",
                                        "output_prefix": f"s3://{USER_BUCKET}/{prefix}/out/"}).json()["id"]
    assert wait_for_batch(a, batch_id, timeout=120)["succeeded"] == 2
    job_ids = [row["id"] for row in a.get("/jobs", params={"batch_id": batch_id}).json()["jobs"]]
    assert len(job_ids) == 2 and all(stored(s3, job_id) for job_id in job_ids)

    assert b.post(f"/batches/{batch_id}/erase").status_code == 404
    assert a.get(f"/batches/{batch_id}").json()["erased_at"] is None

    erased = a.post(f"/batches/{batch_id}/erase")
    assert erased.status_code == 200 and erased.json()["erased_at"], erased.text
    assert erased.json()["succeeded"] == 2  # the counts stay
    assert all(stored(s3, job_id) == [] and tombstone(stack, job_id).erased_at for job_id in job_ids)
    with stack.services.db.session() as session:
        keys = set(session.scalars(select(BatchItem.key).where(BatchItem.batch_id == batch_id)))
    assert not any("alpha" in key or "bravo" in key for key in keys), keys
    assert a.post(f"/batches/{batch_id}/erase").json() == erased.json()
