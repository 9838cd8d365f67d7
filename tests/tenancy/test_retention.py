"""Retention: the beat task deletes uploads and results from the real S3, marks the jobs, and GET says 410."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from sqlalchemy import select, update

from common.jobs import results
from common.jobs.models import Job, Page
from common.orm import utcnow
from common.queue.config import build_config
from common.queue.names import CONTROL_QUEUE, PURGE_EXPIRED
from tests.conftest import BUCKET, USER_BUCKET
from tests.documents.hostile import text_pdf
from tests.support.stack import wait_for_job


def stored(s3, key: str) -> bool:
    try:
        s3.client().head_object(Bucket=BUCKET, Key=f"tenancy/{key}")
        return True
    except ClientError as exc:
        assert exc.response["Error"]["Code"] in ("404", "NoSuchKey"), exc
        return False


def result_keys(job: Job) -> list[str]:
    return [results.object_key(job.result_key, fmt) for fmt in results.TEXT_FORMATS]


def backdate(stack, job_id: str, days: int) -> None:
    when = utcnow() - timedelta(days=days)
    with stack.services.db.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(created_at=when, finished_at=when))


def load(stack, job_id: str) -> Job:
    with stack.services.db.session() as session:
        return session.get(Job, job_id)


@pytest.fixture()
def finished(tenancy_stack, tenant_a, tenant_b, s3, tmp_path):
    """Three succeeded jobs whose results are in S3: two uploads and one read from the user's own s3_uri."""
    pdf = text_pdf(tmp_path / "doc.pdf", ["Retention keeps nothing longer than it was asked to keep."]).read_bytes()
    user_key = f"user-owned/{uuid.uuid4().hex}.pdf"
    s3.client().put_object(Bucket=USER_BUCKET, Key=user_key, Body=pdf)
    ids = {
        "old": tenant_a.post("/jobs", files={"file": ("old.pdf", pdf)}).json()["id"],
        "middle": tenant_b.post("/jobs", files={"file": ("middle.pdf", pdf)}).json()["id"],
        "user_object": tenant_b.post("/jobs", json={"s3_uri": f"s3://{USER_BUCKET}/{user_key}"}).json()["id"],
    }
    for name, job_id in ids.items():
        assert wait_for_job(tenant_a if name == "old" else tenant_b, job_id)["status"] == "succeeded"
    return ids, user_key


def test_the_beat_schedule_runs_the_purge(tenancy_settings):
    entry = build_config(tenancy_settings)["beat_schedule"]["purge-expired"]
    assert entry["task"] == PURGE_EXPIRED and entry["schedule"] == tenancy_settings.retention_sweep_interval_s


def test_expired_uploads_and_results_are_deleted_from_s3(tenancy_stack, tenant_a, tenant_b, s3, finished):
    ids, user_key = finished
    jobs = {name: load(tenancy_stack, job_id) for name, job_id in ids.items()}
    old, middle = jobs["old"], jobs["middle"]
    assert all(stored(s3, key) for key in [old.source_key, middle.source_key, *result_keys(old), *result_keys(middle)])
    backdate(tenancy_stack, old.id, days=40)  # past both the 7 days of uploads and the 30 of results
    backdate(tenancy_stack, middle.id, days=10)  # past the uploads' days only
    backdate(tenancy_stack, jobs["user_object"].id, days=40)

    tenancy_stack.services.celery.send_task(PURGE_EXPIRED, queue=CONTROL_QUEUE)
    deadline = time.monotonic() + 60
    while not (load(tenancy_stack, old.id).expired_at and load(tenancy_stack, middle.id).source_expired_at):
        assert time.monotonic() < deadline, "the purge task did not run"
        time.sleep(0.2)

    assert not any(stored(s3, key) for key in [old.source_key, *result_keys(old), middle.source_key])
    assert all(stored(s3, key) for key in result_keys(middle))
    s3.client().head_object(Bucket=USER_BUCKET, Key=user_key)  # the user's own object is never ours to delete
    assert load(tenancy_stack, jobs["user_object"].id).expired_at is not None

    view = tenant_a.get(f"/jobs/{old.id}").json()
    assert view["status"] == "succeeded" and view["expired_at"] and view["links"]["download"] is None
    gone = tenant_a.get(f"/jobs/{old.id}/result")
    assert gone.status_code == 410 and gone.json()["expired_at"]
    with tenancy_stack.services.db.session() as session:
        assert set(session.scalars(select(Page.text).where(Page.job_id == old.id))) == {None}
    assert tenant_b.get(f"/jobs/{middle.id}/result", follow_redirects=False).status_code == 303
    assert load(tenancy_stack, middle.id).expired_at is None
