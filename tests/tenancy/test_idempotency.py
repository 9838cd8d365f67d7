"""Idempotency-Key on POST /jobs: one job per key and body, replayed answers, 409 for a reused key."""

from __future__ import annotations

import dataclasses
import io
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from PIL import Image
from sqlalchemy import func, select, update

from api.app import create_app
from common.errors import Rejected
from common.jobs.models import Job
from common.orm import utcnow
from common.services import Services
from common.tenancy import idempotency
from common.tenancy.idempotency_keys import IdempotencyKey
from tests.conftest import KEY_A, USER_BUCKET
from tests.support.live_server import live_server
from tests.support.rollback import RolledBackDatabase


def png(shade: int = 200) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (48, 24), (shade, shade, shade)).save(buffer, "PNG")
    return buffer.getvalue()


def post_upload(client, key: str, *, name: str, data: bytes, **fields):
    return client.post("/jobs", files={"file": (name, data)}, data=fields, headers={"Idempotency-Key": key})


def jobs_named(stack, filename: str) -> int:
    with stack.services.db.session() as session:
        return session.scalar(select(func.count()).select_from(Job).where(Job.filename == filename))


def test_twenty_concurrent_identical_requests_create_one_job(tenancy_stack, tenancy_settings):
    key, name, body = str(uuid.uuid4()), f"{uuid.uuid4().hex}.png", png()
    start = threading.Barrier(20)

    def send(base_url: str) -> httpx.Response:
        with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=60) as http:
            start.wait(timeout=30)
            return http.post("/jobs", files={"file": (name, body)}, data={"output": "text"},
                             headers={"Idempotency-Key": key})

    with live_server(create_app(tenancy_settings)) as base_url, ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(send, [base_url] * 20))

    assert [r.status_code for r in responses] == [202] * 20, [r.text for r in responses if r.status_code != 202]
    assert len({r.json()["id"] for r in responses}) == 1
    assert sum(r.headers.get("idempotent-replayed") == "true" for r in responses) == 19
    assert jobs_named(tenancy_stack, name) == 1


def test_same_key_and_body_replay_the_first_answer(tenancy_stack, tenant_a):
    key, name = str(uuid.uuid4()), f"{uuid.uuid4().hex}.png"
    first = post_upload(tenant_a, key, name=name, data=png(), output="text", metadata=json.dumps({"a": 1}))
    again = post_upload(tenant_a, key, name=name, data=png(), output="text", metadata=json.dumps({"a": 1}))
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json()
    assert "idempotent-replayed" not in first.headers and again.headers["idempotent-replayed"] == "true"
    assert jobs_named(tenancy_stack, name) == 1


@pytest.mark.parametrize("change", ["file bytes", "option", "metadata", "filename"])
def test_same_key_with_another_body_is_409(tenancy_stack, tenant_a, change):
    key, name = str(uuid.uuid4()), f"{uuid.uuid4().hex}.png"
    original = {"name": name, "data": png(), "output": "text", "metadata": json.dumps({"a": 1})}
    assert post_upload(tenant_a, key, **original).status_code == 202
    changed = dict(original) | {
        "file bytes": {"data": png(shade=90)}, "option": {"output": "json"},
        "metadata": {"metadata": json.dumps({"a": 2})}, "filename": {"name": "other-" + name},
    }[change]
    response = post_upload(tenant_a, key, **changed)
    assert response.status_code == 409, response.text
    assert response.json()["code"] == "idempotency_key_reused"
    assert post_upload(tenant_a, key, **original).headers["idempotent-replayed"] == "true"
    assert jobs_named(tenancy_stack, name) + jobs_named(tenancy_stack, "other-" + name) == 1


def test_json_bodies_compare_by_meaning_not_bytes(tenancy_stack, tenant_a, s3):
    object_key = f"idempotency/{uuid.uuid4().hex}.png"
    s3.client().put_object(Bucket=USER_BUCKET, Key=object_key, Body=png())
    key, uri = str(uuid.uuid4()), f"s3://{USER_BUCKET}/{object_key}"
    headers = {"Idempotency-Key": key, "content-type": "application/json"}
    first = tenant_a.post("/jobs", content=json.dumps({"s3_uri": uri, "output": "text"}), headers=headers)
    reordered = tenant_a.post("/jobs", content=json.dumps({"output": "text", "s3_uri": uri}), headers=headers)
    other = tenant_a.post("/jobs", content=json.dumps({"s3_uri": uri, "output": "json"}), headers=headers)
    assert first.status_code == 202, first.text
    assert reordered.status_code == 202 and reordered.json()["id"] == first.json()["id"]
    assert other.status_code == 409


def test_keys_belong_to_one_tenant(tenant_a, tenant_b):
    key, name = str(uuid.uuid4()), f"{uuid.uuid4().hex}.png"
    mine = post_upload(tenant_a, key, name=name, data=png())
    theirs = post_upload(tenant_b, key, name=name, data=png())
    assert (mine.status_code, theirs.status_code) == (202, 202)
    assert mine.json()["id"] != theirs.json()["id"]
    assert "idempotent-replayed" not in theirs.headers


