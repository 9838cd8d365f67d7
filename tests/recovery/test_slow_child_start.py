"""A pool child slower to start than Celery's 4 s default (its engine loading on a busy host) is not killed
and replaced over and over: after its first child dies, the worker still reads pages. The soak
(bench/soak.py) found workers stuck that way, beating and holding a page while reading nothing."""

from __future__ import annotations

import os
import signal

from tests.batches.support import word_image
from tests.conftest import KEY_A, make_settings
from tests.support.stack import Stack, children, wait_for_job, wait_until


def test_a_pool_child_that_starts_slowly_is_kept_and_reads_pages(tmp_path_factory, pg_url, redis_url, s3):
    settings = make_settings(home=tmp_path_factory.mktemp("slow-home"), pg_url=pg_url, redis_url=redis_url, s3=s3)
    with Stack(settings, logs=tmp_path_factory.mktemp("slow-logs")) as stack:
        # Celery times only the children it forks to replace one that died: kill the first, then submit.
        worker = stack.start_worker(module="tests.support.slow_start_worker",
                                    extra_env={"OCRQ_TEST_CHILD_START_DELAY_S": "7"})
        (child,) = wait_until(lambda: children(worker.process.pid), timeout=30, what="the pool child")
        os.kill(child, signal.SIGKILL)
        client = stack.client(KEY_A)
        job_id = client.post("/jobs", files={"file": ("slow.png", word_image("slowstart"))},
                             data={"output": "text"}).json()["id"]
        assert wait_for_job(client, job_id, timeout=90)["status"] == "succeeded"
        assert "slowstart" in client.get(f"/jobs/{job_id}/result").text
    assert b"Timed out waiting for UP message" not in worker.log.read_bytes()
