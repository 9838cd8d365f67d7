"""S3 grants, tried from the hostile tenant's side: tenant B names tenant A's storage keys, A's granted bucket
and A's grant, under other spellings, as `s3_uri`, `input_prefix` and `output_prefix`. Each is refused before
any S3 call, and listing both buckets afterwards shows nothing of A's was read into a job of B's or changed.
"""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select

from common.batches.models import Batch
from common.jobs.models import Job
from common.settings import S3SourceProfile, Settings
from tests.batches.support import read_object, wait_for_batch, word_image
from tests.conftest import BUCKET, KEY_A, KEY_B, make_settings
from tests.support.stack import Stack, wait_for_job

STORAGE = f"s3://{BUCKET}/grants"
SUFFIX = uuid.uuid4().hex[:8]
A_BUCKET, B_BUCKET = f"ocrq-a-{SUFFIX}", f"ocrq-b-{SUFFIX}"
GRANTS = {
    "a-scans": S3SourceProfile(tenants=["tenant-a"], read=["ocrq-a-*"], write=["ocrq-a-*/out/"],
                               use_service_credentials=True),
    "b-scans": S3SourceProfile(tenants=["tenant-b"], read=["ocrq-b-*"], write=["ocrq-b-*"],
                               use_service_credentials=True),
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("grants"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             storage_url=STORAGE, s3_source_profiles=GRANTS, inline_result_bytes=1)
    client = s3.client()
    for bucket in (A_BUCKET, B_BUCKET):
        client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=A_BUCKET, Key="in/secret.png", Body=word_image("classified"))
    client.put_object(Bucket=B_BUCKET, Key="in/mine.png", Body=word_image("bravo7"))
    with Stack(settings, logs=tmp_path_factory.mktemp("grants-logs")) as running:
        running.start_worker()
        yield running


@pytest.fixture(scope="module")
def victim(stack):
    """Tenant A's uploaded document, read to the end, with its stored source and result keys."""
    a = stack.client(KEY_A)
    job_id = a.post("/jobs", files={"file": ("secret.png", word_image("classified"))}).json()["id"]
    assert wait_for_job(a, job_id)["status"] == "succeeded"
    with stack.services.db.session() as session:
        job = session.get(Job, job_id)
        return {"job_id": job_id, "source_key": job.source_key, "result_key": job.result_key}


def snapshot(s3, bucket: str) -> dict[str, str]:
    listing = s3.client().list_objects_v2(Bucket=bucket)
    return {item["Key"]: item["ETag"] for item in listing.get("Contents", [])}


def counts(stack, tenant: str) -> tuple[int, int]:
    with stack.services.db.session() as session:
        return (session.scalar(select(func.count()).select_from(Job).where(Job.tenant_id == tenant)),
                session.scalar(select(func.count()).select_from(Batch).where(Batch.tenant_id == tenant)))


def storage_key(victim, name: str) -> str:
    return f"grants/{victim[name]}"


def job_attacks(victim) -> list[tuple[dict, int, str]]:
    """(JSON body, status, code) of every s3_uri B tries."""
    source = storage_key(victim, "source_key")
    return [
        ({"s3_uri": f"s3://{BUCKET}/{source}"}, 403, "s3_not_granted"),
        ({"s3_uri": f"s3://{BUCKET}/{source}", "source_profile": "b-scans"}, 403, "s3_not_granted"),
        ({"s3_uri": f"s3://{BUCKET.upper()}/{source}"}, 422, "invalid_s3_uri"),
        ({"s3_uri": f"s3://{BUCKET}./{source}"}, 422, "invalid_s3_uri"),
        ({"s3_uri": f"s3://{BUCKET}//{source}"}, 422, "invalid_s3_uri"),
        ({"s3_uri": f"s3://{B_BUCKET}/../{BUCKET}/{source}"}, 422, "invalid_s3_uri"),
        # A literal key in B's own bucket: S3 does not decode it into a path of another bucket.
        ({"s3_uri": f"s3://{B_BUCKET}/in/%2e%2e/{BUCKET}/{source}"}, 422, "s3_unreadable"),
        ({"s3_uri": f"s3://{A_BUCKET}/in/secret.png"}, 403, "s3_not_granted"),
        ({"s3_uri": f"s3://{A_BUCKET}/in/secret.png", "source_profile": "a-scans"}, 422, "unknown_source_profile"),
        ({"s3_uri": f"s3://{A_BUCKET}/in/secret.png", "source_profile": "b-scans"}, 403, "s3_not_granted"),
    ]


