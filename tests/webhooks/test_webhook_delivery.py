"""Webhook deliveries end to end: a real worker on the webhook queue POSTs to a real receiver on loopback."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from common.jobs.models import Job
from common.orm import utcnow
from common.webhooks import service as webhooks
from common.webhooks.models import WebhookAttempt, WebhookDelivery
from common.webhooks.signing import new_secret
from tests.support.stack import wait_for_job
from tests.support.webhook_receiver import fail, slow
from tests.webhooks.conftest import TIMEOUT_S, finished_job, new_path, notify, wait_for_deliveries
from worker.context import WorkerContext
from worker.webhooks import delivery as webhook_delivery
from worker.webhooks import sweeper as webhook_sweeper

pytestmark = pytest.mark.usefixtures("webhook_worker")


def outcomes(delivery: dict) -> list[tuple[int | None, str]]:
    return [(a["status_code"], a["outcome"]) for a in delivery["attempts"]]


def events_for(receiver, job_id: str) -> int:
    """Entries of the receiver's dedupe table that are about this job."""
    return sum(json.loads(body)["data"]["id"] == job_id for body in receiver.dedupe.values())


def test_job_success_sends_one_small_signed_event(client, other_client, receiver, samples):
    path = new_path()
    response = client.post("/jobs", files={"file": ("linn.png", (samples / "linn.png").read_bytes())},
                           data={"webhook_url": receiver.url + path, "metadata": json.dumps({"invoice": 42})})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert wait_for_job(client, job_id)["status"] == "succeeded"

    (delivery,) = wait_for_deliveries(client, job_id)
    assert (delivery["event_type"], delivery["status"]) == ("job.succeeded", "delivered")
    assert outcomes(delivery) == [(204, "delivered")] and delivery["attempts"][0]["latency_ms"] >= 0
    (got,) = receiver.to(path)
    assert got.verified and got.headers["webhook-id"] == delivery["webhook_id"]
    event = json.loads(got.body)
    assert event["type"] == "job.succeeded"
    data = event["data"]
    assert (data["id"], data["status"], data["metadata"]) == (job_id, "succeeded", {"invoice": 42})
    assert (data["pages_total"], data["pages_done"], data["pages_failed"]) == (1, 1, 0)
    assert data["links"]["result"].endswith(f"/jobs/{job_id}/result")
    # Never the text itself.
    assert b"LinnSequencer" not in got.body and len(got.body) < 1500
    assert other_client.get(f"/jobs/{job_id}/webhooks").status_code == 404


def test_job_failure_sends_job_failed(client, receiver):
    path = new_path()
    response = client.post("/jobs", json={"source_url": f"{receiver.url}/missing.png",
                                          "webhook_url": receiver.url + path})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert wait_for_job(client, job_id, timeout=60)["status"] == "failed"

    (delivery,) = wait_for_deliveries(client, job_id)
    assert (delivery["event_type"], delivery["status"]) == ("job.failed", "delivered")
    data = json.loads(receiver.to(path)[0].body)["data"]
    assert data["status"] == "failed" and "404" in data["error"]
    assert "result" not in data["links"]


def test_cancel_sends_job_canceled_once(client, stack, receiver):
    path = new_path()
    job = Job(tenant_id="tenant-a", source_kind="upload", source_uri="upload://x", status="queued",
              webhook_url=receiver.url + path)
    with stack.services.db.session() as session:
        session.add(job)
    assert client.delete(f"/jobs/{job.id}").json()["status"] == "canceled"
    assert client.delete(f"/jobs/{job.id}").json()["status"] == "canceled"

    (delivery,) = wait_for_deliveries(client, job.id)
    assert (delivery["event_type"], delivery["status"]) == ("job.canceled", "delivered")
    assert len(receiver.to(path)) == 1


def test_500_is_retried_after_its_retry_after(client, stack, receiver):
    path = new_path()
    job_id = finished_job(stack, url=receiver.plan(path, fail(500, Retry_After="1")))
    notify(stack, job_id)

    (delivery,) = wait_for_deliveries(client, job_id)
    assert delivery["status"] == "delivered"
    assert outcomes(delivery) == [(500, "retry"), (204, "delivered")]
    first, second = receiver.to(path)
    # The schedule alone would wait about 0.2 s.
    assert second.at - first.at >= 1.0
    assert first.headers["webhook-id"] == second.headers["webhook-id"] and first.body == second.body
    assert events_for(receiver, job_id) == 1


