"""A webhook worker killed with SIGKILL mid-delivery: the receiver still ends with the event exactly once."""

from __future__ import annotations

import json
import time

from common.queue.names import WEBHOOK_QUEUE
from tests.support.webhook_receiver import slow
from tests.webhooks.conftest import WORKER_ENV, finished_job, new_path, notify
from worker.context import WorkerContext
from worker.webhooks import sweeper as webhook_sweeper

# Long enough that the kill lands while the receiver is still working on a busy machine, short enough
# that the dead worker's lease (timeout + 5 s) runs out soon.
TIMEOUT_S = 4.0
ENV = WORKER_ENV | {"OCRQ_WEBHOOK_TIMEOUT_S": str(TIMEOUT_S)}


def test_killed_worker_mid_delivery_still_delivers_exactly_once(stack, client, receiver):
    doomed = stack.start_worker("--queues", WEBHOOK_QUEUE, extra_env=ENV)
    path = new_path()
    # The receiver answers after the kill below, yet within the request timeout.
    job_id = finished_job(stack, url=receiver.plan(path, slow(TIMEOUT_S - 0.5)))
    notify(stack, job_id)
    assert receiver.wait_for(path, 1, timeout=30), "the doomed worker never sent"
    doomed.kill()

    (stuck,) = client.get(f"/jobs/{job_id}/webhooks").json()["deliveries"]
    assert stuck["status"] == "pending" and [a["outcome"] for a in stuck["attempts"]] == ["sending"]

    survivor = stack.start_worker("--queues", WEBHOOK_QUEUE, extra_env=ENV)
    ctx = WorkerContext(app=stack.services.celery, settings=stack.settings)
    try:
        # What the beat entry does every 10 s: once the dead worker's lease runs out, publish the delivery again.
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            webhook_sweeper.republish_due(ctx)
            (delivery,) = client.get(f"/jobs/{job_id}/webhooks").json()["deliveries"]
            if delivery["status"] != "pending":
                break
            time.sleep(0.5)
    finally:
        ctx.close()
        survivor.stop()

    assert delivery["status"] == "delivered", delivery
    assert [(a["outcome"], a["status_code"]) for a in delivery["attempts"]] == [("lost", None), ("delivered", 204)]
    first, second = receiver.to(path)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivery["webhook_id"]
    assert sum(json.loads(body)["data"]["id"] == job_id for body in receiver.dedupe.values()) == 1
