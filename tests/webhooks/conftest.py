"""A real receiver on loopback, a webhook worker with a compressed schedule, and helpers to make events."""

from __future__ import annotations

import time
import uuid

import pytest

from common.jobs.models import Job
from common.orm import utcnow
from common.queue.names import WEBHOOK_QUEUE
from common.webhooks import service as webhooks
from tests.support import webhook_receiver

TIMEOUT_S = 1.5
SCHEDULE_S = (0, 0.2, 0.2)
# What the webhook worker runs with: 3 tries, 0.2 s apart, and a 1.5 s request timeout.
WORKER_ENV = {"OCRQ_WEBHOOK_TIMEOUT_S": str(TIMEOUT_S),
              "OCRQ_WEBHOOK_RETRY_SCHEDULE_S": ",".join(str(s) for s in SCHEDULE_S)}


@pytest.fixture(scope="module")
def receiver(client, other_client):
    server = webhook_receiver.start()
    server.secrets = [client.get("/webhooks/secret").json()["secret"]]
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def webhook_worker(stack):
    worker = stack.start_worker("--queues", WEBHOOK_QUEUE, extra_env=WORKER_ENV)
    yield worker
    worker.stop()


@pytest.fixture(scope="module")
def client(stack):
    from tests.conftest import KEY_A

    return stack.client(KEY_A)


@pytest.fixture(scope="module")
def other_client(stack):
    from tests.conftest import KEY_B

    return stack.client(KEY_B)


def new_path() -> str:
    return f"/hook/{uuid.uuid4().hex[:12]}"


def finished_job(stack, *, url: str, status: str = "succeeded", tenant: str = "tenant-a", **fields) -> str:
    """A job row that has just ended, as the worker leaves it, with its webhook URL."""
    job = Job(tenant_id=tenant, source_kind="upload", source_uri="upload://x", status=status, webhook_url=url,
              pages_total=1, pages_done=1, finished_at=utcnow(), **fields)
    with stack.services.db.session() as session:
        session.add(job)
    return job.id


def notify(stack, job_id: str) -> str | None:
    """The job.<status> event of a job that ended, recorded and sent as the end of a job does."""
    svc = stack.services
    return webhooks.notify_job_ended(db=svc.db, celery=svc.celery, settings=stack.settings, job_id=job_id)


def wait_for_deliveries(client, job_id: str, *, until=("delivered", "failed"), count: int = 1,
                        timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/jobs/{job_id}/webhooks")
        assert response.status_code == 200, response.text
        deliveries = response.json()["deliveries"]
        if len(deliveries) >= count and all(d["status"] in until for d in deliveries):
            return deliveries
        time.sleep(0.1)
    raise AssertionError(f"deliveries of {job_id} not {until} after {timeout}s: {deliveries}")