def batch_attacks(victim) -> list[tuple[dict, int, str]]:
    mine, out = f"s3://{B_BUCKET}/in/", f"s3://{B_BUCKET}/out/"
    a_prefix = f"s3://{BUCKET}/grants/tenants/tenant-a/"
    return [
        ({"input_prefix": a_prefix, "output_prefix": out}, 403, "s3_not_granted"),
        ({"input_prefix": f"s3://{BUCKET}", "output_prefix": out}, 403, "s3_not_granted"),
        ({"input_prefix": mine, "output_prefix": a_prefix + "jobs/"}, 403, "s3_not_granted"),
        ({"input_prefix": f"s3://{A_BUCKET}/in/", "output_prefix": out}, 403, "s3_not_granted"),
        ({"input_prefix": mine, "output_prefix": f"s3://{A_BUCKET}/out/"}, 403, "s3_not_granted"),
        ({"input_prefix": f"s3://{A_BUCKET}/in/", "output_prefix": f"s3://{A_BUCKET}/out/",
          "source_profile": "a-scans"}, 422, "unknown_source_profile"),
        ({"input_prefix": f"s3://{BUCKET.upper()}/grants/", "output_prefix": out}, 422, "invalid_prefix"),
        ({"input_prefix": f"s3://{B_BUCKET}/in/../../{BUCKET}/", "output_prefix": out}, 422, "invalid_prefix"),
    ]


def test_another_tenants_storage_bucket_and_grants_are_refused(stack, s3, victim):
    b = stack.client(KEY_B)
    before = {bucket: snapshot(s3, bucket) for bucket in (BUCKET, A_BUCKET)}
    jobs_before = counts(stack, "tenant-b")
    for body, status, code in job_attacks(victim):
        response = b.post("/jobs", json=body)
        assert (response.status_code, response.json()["code"]) == (status, code), (body, response.text)
    for body, status, code in batch_attacks(victim):
        response = b.post("/batches", json=body)
        assert (response.status_code, response.json()["code"]) == (status, code), (body, response.text)
    assert counts(stack, "tenant-b") == jobs_before
    assert {bucket: snapshot(s3, bucket) for bucket in (BUCKET, A_BUCKET)} == before


def test_brackets_in_any_location_field_are_a_4xx_not_a_500(stack):
    """urlparse reads '[' or ']' in a host as a broken IPv6 literal; a fuzzer found POST /batches answering 500."""
    b = stack.client(KEY_B)
    out = f"s3://{B_BUCKET}/out/"
    for bad in ("s3://b[", "s3://[bucket/x", "s3://buck]et/x/", "s3://[::1]/x/", "s3://ocrq-b[/in/"):
        for body in ({"input_prefix": bad, "output_prefix": out}, {"input_prefix": f"s3://{B_BUCKET}/in/",
                                                                    "output_prefix": bad}):
            response = b.post("/batches", json=body)
            assert (response.status_code, response.json()["code"]) == (422, "invalid_prefix"), (body, response.text)
        response = b.post("/jobs", json={"s3_uri": bad + "k.png"})
        assert response.status_code == 422, (bad, response.text)
    # A bracket inside a key is an ordinary S3 key character: the grant decides, as for any other key.
    response = b.post("/jobs", json={"s3_uri": f"s3://{A_BUCKET}/in/[x].png"})
    assert (response.status_code, response.json()["code"]) == (403, "s3_not_granted"), response.text


