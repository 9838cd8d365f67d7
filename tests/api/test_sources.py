"""Jobs whose document the service fetches: source_url over HTTP (SSRF-guarded) and s3_uri."""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import USER_BUCKET
from tests.support.stack import wait_for_job
from tests.support.text import word_recall


@pytest.fixture(scope="module")
def file_server(samples):
    handler = partial(SimpleHTTPRequestHandler, directory=str(samples))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_source_url_is_fetched_by_the_worker(client, file_server, samples):
    response = client.post("/jobs", json={"source_url": f"{file_server}/linn.png", "output": "text"})
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["status"] == "succeeded" and job["source"] == "url"
    text = client.get(f"/jobs/{job['id']}/result").text
    assert word_recall((samples / "linn.txt").read_text(), text) > 0.9


def test_source_url_that_fails_ends_the_job_with_a_reason(client, file_server):
    job_id = client.post("/jobs", json={"source_url": f"{file_server}/missing.png"}).json()["id"]
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed"
    assert "404" in job["error"]


def test_s3_uri_is_read_from_the_bucket(client, s3, samples):
    s3.client().put_object(Bucket=USER_BUCKET, Key="inbox/typewriter.png", Body=(samples / "typewriter.png").read_bytes())
    response = client.post("/jobs", json={"s3_uri": f"s3://{USER_BUCKET}/inbox/typewriter.png", "output": "json"})
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["status"] == "succeeded" and job["source"] == "s3"
    pages = client.get(f"/jobs/{job['id']}/result").json()["pages"]
    assert len(pages) == 1 and len(pages[0]["text"].split()) > 20
