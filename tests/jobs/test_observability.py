"""A real worker with its metrics port and JSON logs on: what it measures and logs about a real page."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import KEY_A, make_settings
from tests.support.servers import free_port
from tests.support.stack import Stack, wait_for_job
from worker.engines.base import EngineError, EngineOverloaded, PageText
from worker.metrics import WorkerMetrics


@pytest.fixture(scope="module")
def observed(tmp_path_factory, pg_url, redis_url, s3):
    port = free_port()
    settings = make_settings(home=tmp_path_factory.mktemp("observed-home"), pg_url=pg_url, redis_url=redis_url,
                             s3=s3, worker_metrics_port=port, log_format="json")
    with Stack(settings, logs=tmp_path_factory.mktemp("observed-logs")) as stack:
        worker = stack.start_worker()
        yield stack, worker, f"http://127.0.0.1:{port}/metrics"


@pytest.fixture(scope="module")
def read_job(observed, samples):
    stack, _, _ = observed
    client = stack.client(KEY_A)
    response = client.post("/jobs", files={"file": ("linn.png", (samples / "linn.png").read_bytes())},
                           data={"priority": "interactive"})
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"], timeout=240)
    assert job["status"] == "succeeded", job
    page = client.get(f"/jobs/{job['id']}/result", params={"format": "json"}).json()["pages"][0]
    return job, page


def samples_of(text: str) -> dict:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_worker_serves_real_observations_of_the_page(observed, read_job):
    _, _, url = observed
    _, page = read_job
    got = samples_of(httpx.get(url, timeout=5).text)

    engine = (("engine", "cpu"),)
    assert got[("ocrq_page_engine_seconds_count", engine)] == 1
    # Wall time around the engine call: at least the engine's own timing of the page, and not wildly more.
    total = got[("ocrq_page_engine_seconds_sum", engine)]
    assert page["seconds"] - 1e-4 <= total < page["seconds"] + 5  # the JSON rounds seconds to 4 places
    assert got[("ocrq_page_engine_seconds_bucket", engine + (("le", "+Inf"),))] == 1
    assert got[("ocrq_page_queue_seconds_count", (("lane", "interactive"),))] == 1
    assert got[("ocrq_pages_processed_total", (("outcome", "succeeded"),))] == 1
    assert not any(name == "ocrq_engine_errors_total" for name, _ in got)


def test_the_api_merges_the_workers_metrics_with_its_own(observed, read_job):
    stack, _, _ = observed
    got = samples_of(stack.client(None).get("/metrics").text)
    assert got[("ocrq_page_engine_seconds_count", (("engine", "cpu"),))] == 1
    assert got[("ocrq_jobs", (("status", "succeeded"),))] >= 1
    assert got[("ocrq_pages", (("status", "succeeded"),))] >= 1
    assert got[("ocrq_pages_per_second", ())] >= 1 / 60
    assert got[("ocrq_queue_depth", (("queue", "ocrq.pages.interactive"),))] == 0
    assert got[("ocrq_oldest_queued_page_seconds", (("lane", "interactive"),))] == 0
    assert got[("ocrq_metrics_source_up", (("source", "database"),))] == 1


def test_every_log_line_about_the_job_names_it_its_page_and_task(observed, read_job):
    _, worker, _ = observed
    job, _ = read_job
    lines = [json.loads(line) for line in worker.log.read_text().splitlines() if line.startswith("{")]
    about_job = [line for line in lines if job["id"] in json.dumps(line)]
    messages = [line["message"] for line in about_job]
    assert "job split into pages" in messages and "page read" in messages
    assert any(m.startswith("job finished") for m in messages)
    for line in about_job:
        assert line["task_id"], line
        if line.get("task") == "ocrq.ocr_page" or line["message"] == "page read":
            assert line["job_id"] == job["id"] and line["page"] == 1, line
    page_read = next(line for line in about_job if line["message"] == "page read")
    assert page_read["task"] == "ocrq.ocr_page" and page_read["level"] == "INFO" and page_read["ts"].endswith("+00:00")


def test_engine_errors_are_counted_by_kind_and_only_reads_are_timed():
    metrics = WorkerMetrics()
    metrics.page_read(engine="vllm", seconds=9.0, result=EngineOverloaded("HTTP 503", kind="overloaded"))
    metrics.page_read(engine="vllm", seconds=9.0, result=EngineError("same line 200 times", kind="repetition"))
    metrics.page_read(engine="vllm", seconds=9.0, result=EngineOverloaded("HTTP 503", kind="overloaded"))
    metrics.page_read(engine="vllm", seconds=0.5, result=PageText(text="x", engine="vllm", model="m", seconds=0.4))
    got = samples_of(generate_latest(metrics.registry).decode())
    assert got[("ocrq_engine_errors_total", (("kind", "overloaded"),))] == 2
    assert got[("ocrq_engine_errors_total", (("kind", "repetition"),))] == 1
    assert got[("ocrq_page_engine_seconds_count", (("engine", "vllm"),))] == 1
    assert got[("ocrq_page_engine_seconds_sum", (("engine", "vllm"),))] == 0.5