def test_a_refused_request_does_not_hold_its_key(tenancy_stack, tenant_a):
    key = str(uuid.uuid4())
    for _ in range(2):
        refused = post_upload(tenant_a, key, name="x.png", data=b"this is text, not an image")
        assert refused.status_code == 415, refused.text
    with tenancy_stack.services.db.session() as session:
        assert session.scalar(select(IdempotencyKey).where(IdempotencyKey.key == key)) is None
    assert post_upload(tenant_a, key, name=f"{uuid.uuid4().hex}.png", data=png()).status_code == 202


def test_a_key_is_free_again_after_its_window(tenancy_stack, tenancy_settings, tenant_a):
    key = str(uuid.uuid4())
    first = post_upload(tenant_a, key, name=f"{uuid.uuid4().hex}.png", data=png())
    with tenancy_stack.services.db.session() as session:
        session.execute(update(IdempotencyKey).where(IdempotencyKey.key == key).values(
            created_at=utcnow() - timedelta(seconds=tenancy_settings.idempotency_ttl_s + 60)))
    later = post_upload(tenant_a, key, name=f"{uuid.uuid4().hex}.png", data=png(shade=10))
    assert (first.status_code, later.status_code) == (202, 202)
    assert later.json()["id"] != first.json()["id"]


@pytest.fixture()
def keys_svc(tenancy_settings):
    """What idempotency.claim uses (settings and a database), in one transaction rolled back after the test:
    these tests call the service directly, so no other process needs to see their keys."""
    db = RolledBackDatabase(tenancy_settings.database_url)
    try:
        yield Services(settings=tenancy_settings, db=db, storage=None, celery=None)  # claim needs neither
    finally:
        db.dispose()


def test_unfinished_first_request_makes_repeats_wait_then_is_taken_over(keys_svc):
    svc = dataclasses.replace(keys_svc, settings=keys_svc.settings.model_copy(update={"idempotency_wait_s": 0.3}))
    key, fingerprint = str(uuid.uuid4()), "f" * 64
    with svc.db.session() as session:
        session.add(IdempotencyKey(tenant_id="tenant-a", key=key, fingerprint=fingerprint, lock_token="t" * 32))
    with pytest.raises(Rejected) as waited:
        idempotency.claim(svc, tenant_id="tenant-a", key=key, fingerprint=fingerprint)
    assert (waited.value.status, waited.value.code) == (409, "idempotency_in_progress")
    assert 1 <= int(waited.value.headers["Retry-After"]) <= idempotency.MAX_RETRY_AFTER_S
    assert "still being decided" in waited.value.detail

    with svc.db.session() as session:  # the first request's API died long ago
        session.execute(update(IdempotencyKey).where(IdempotencyKey.key == key).values(
            locked_at=utcnow() - timedelta(seconds=svc.settings.idempotency_lock_s + 1)))
    slot = idempotency.claim(svc, tenant_id="tenant-a", key=key, fingerprint=fingerprint)
    assert slot.replay is None
    with svc.db.session() as session:
        slot.save(session, 202, {"id": "x"})
    again = idempotency.claim(svc, tenant_id="tenant-a", key=key, fingerprint=fingerprint)
    assert again.replay == idempotency.Stored(202, {"id": "x"})


def test_a_slow_first_request_taken_over_rolls_back_its_job(keys_svc):
    svc = keys_svc
    key, fingerprint, name = str(uuid.uuid4()), "e" * 64, f"{uuid.uuid4().hex}.png"
    slow = idempotency.claim(svc, tenant_id="tenant-a", key=key, fingerprint=fingerprint)
    with svc.db.session() as session:
        session.execute(update(IdempotencyKey).where(IdempotencyKey.key == key).values(
            locked_at=utcnow() - timedelta(seconds=svc.settings.idempotency_lock_s + 1)))
    taker = idempotency.claim(svc, tenant_id="tenant-a", key=key, fingerprint=fingerprint)
    with svc.db.session() as session:
        taker.save(session, 202, {"id": "taker"})
    with pytest.raises(Rejected) as lost, svc.db.session() as session:
        session.add(Job(tenant_id="tenant-a", source_kind="upload", source_uri="x", filename=name))
        slow.save(session, 202, {"id": "slow"})
    assert (lost.value.status, lost.value.code) == (409, "idempotency_in_progress")
    with svc.db.session() as session:  # the same transaction the job was added in: it would see the row
        assert session.scalar(select(func.count()).select_from(Job).where(Job.filename == name)) == 0
    again = idempotency.claim(svc, tenant_id="tenant-a", key=key, fingerprint=fingerprint)
    assert again.replay == idempotency.Stored(202, {"id": "taker"})


def test_overlong_key_is_refused(tenant_a):
    response = post_upload(tenant_a, "k" * 256, name="a.png", data=png())
    assert response.status_code == 422