def test_timeout_is_retried_with_the_same_id(client, stack, receiver):
    path = new_path()
    job_id = finished_job(stack, url=receiver.plan(path, slow(TIMEOUT_S + 1.5)))
    notify(stack, job_id)

    (delivery,) = wait_for_deliveries(client, job_id)
    assert delivery["status"] == "delivered"
    assert outcomes(delivery) == [(None, "retry"), (204, "delivered")]
    assert "timed out" in delivery["attempts"][0]["error"]
    first, second = receiver.wait_for(path, 2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    # Both copies were processed by the receiver, yet its table holds the event once.
    assert events_for(receiver, job_id) == 1


def test_after_the_last_try_the_delivery_fails(client, stack, receiver):
    path = new_path()
    job_id = finished_job(stack, url=receiver.plan(path, fail(503), fail(503), fail(503), fail(503)))
    notify(stack, job_id)

    (delivery,) = wait_for_deliveries(client, job_id)
    assert delivery["status"] == "failed" and "last try" in delivery["last_error"]
    assert outcomes(delivery) == [(503, "retry")] * 3
    assert len(receiver.to(path)) == 3 and events_for(receiver, job_id) == 0


def test_410_disables_the_url_for_that_tenant_until_a_redelivery(client, other_client, stack, receiver):
    path = new_path()
    url = receiver.plan(path, fail(410))
    first = finished_job(stack, url=url)
    notify(stack, first)
    (gone,) = wait_for_deliveries(client, first)
    assert gone["status"] == "failed" and outcomes(gone) == [(410, "disable")]

    second = finished_job(stack, url=url)
    notify(stack, second)
    (skipped,) = wait_for_deliveries(client, second)
    assert skipped["status"] == "failed" and "410" in skipped["attempts"][0]["error"]
    assert len(receiver.to(path)) == 1

    receiver.secrets.append(other_client.get("/webhooks/secret").json()["secret"])
    elsewhere = finished_job(stack, url=url, tenant="tenant-b")
    notify(stack, elsewhere)
    assert wait_for_deliveries(other_client, elsewhere)[0]["status"] == "delivered"

    assert other_client.post(f"/webhooks/{skipped['id']}/redeliver").status_code == 404
    assert client.post(f"/webhooks/{skipped['id']}/redeliver").status_code == 202
    (again,) = wait_for_deliveries(client, second)
    assert again["status"] == "delivered" and again["attempts"][-1]["status_code"] == 204
    assert events_for(receiver, second) == 1


def test_redelivery_reuses_the_webhook_id(client, stack, receiver):
    path = new_path()
    job_id = finished_job(stack, url=receiver.url + path)
    notify(stack, job_id)
    assert notify(stack, job_id) is None  # the event is recorded once however often the job end is reported
    (delivery,) = wait_for_deliveries(client, job_id)
    assert delivery["status"] == "delivered"

    response = client.post(f"/webhooks/{delivery['id']}/redeliver")
    assert response.status_code == 202 and response.json()["webhook_id"] == delivery["webhook_id"]
    first, second = receiver.wait_for(path, 2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery["webhook_id"]
    assert first.body == second.body
    assert events_for(receiver, job_id) == 1
    (after,) = wait_for_deliveries(client, job_id)
    assert outcomes(after) == [(204, "delivered"), (204, "delivered")]


def test_rotation_signs_with_both_secrets(client, other_client, stack, receiver):
    old = other_client.get("/webhooks/secret").json()["secret"]
    rotated = other_client.post("/webhooks/secret/rotate").json()
    new = rotated["secret"]
    assert new.startswith("whsec_") and new != old and rotated["previous"] == old
    assert other_client.get("/webhooks/secret").json()["secret"] == new
    receiver.secrets.append(new)

    path = new_path()
    job_id = finished_job(stack, url=receiver.url + path, tenant="tenant-b")
    notify(stack, job_id)
    assert wait_for_deliveries(other_client, job_id)[0]["status"] == "delivered"
    (got,) = receiver.to(path)
    assert len(got.headers["webhook-signature"].split()) == 2
    assert Webhook(old).verify(got.body, got.headers)["data"]["id"] == job_id
    assert Webhook(new).verify(got.body, got.headers)["data"]["id"] == job_id
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(got.body.replace(b"succeeded", b"failed"), got.headers)


@pytest.mark.parametrize(("allowlist", "host", "reason"), [
    ([], None, "loopback"),
    (["127.0.0.1/32"], "http://169.254.169.254/latest/meta-data/", "link-local"),
])
def test_refused_url_fails_at_send_time_without_traffic(stack, receiver, allowlist, host, reason):
    path = new_path()
    url = host or receiver.url + path
    with stack.services.db.session() as session:
        delivery_id = webhooks.record_event(session, tenant_id="tenant-a", url=url, event_type="job.succeeded",
                                            data={"id": "not-a-job"})
    ctx = WorkerContext(app=stack.services.celery,
                        settings=stack.settings.model_copy(update={"net_allowlist": allowlist}))
    try:
        assert webhook_delivery.deliver(ctx, delivery_id=delivery_id) == "failed"
    finally:
        ctx.close()
    with stack.services.db.session() as session:
        (attempt,) = session.scalars(select(WebhookAttempt).where(WebhookAttempt.delivery_id == delivery_id))
        status = session.get(WebhookDelivery, delivery_id).status
    assert status == "failed" and attempt.error.startswith("refused:") and reason in attempt.error
    assert receiver.to(path) == []


def test_sweeper_republishes_lost_and_long_delayed_deliveries(client, stack, receiver):
    paths = [new_path(), new_path()]
    jobs = [finished_job(stack, url=receiver.url + path) for path in paths]
    with stack.services.db.session() as session:
        ids = [webhooks.record_event(session, tenant_id="tenant-a", url=receiver.url + path,
                                     event_type="job.succeeded", data={"id": job_id}, job_id=job_id)
               for path, job_id in zip(paths, jobs)]
    ctx = WorkerContext(app=stack.services.celery, settings=stack.settings)
    try:
        before = _published_at(stack, ids)
        webhook_sweeper.republish_due(ctx)
        assert _published_at(stack, ids) == before, "published just now: not the sweeper's to send yet"
        with stack.services.db.session() as session:
            # One message lost an hour ago, one retry too long for a countdown (never published).
            session.execute(update(WebhookDelivery).where(WebhookDelivery.id == ids[0])
                            .values(published_at=utcnow() - timedelta(hours=1)))
            session.execute(update(WebhookDelivery).where(WebhookDelivery.id == ids[1]).values(published_at=None))
        assert webhook_sweeper.republish_due(ctx) >= 2
    finally:
        ctx.close()
    for path, job_id in zip(paths, jobs):
        assert wait_for_deliveries(client, job_id)[0]["status"] == "delivered"
        assert len(receiver.to(path)) == 1


def _published_at(stack, ids: list[str]) -> list:
    with stack.services.db.session() as session:
        return [session.get(WebhookDelivery, delivery_id).published_at for delivery_id in ids]
