"""GET /metrics: queue depths read from the real broker, vLLM engine state, and sources that are down."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from tests.conftest import make_settings
from tests.support.embedded import free_port

# The shape of vLLM's /metrics (V1 engine, two data-parallel cores), trimmed to a few families.
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="lightonai/LightOnOCR-2-1B"} 3.0
vllm:num_requests_running{engine="1",model_name="lightonai/LightOnOCR-2-1B"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="lightonai/LightOnOCR-2-1B"} 5.0
vllm:num_requests_waiting{engine="1",model_name="lightonai/LightOnOCR-2-1B"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="lightonai/LightOnOCR-2-1B"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="lightonai/LightOnOCR-2-1B"} 0.17
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="lightonai/LightOnOCR-2-1B"} 123456.0
"""


def samples_of(text: str) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_queue_depth_counts_every_ocrq_queue_and_priority_in_redis(stack):
    """A GPU size-bucket queue nobody consumes shows up with its depth, its priority sub-lists included."""
    celery, prefix = stack.services.celery, stack.settings.broker_key_prefix
    queue = "ocrq.gpu.b1024"
    for priority in (None, None, 9):
        celery.send_task("ocrq.nothing", args=["x"], queue=queue, priority=priority)
    try:
        got = samples_of(stack.client(None).get("/metrics").text)
        assert got[("ocrq_queue_depth", (("queue", queue),))] == 3
        assert got[("ocrq_queue_depth", (("queue", "ocrq.control"),))] >= 0
        assert got[("ocrq_metrics_source_up", (("source", "broker"),))] == 1
    finally:
        client = redis.Redis.from_url(stack.settings.broker_url)
        client.delete(*client.keys(f"{prefix}{queue}*"))


@pytest.fixture()
def fake_vllm():
    """An HTTP server on loopback answering /metrics as vLLM does: the edge this test is about."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = VLLM_METRICS.encode() if self.path == "/metrics" else b"not found"
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_vllm_engines_kv_cache_and_requests_are_proxied(tmp_path, pg_url, redis_url, s3, fake_vllm):
    dead = f"http://127.0.0.1:{free_port()}"
    settings = make_settings(home=tmp_path, pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[fake_vllm + "/v1", dead])
    with TestClient(create_app(settings)) as client:
        got = samples_of(client.get("/metrics").text)
    live = (("engine", fake_vllm),)
    assert got[("ocrq_engine_up", live)] == 1
    assert got[("ocrq_engine_kv_cache_usage_ratio", live)] == pytest.approx(0.42)
    assert got[("ocrq_engine_requests_running", live)] == 5
    assert got[("ocrq_engine_requests_waiting", live)] == 5
    assert got[("ocrq_engine_up", (("engine", dead),))] == 0
    assert ("ocrq_engine_kv_cache_usage_ratio", (("engine", dead),)) not in got


def test_a_source_that_is_down_is_reported_and_the_rest_still_answers(tmp_path, s3):
    settings = make_settings(home=tmp_path, pg_url=f"postgresql://postgres@127.0.0.1:{free_port()}/none",
                             redis_url=f"redis://127.0.0.1:{free_port()}/0", s3=s3, api_keys=[])
    with TestClient(create_app(settings)) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    got = samples_of(response.text)
    assert got[("ocrq_metrics_source_up", (("source", "database"),))] == 0
    assert got[("ocrq_metrics_source_up", (("source", "broker"),))] == 0
    assert not any(name == "ocrq_jobs" for name, _ in got)
