"""Reducing a vLLM /metrics page to KV cache use and requests running and waiting."""

from __future__ import annotations

from common.engines.metrics import parse_engine_metrics

OLDER_VLLM = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 4.0
"""


def test_older_kv_gauge_name_and_missing_families():
    stats = parse_engine_metrics("http://e:8100", OLDER_VLLM)
    assert (stats.up, stats.kv_cache_usage, stats.running, stats.waiting) == (True, 0.25, 4.0, None)


def test_a_page_without_vllm_metrics_gives_no_values():
    text = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n"
    stats = parse_engine_metrics("http://e:8100", text)
    assert (stats.kv_cache_usage, stats.running, stats.waiting) == (None, None, None)
