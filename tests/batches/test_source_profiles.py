"""Named S3 source profiles: a batch reads and writes with its profile's credentials, never the service's."""

from __future__ import annotations

import json

import pytest

from common.settings import S3SourceProfile
from tests.batches.support import new_bucket, read_manifest, read_object, upload, wait_for_batch, word_for, word_image
from tests.conftest import KEY_A, make_settings
from tests.support import seaweed
from tests.support.stack import Stack

PROFILES = {"archive": S3SourceProfile(tenants=["tenant-a"], read=["b6-*"], write=["b6-*"],
                                       access_key_id=seaweed.ACCESS_KEY, secret_access_key=seaweed.SECRET_KEY)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("profiles"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             s3_source_profiles=PROFILES)
    # The worker's own S3 credentials are refused by the server: only the profile can read the bucket.
    worker_env = {"OCRQ_S3_SOURCE_PROFILES": json.dumps({k: v.model_dump() for k, v in PROFILES.items()}),
                  "OCRQ_S3_ACCESS_KEY_ID": "not-a-key", "OCRQ_S3_SECRET_ACCESS_KEY": "not-a-secret"}
    with Stack(settings, logs=tmp_path_factory.mktemp("profiles-logs")) as running:
        running.start_worker(extra_env=worker_env)
        yield running


def test_a_batch_reads_and_writes_with_its_profile(stack, s3):
    client, out = stack.client(KEY_A), s3.client()
    bucket = new_bucket(out)
    upload(out, bucket, {f"in/{n}.png": word_image(word_for(n)) for n in range(2)})
    body = {"input_prefix": f"s3://{bucket}/in/", "output_prefix": f"s3://{bucket}/out/"}

    batch_id = client.post("/batches", json=body | {"source_profile": "archive"}).json()["id"]
    with_profile = wait_for_batch(client, batch_id, timeout=240)
    assert (with_profile["status"], with_profile["succeeded"]) == ("completed", 2), with_profile
    assert with_profile["source_profile"] == "archive"
    assert word_for(1) in read_object(out, f"s3://{bucket}/out/1.png.md")
    assert len(read_manifest(out, with_profile["manifest"])) == 2

    # Naming no profile, the batch gets the one grant that allows it, and still never the service's credentials.
    without = wait_for_batch(client, client.post("/batches", json=body | {"output_prefix": f"s3://{bucket}/o2/"})
                             .json()["id"], timeout=120)
    assert (without["status"], without["succeeded"], without["source_profile"]) == ("completed", 2, "archive")
