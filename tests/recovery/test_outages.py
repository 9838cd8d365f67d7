"""Postgres, Redis and S3 outages on a private stack the test restarts: the API answers 503 with Retry-After
and a code, never 500, /readyz names what is down, and every job submitted around the outage finishes."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from sqlalchemy import func, select

from common import migrate
from common.jobs.models import Page
from tests.batches.support import word_for, word_image
from tests.conftest import KEY_A, make_settings
from tests.support.servers import PostgresServer, RedisServer
from tests.support.stack import TERMINAL, Stack, wait_until

TIMERS = {"stale_requeue_after_s": 3, "sweep_interval_s": 2, "outage_retry_after_s": 2, "engine_outage_retry_s": 1,
          "idempotency_wait_s": 0.5}


@pytest.fixture(scope="module")
def private(tmp_path_factory, s3):
    """A worker with the sweepers' schedule on a Postgres and a Redis of this module's own."""
    # Commits waited for: the outage may start right after a job was answered 202, and a kill must not lose it
    # (the private server's default, synchronous_commit off, would drop the last commits).
    with PostgresServer(options={"synchronous_commit": "on"}) as pg, RedisServer() as rd:
        migrate.upgrade(pg.url)
        settings = make_settings(home=tmp_path_factory.mktemp("outage-home"), pg_url=pg.url, redis_url=rd.url,
                                 s3=s3, **TIMERS)
        with Stack(settings, logs=tmp_path_factory.mktemp("outage-logs")) as stack:
            stack.start_worker("--beat")
            yield stack, pg, rd


def submit(client, word: str):
    return client.post("/jobs", files={"file": (f"{word}.png", word_image(word))}, data={"output": "text"})


def assert_unavailable(response, what: str) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["code"] == f"{what}_unavailable"
    assert int(response.headers["Retry-After"]) >= 1


def test_unreachable_dependencies_answer_503_and_readyz_names_them(private, tmp_path, s3):
    stack, pg, _ = private
    client = stack.client(KEY_A)
    pg.stop()
    try:
        assert_unavailable(submit(client, "down"), "database")
        assert_unavailable(client.get(f"/jobs/{uuid.uuid4().hex}"), "database")
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["down"] == ["database"]
    finally:
        pg.start()
    assert submit(client, "back").status_code == 202

    unreachable = {"s3_endpoint_url": "http://127.0.0.1:9", "broker_url": "redis://127.0.0.1:9/0"}
    with Stack(stack.settings.model_copy(update=unreachable), logs=tmp_path) as cut_off:
        other = cut_off.client(KEY_A)
        assert_unavailable(submit(other, "nostore"), "storage")
        assert set(other.get("/readyz").json()["down"]) == {"broker", "storage"}


def finished(client, job_id: str) -> dict | None:
    """The job once it has finished; None meanwhile, and while the database is still coming back (503)."""
    response = client.get(f"/jobs/{job_id}")
    assert response.status_code in (200, 503), response.text
    body = response.json()
    return body if response.status_code == 200 and body["status"] in TERMINAL else None


def run_through(stack, outage, *, jobs: int) -> list[int]:
    """Submit jobs from a thread while `outage` runs; every answer is 202 or 503, and every job finishes."""
    client, accepted, statuses = stack.client(KEY_A), [], []
    words = [word_for(100 + n) for n in range(jobs)]

    def keep_submitting():
        for word in words:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                response = submit(client, word)
                statuses.append(response.status_code)
                if response.status_code == 202:
                    accepted.append((word, response.json()["id"]))
                    break
                assert response.status_code == 503, response.text
                time.sleep(float(response.headers["Retry-After"]) / 4)
            time.sleep(0.3)

    sender = threading.Thread(target=keep_submitting)
    sender.start()
    # Half the jobs in before the outage (their messages and rows are what it may lose), the rest across it.
    wait_until(lambda: len(accepted) >= jobs // 2 or not sender.is_alive(), timeout=60,
               what=f"{jobs // 2} jobs accepted before the outage")
    outage()
    sender.join(timeout=120)
    assert set(statuses) <= {202, 503}, statuses
    assert len(accepted) == jobs, statuses
    for word, job_id in accepted:
        body = wait_until(lambda job_id=job_id: finished(client, job_id), timeout=90, what=f"job {job_id} finished")
        assert body["status"] == "succeeded", body
        assert word in client.get(f"/jobs/{job_id}/result").text
    with stack.services.db.session() as session:
        ids = [job_id for _, job_id in accepted]
        assert session.scalar(select(func.count()).where(Page.job_id.in_(ids), Page.status == "succeeded")) == jobs
    return statuses


def test_postgres_restarted_mid_run_no_500_and_every_job_finishes(private):
    stack, pg, _ = private
    statuses = run_through(stack, lambda: (pg.stop(hard=True), time.sleep(3), pg.start()), jobs=6)
    assert 503 in statuses, "no request landed in the outage"


def test_redis_restarted_empty_mid_run_every_job_finishes(private):
    stack, _, rd = private
    run_through(stack, lambda: rd.restart(keep_data=False), jobs=6)
