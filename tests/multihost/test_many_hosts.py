"""ocrq spread over four hosts that share nothing but a network (tests/multihost/cluster.py): uploads, s3_uri jobs,
a batch, webhooks and priority lanes through two API processes and two worker hosts; /readyz and /metrics from the
API host; an API process killed mid-upload; a whole worker host killed, and its pages read on the other."""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest

from tests.batches.support import word_for, word_image
from tests.conftest import KEY_B
from tests.multihost import cluster as hosts_cluster
from tests.support import hosts
from tests.support.stack import TERMINAL

if reason := hosts.available():
    pytest.skip(f"cannot build hosts from namespaces here: {reason}", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with ExitStack() as stack:
        yield hosts_cluster.build(tmp_path_factory.mktemp("many-hosts"), stack)


@pytest.fixture(scope="module")
def receiver(cluster):
    with ExitStack() as stack:
        yield hosts_cluster.start_receiver(cluster, stack)


def wait_job(client, job_id: str, *, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/jobs/{job_id}").json()
        if body["status"] in TERMINAL:
            return body
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} still {body['status']} after {timeout}s")


def test_both_api_processes_are_ready_and_take_uploads_that_both_worker_hosts_read(cluster):
    for url in cluster.api_urls:
        with cluster.client() as client:
            client.base_url = url
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
    jobs = []
    for n in range(4):
        with cluster.client(api=n % 2) as client:
            reply = client.post("/jobs", files={"file": (f"w{n}.png", word_image(word_for(n)))},
                                data={"output": "text"})
            assert reply.status_code == 202, reply.text
            jobs.append(reply.json()["id"])
    with cluster.client() as client:
        for n, job_id in enumerate(jobs):
            assert wait_job(client, job_id)["status"] == "succeeded"
            assert word_for(n) in client.get(f"/jobs/{job_id}/result", follow_redirects=True).text
