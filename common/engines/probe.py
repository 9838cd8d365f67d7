"""What /readyz and /metrics ask each vLLM engine: does it answer, and how does it hold its weights.

GET /ocrq/weights is served by the ocrq vLLM plugin (and the CPU stand-in): role "holder" (loaded the
weights and exported them), "attached" (maps the holder's copy), or "own" (a plain engine).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import httpx

from common.engines.lanes import EngineRef
from ocrq_vllm_plugin.status import ROUTE as WEIGHTS_PATH

SHARING_ROLES = ("holder", "attached")


@dataclass(frozen=True)
class EngineProbe:
    url: str
    lane: str
    up: bool
    weights: dict | None = None
    error: str | None = None

    @property
    def serving(self) -> bool:
        """Up, and not an attached engine whose weight holder is gone (it is about to exit)."""
        return self.up and (self.weights or {}).get("state") != "holder_lost"

    @property
    def shares_weights(self) -> bool:
        return bool(self.weights) and self.weights.get("role") in SHARING_ROLES

    def as_dict(self) -> dict:
        return {"url": self.url, "lane": self.lane, "up": self.up, "weights": self.weights}


def fetch_weights(client: httpx.Client, url: str) -> dict | None:
    """The engine's weight-sharing state, or None when it does not serve that route (plain `vllm serve`)."""
    try:
        response = client.get(f"{url}{WEIGHTS_PATH}")
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def probe_engine(client: httpx.Client, url: str, lane: str = "all") -> EngineProbe:
    """Up when /v1/models answers; then its /ocrq/weights."""
    try:
        client.get(f"{url}/v1/models").raise_for_status()
    except httpx.HTTPError as exc:
        return EngineProbe(url=url, lane=lane, up=False, error=f"{exc.__class__.__name__}: {exc}")
    return EngineProbe(url=url, lane=lane, up=True, weights=fetch_weights(client, url))


def probe_engines(client: httpx.Client, engines: list[EngineRef]) -> list[EngineProbe]:
    """Every engine at once, each URL asked once: a dead engine costs one timeout, not one per engine."""
    urls = list(dict.fromkeys(ref.url for ref in engines))
    if not urls:
        return []
    with ThreadPoolExecutor(max_workers=len(urls), thread_name_prefix="engine-probe") as pool:
        by_url = dict(zip(urls, pool.map(lambda url: probe_engine(client, url), urls), strict=True))
    return [replace(by_url[ref.url], lane=ref.lane) for ref in engines]