def test_the_refusal_is_the_same_whether_the_bucket_exists(stack):
    b = stack.client(KEY_B)
    absent = f"ocrq-a-{uuid.uuid4().hex[:8]}"
    real = b.post("/jobs", json={"s3_uri": f"s3://{A_BUCKET}/in/secret.png"})
    missing = b.post("/jobs", json={"s3_uri": f"s3://{absent}/in/secret.png"})
    assert real.status_code == missing.status_code == 403
    assert real.text.replace(A_BUCKET, "X") == missing.text.replace(absent, "X")


def test_a_tenant_reads_and_writes_through_its_own_grant(stack, s3):
    a = stack.client(KEY_A)
    job = a.post("/jobs", json={"s3_uri": f"s3://{A_BUCKET}/in/secret.png", "output": "text"})
    assert job.status_code == 202, job.text
    assert wait_for_job(a, job.json()["id"])["status"] == "succeeded"
    with stack.services.db.session() as session:
        assert session.get(Job, job.json()["id"]).source_profile == "a-scans"
    # a-scans may write only under out/: a batch writing anywhere else in A's own bucket is refused too.
    elsewhere = a.post("/batches", json={"input_prefix": f"s3://{A_BUCKET}/in/", "output_prefix": f"s3://{A_BUCKET}/x/"})
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (403, "s3_not_granted"), elsewhere.text
    batch = a.post("/batches", json={"input_prefix": f"s3://{A_BUCKET}/in/", "output_prefix": f"s3://{A_BUCKET}/out/",
                                     "output": "text"})
    assert batch.status_code == 202, batch.text
    done = wait_for_batch(a, batch.json()["id"], timeout=120)
    assert (done["status"], done["succeeded"], done["source_profile"]) == ("completed", 1, "a-scans"), done
    assert "classified" in read_object(s3.client(), f"s3://{A_BUCKET}/out/secret.png.txt")


def test_a_corrupt_image_fails_with_a_reason_that_names_no_worker_path(stack, s3):
    # A PNG signature and then no IHDR: PIL's message for this names the file it was given.
    s3.client().put_object(Bucket=B_BUCKET, Key="in/broken.png", Body=b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDX" + bytes(30))
    b = stack.client(KEY_B)
    job_id = b.post("/jobs", json={"s3_uri": f"s3://{B_BUCKET}/in/broken.png"}).json()["id"]
    job = wait_for_job(b, job_id)
    assert job["status"] == "failed"
    assert job["error"] == "The PNG image cannot be decoded: it is not a readable PNG file", job["error"]


def test_the_storage_bucket_cannot_be_granted():
    for entry in (BUCKET, f"{BUCKET}/tenants/", BUCKET.upper()):
        with pytest.raises(ValidationError, match="names the storage bucket"):
            Settings(home="/nonexistent", storage_url=f"s3://{BUCKET}",
                     s3_source_profiles={"x": S3SourceProfile(tenants=["*"], read=[entry])})


def test_a_profile_removed_after_submit_is_no_grant_at_work_time():
    """A job or batch keeps the name of the grant it was accepted under; the worker checks it again. A profile
    gone from the settings since, or closed to the tenant, is a refused grant with a reason, not a crash."""
    from common.tenancy.s3_grants import NotGranted, S3Clients, S3Location

    settings = Settings(s3_source_profiles={"b-scans": GRANTS["b-scans"]}, storage_url=STORAGE)
    clients = S3Clients(settings)
    access = [("read", S3Location.parse(f"s3://{A_BUCKET}/in/secret.png"))]
    for tenant, profile in (("tenant-a", "a-scans"), ("tenant-a", "b-scans")):
        with pytest.raises(NotGranted, match=f"no S3 grant lets this tenant read from s3://{A_BUCKET}/in/secret.png"):
            clients.granted(tenant_id=tenant, access=access, profile=profile)
