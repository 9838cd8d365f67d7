"""Requests per second per tenant: 429 with Retry-After, kept in Redis and shared by every API process."""

from __future__ import annotations

import time
import uuid

import pytest
import redis
from PIL import Image

from api.app import create_app
from common.settings import Settings
from common.tenancy.rate_limit import LocalRateLimiter, NoLimit, RedisRateLimiter, make_rate_limiter
from ocrq.client import Client
from tests.conftest import KEY_A, KEY_B, make_settings
from tests.support.live_server import live_server
from tests.support.stack import Stack

# A token refills in 4 s, so a loaded machine's slow requests do not refill the bucket between two checks.
RPS, BURST = 0.25, 3
MISSING = "/jobs/0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def limited(tmp_path_factory, pg_url, redis_url, s3):
    """Two API instances (no worker) with one limit, as two processes behind a load balancer would be."""
    settings = make_settings(home=tmp_path_factory.mktemp("limited"), pg_url=pg_url, redis_url=redis_url, s3=s3,
                             rate_limit_rps=RPS, rate_limit_burst=BURST)
    logs = tmp_path_factory.mktemp("limited-logs")
    with Stack(settings, logs=logs) as first, Stack(settings, logs=logs) as second:
        yield first, second


def exhaust(client) -> tuple[int, object]:
    """Send requests until one is refused; returns how many went through and the refusal."""
    for sent in range(BURST * 4):
        response = client.get(MISSING)
        if response.status_code == 429:
            return sent, response
        assert response.status_code == 404, response.text
    raise AssertionError(f"no 429 after {BURST * 4} requests at a limit of {RPS}/s with a burst of {BURST}")


def test_over_the_limit_is_429_with_retry_after_then_requests_pass_again(limited):
    first, second = limited
    client = first.client(KEY_A)
    passed, refused = exhaust(client)
    assert passed >= BURST - 1  # the burst, less any token a slow request let refill
    retry_after = refused.headers["retry-after"]
    assert retry_after.isdigit() and 1 <= int(retry_after) <= 1 / RPS
    assert refused.json()["detail"]

    assert second.client(KEY_A).get(MISSING).status_code == 429  # another API process sees the same bucket
    assert first.client(KEY_B).get(MISSING).status_code == 404  # another tenant has its own

    time.sleep(int(retry_after))
    assert client.get(MISSING).status_code == 404


def test_the_bucket_lives_in_redis(limited, redis_url):
    first, _ = limited
    first.client(KEY_A).get(MISSING)
    key = f"{first.settings.broker_key_prefix}ocrq:ratelimit:tenant-a"
    assert redis.Redis.from_url(redis_url).pttl(key) > 0


def test_redis_out_of_reach_lets_requests_through_quickly(tmp_path):
    limiter = make_rate_limiter(Settings(home=tmp_path, broker_url="redis://127.0.0.1:1/0", rate_limit_rps=1,
                                         rate_limit_burst=1))
    started = time.monotonic()
    assert all(limiter.hit("t").allowed for _ in range(20))
    assert time.monotonic() - started < 2


def test_the_embedded_default_limits_in_process(tmp_path):
    embedded = Settings(home=tmp_path, rate_limit_rps=1, rate_limit_burst=2)
    limiter = make_rate_limiter(embedded)
    assert isinstance(limiter, LocalRateLimiter)
    decisions = [limiter.hit("t") for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    assert 0 < decisions[-1].retry_after_s <= 1
    assert limiter.hit("other").allowed
    assert isinstance(make_rate_limiter(Settings(home=tmp_path, rate_limit_rps=0)), NoLimit)


def test_a_redis_broker_gets_the_redis_limiter(tmp_path, redis_url):
    limiter = make_rate_limiter(Settings(home=tmp_path, broker_url=redis_url, broker_key_prefix=uuid.uuid4().hex))
    try:
        assert isinstance(limiter, RedisRateLimiter)
    finally:
        limiter.close()


def test_the_client_waits_out_a_429_and_resends_the_whole_file(tmp_path, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3,
                             storage_url="s3://ocrq-test/cli-limited", rate_limit_rps=1, rate_limit_burst=1)
    document = tmp_path / "page.png"
    Image.new("RGB", (48, 24), "white").save(document)
    with live_server(create_app(settings)) as url:
        with Client(url, KEY_A) as client:
            started = time.monotonic()
            jobs = [client.submit(document, output="text") for _ in range(2)]
            assert time.monotonic() - started >= 0.5  # the second was refused once and sent again
    assert all(job.status == "queued" for job in jobs) and jobs[0].id != jobs[1].id
