"""Priority lanes on the engine side: which vLLM engines, and which batch size, serve each lane."""

from __future__ import annotations

from dataclasses import dataclass

from common.queue.names import LANES
from common.settings import Settings

WORKER_LANES = ("all", *LANES)


@dataclass(frozen=True)
class EngineRef:
    """A configured engine and the lane it serves ("all" when one set of engines serves both)."""

    url: str
    lane: str


def base_url(url: str) -> str:
    """An engine address without a trailing slash or /v1."""
    return url.rstrip("/").removesuffix("/v1")


def lane_urls(settings: Settings, lane: str) -> list[str]:
    """The engines a GPU worker of this lane sends pages to."""
    if lane == "interactive":
        return settings.engine_interactive_urls or settings.engine_urls
    return settings.engine_urls


def for_lane(settings: Settings, lane: str) -> Settings:
    """The settings of a GPU worker serving only `lane` (or both, "all"): its engines and its pair size."""
    if lane not in WORKER_LANES:
        raise ValueError(f"unknown lane {lane!r}; one of {', '.join(WORKER_LANES)}")
    if lane != "interactive":
        return settings
    return settings.model_copy(update={"engine_urls": lane_urls(settings, "interactive"),
                                       "engine_pair_size": settings.engine_interactive_pair_size})


def for_worker(settings: Settings, *, lane: str, pool: str, concurrency: int) -> Settings:
    """The settings of a GPU worker: its lane's (for_lane), and, for a pool whose tasks share one process
    (threads), an engine client that lets every task's batch be in flight at once. Prefork processes each have
    their own client."""
    settings = for_lane(settings, lane)
    wanted = concurrency * settings.engine_pair_size
    if pool == "prefork" or settings.engine_max_in_flight >= wanted:
        return settings
    return settings.model_copy(update={"engine_max_in_flight": wanted})


def configured_engines(settings: Settings) -> list[EngineRef]:
    """Every engine the settings name, with its lane; an URL listed for both lanes appears once per lane."""
    if settings.engine != "vllm":
        return []
    if not settings.engine_interactive_urls:
        return [EngineRef(base_url(url), "all") for url in settings.engine_urls]
    return [EngineRef(base_url(url), lane) for lane in LANES for url in lane_urls(settings, lane)]
