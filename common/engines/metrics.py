"""A vLLM engine's own /metrics, reduced to what ocrq shows: KV cache use and requests running and waiting."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from common.engines.lanes import base_url

# vLLM's V1 engine names the KV gauge kv_cache_usage_perc; older releases called it gpu_cache_usage_perc.
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


@dataclass(frozen=True)
class EngineStats:
    url: str
    up: bool
    kv_cache_usage: float | None = None
    running: float | None = None
    waiting: float | None = None


def parse_engine_metrics(url: str, text: str) -> EngineStats:
    """KV use is the fullest of the engine's cores (0-1); running and waiting add up over them."""
    values: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name in (*KV_CACHE, RUNNING, WAITING):
            values.setdefault(family.name, []).extend(s.value for s in family.samples if s.name == family.name)
    kv = next((values[name] for name in KV_CACHE if values.get(name)), None)
    return EngineStats(
        url=url, up=True, kv_cache_usage=max(kv) if kv else None,
        running=sum(values[RUNNING]) if RUNNING in values else None,
        waiting=sum(values[WAITING]) if WAITING in values else None,
    )


def scrape_engine(client: httpx.Client, url: str) -> EngineStats:
    """Fetch and reduce one engine's /metrics; an engine that does not answer is reported down."""
    base = base_url(url)
    try:
        response = client.get(f"{base}/metrics")
        response.raise_for_status()
        return parse_engine_metrics(base, response.text)
    except (httpx.HTTPError, ValueError):
        return EngineStats(url=base, up=False)
