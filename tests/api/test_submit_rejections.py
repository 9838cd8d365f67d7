"""Bad submissions get a clear 4xx; nothing is stored and no task is published."""

from __future__ import annotations

import io

import pytest
import redis
from PIL import Image
from sqlalchemy import func, select

from common.jobs.models import Job
from tests.conftest import KEY_A, make_settings
from tests.support.stack import Stack


@pytest.fixture(scope="module")
def idle(tmp_path_factory, pg_url, redis_url, s3):
    """A stack with no worker and its own queue prefix, so any published task would stay visible."""
    settings = make_settings(home=tmp_path_factory.mktemp("idle"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             storage_url="s3://ocrq-test/idle-rejections")
    with Stack(settings, logs=tmp_path_factory.mktemp("idle-logs")) as stack:
        yield stack


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), "white").save(buffer, "PNG")
    return buffer.getvalue()


CASES = {
    "corrupt png": (lambda: {"files": {"file": ("a.png", _png()[:40])}}, 422),
    "text named png": (lambda: {"files": {"file": ("a.png", b"hello, this is not an image at all")}}, 415),
    "empty file": (lambda: {"files": {"file": ("a.png", b"")}}, 400),
    "empty body": (lambda: {"content": b"", "headers": {"content-type": "application/json"}}, 422),
    "no content type": (lambda: {"content": b"xx"}, 415),
    "unknown json field": (lambda: {"json": {"source_url": "http://example.com/a.png", "colour": "red"}}, 422),
    "wrong json type": (lambda: {"json": {"source_url": "http://example.com/a.png", "output": 3}}, 422),
    "both sources": (lambda: {"json": {"source_url": "http://example.com/a", "s3_uri": "s3://b/k"}}, 422),
    # Found by bench/fuzz.py: an empty source_url was taken for no source_url and reached the S3 path as None.
    "empty source url": (lambda: {"json": {"source_url": "", "priority": "bulk"}}, 422),
    "neither source": (lambda: {"json": {"output": "text"}}, 422),
    "unknown form field": (lambda: {"files": {"file": ("a.png", _png())}, "data": {"colour": "red"}}, 422),
    "bad output value": (lambda: {"files": {"file": ("a.png", _png())}, "data": {"output": "docx"}}, 422),
    "metadata not json": (lambda: {"files": {"file": ("a.png", _png())}, "data": {"metadata": "{oops"}}, 422),
    "missing file part": (lambda: {"data": {"output": "text"}, "files": {"other": ("a", b"x")}}, 422),
    "page range outside": (lambda: {"files": {"file": ("a.png", _png())}, "data": {"pages": "2-3"}}, 422),
    "malformed range": (lambda: {"files": {"file": ("a.png", _png())}, "data": {"pages": "one"}}, 422),
    "loopback webhook": (lambda: {"files": {"file": ("a.png", _png())},
                                  "data": {"webhook_url": "http://10.0.0.1/hook"}}, 422),
    "metadata source url": (lambda: {"json": {"source_url": "http://169.254.169.254/latest/meta-data"}}, 422),
    "file scheme": (lambda: {"json": {"source_url": "file:///etc/passwd"}}, 422),
    "missing s3 object": (lambda: {"json": {"s3_uri": "s3://ocrq-test-user/no/such/object.png"}}, 422),
    "bucket name s3 refuses": (lambda: {"json": {"s3_uri": "s3://bad bucket!/k.png"}}, 422),
    "upper-case bucket": (lambda: {"json": {"s3_uri": "s3://OCRQ-TEST-USER/k.png"}}, 422),
    "dot-dot key": (lambda: {"json": {"s3_uri": "s3://ocrq-test-user/a/../k.png"}}, 422),
    "ip bucket": (lambda: {"json": {"s3_uri": "s3://127.0.0.1/k.png"}}, 422),
    "s3 uri with query": (lambda: {"json": {"s3_uri": "s3://ocrq-test-user/k.png?versionId=1"}}, 422),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_submission_is_refused_and_leaves_no_trace(idle, case):
    make, status = CASES[case]
    client = idle.client(KEY_A)
    before = _job_count(idle)
    response = client.post("/jobs", **make())
    assert response.status_code == status, response.text
    body = response.json()
    assert body["detail"] and body["code"], body
    assert "/tmp" not in response.text and "Traceback" not in response.text and "Error(" not in response.text
    assert _job_count(idle) == before
    assert _stored(idle) == []
    assert _published(idle) == 0


def test_upload_over_the_limit_is_413(tmp_path_factory, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("small"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             max_upload_bytes=10_000, storage_url="s3://ocrq-test/idle-small")
    with Stack(settings, logs=tmp_path_factory.mktemp("small-logs")) as stack:
        client = stack.client(KEY_A)
        response = client.post("/jobs", files={"file": ("big.png", b"\x89PNG" + b"0" * 200_000)})
        assert response.status_code == 413
        assert response.json()["code"] == "too_large"
        # The limit holds to the byte for the file itself, whatever room the body limit leaves for framing.
        exact = _png_of_size(10_000)
        one_over = client.post("/jobs", files={"file": ("over.png", exact + b"\0")})
        assert one_over.status_code == 413 and one_over.json()["code"] == "too_large", one_over.text
        assert _stored(stack) == []
        at_limit = client.post("/jobs", files={"file": ("exact.png", exact)})
        assert at_limit.status_code == 202, at_limit.text


def _png_of_size(size: int) -> bytes:
    """A valid PNG padded to exactly `size` bytes with an ancillary chunk PNG readers skip."""
    import struct
    import zlib

    base = _png()
    pad = size - len(base) - 12
    chunk = struct.pack(">I", pad) + b"teXt" + b"c" * pad
    chunk += struct.pack(">I", zlib.crc32(chunk[4:]) & 0xFFFFFFFF)
    padded = base[:-12] + chunk + base[-12:]
    assert len(padded) == size
    return padded


def _job_count(stack) -> int:
    with stack.services.db.session() as session:
        return session.scalar(select(func.count()).select_from(Job))


def _stored(stack) -> list[str]:
    storage = stack.services.storage
    listing = storage.client.list_objects_v2(Bucket=storage.bucket, Prefix=storage.prefix)
    return [item["Key"] for item in listing.get("Contents", [])]


def _published(stack) -> int:
    settings = stack.settings
    client = redis.Redis.from_url(settings.broker_url)
    return sum(client.llen(key) for key in client.keys(f"{settings.broker_key_prefix}*")
               if client.type(key) == b"list")
