"""GET /metrics: queue depths read from the real broker, vLLM engine state, and sources that are down."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from tests.conftest import make_settings
from tests.support.servers import free_port

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
        # A CPU deployment lists no empty GPU bucket queue: only the one holding messages.
        gpu = {labels[0][1] for name, labels in got if name == "ocrq_queue_depth" and "gpu" in labels[0][1]}
        assert gpu == {queue}
        assert got[("ocrq_metrics_source_up", (("source", "broker"),))] == 1
    finally:
        client = redis.Redis.from_url(stack.settings.broker_url)
        client.delete(*client.keys(f"{prefix}{queue}*"))


@contextmanager
def fake_vllm(weights: dict | None):
    """An HTTP server on loopback answering /v1/models, /metrics and the ocrq plugin's /ocrq/weights as a vLLM
    engine does: the edge this test is about. weights None: a plain engine without the plugin's route."""
    routes = {"/metrics": VLLM_METRICS.encode(), "/v1/models": json.dumps({"data": [{"id": "m"}]}).encode()}
    if weights is not None:
        routes["/ocrq/weights"] = json.dumps(weights).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = routes.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body or b"not found")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _weights(role: str, shared_bytes: int, kv_cache_bytes: int | None, lane: str) -> dict:
    return {"role": role, "lane": lane, "engine_pid": 11, "holder_pid": 10, "shared_bytes": shared_bytes,
            "weight_bytes_allocated": 0, "kv_cache_bytes": kv_cache_bytes, "tensors": 512, "state": "ok"}


def test_vllm_engines_kv_cache_requests_and_weight_sharing_are_proxied(tmp_path, pg_url, redis_url, s3):
    dead = f"http://127.0.0.1:{free_port()}"
    with fake_vllm(_weights("holder", 2_000_000_000, 60_000_000_000, "bulk")) as holder, \
            fake_vllm(_weights("attached", 2_000_000_000, 8_000_000_000, "interactive")) as attached, \
            fake_vllm(None) as plain:
        settings = make_settings(home=tmp_path, pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                                 engine_urls=[holder + "/v1", dead, plain], engine_interactive_urls=[attached])
        with TestClient(create_app(settings)) as client:
            got = samples_of(client.get("/metrics").text)
    bulk = (("lane", "bulk"), ("url", holder))
    assert got[("ocrq_engine_up", bulk)] == 1
    assert got[("ocrq_engine_kv_cache_usage_ratio", bulk)] == pytest.approx(0.42)
    assert got[("ocrq_engine_requests_running", bulk)] == 5
    assert got[("ocrq_engine_requests_waiting", bulk)] == 5
    assert got[("ocrq_engine_shared_weight_bytes", (("lane", "bulk"), ("role", "holder"), ("url", holder)))] == 2e9
    assert got[("ocrq_engine_kv_cache_bytes", bulk)] == 60e9
    interactive = (("lane", "interactive"), ("url", attached))
    assert got[("ocrq_engine_up", interactive)] == 1
    assert got[("ocrq_engine_shared_weight_bytes",
                (("lane", "interactive"), ("role", "attached"), ("url", attached)))] == 2e9
    assert got[("ocrq_engine_kv_cache_bytes", interactive)] == 8e9
    assert got[("ocrq_engines_sharing_weights", ())] == 2
    # A plain engine is up but says nothing about weights; a dead one is down and reports nothing else.
    assert got[("ocrq_engine_up", (("lane", "bulk"), ("url", plain)))] == 1
    assert not any(name == "ocrq_engine_shared_weight_bytes" and dict(labels)["url"] == plain for name, labels in got)
    assert got[("ocrq_engine_up", (("lane", "bulk"), ("url", dead)))] == 0
    assert not any(dict(labels).get("url") == dead for name, labels in got if name != "ocrq_engine_up")


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
