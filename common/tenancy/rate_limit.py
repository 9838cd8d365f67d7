"""Requests per second per tenant: GCRA (a token bucket kept as one timestamp).

With a Redis broker the state lives in Redis and one Lua script reads and writes it atomically,
so every API process shares one limit. The embedded default has no Redis; there the state
lives in the API process, which is exact because `ocrq serve` runs a single API process.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Protocol

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from common.settings import Settings

log = logging.getLogger("ocrq.rate_limit")
OUTAGE_PAUSE_S = 5.0

# KEYS[1]: the tenant's theoretical arrival time (ms). ARGV: emission interval (ms), burst tolerance (ms).
# Returns 0 when allowed, else the milliseconds to wait. Redis's own clock keeps every API process in step.
GCRA_SCRIPT = """
local now_parts = redis.call('TIME')
local now = now_parts[1] * 1000 + now_parts[2] / 1000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
if tat - now > tolerance then
  return math.ceil(tat - now - tolerance)
end
local new_tat = tat + interval
redis.call('SET', KEYS[1], tostring(new_tat), 'PX', math.ceil(new_tat - now) + 1)
return 0
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: float = 0.0


class RateLimiter(Protocol):
    def hit(self, tenant_id: str) -> Decision: ...
    def close(self) -> None: ...


class NoLimit:
    def hit(self, tenant_id: str) -> Decision:
        return Decision(True)

    def close(self) -> None:
        pass


class RedisRateLimiter:
    """Shared by every API process. When Redis cannot be reached, requests go through (it is logged), and
    Redis is not asked again for a few seconds, so an outage does not add a timeout to every request."""

    def __init__(self, client: redis.Redis, *, rps: float, burst: int, prefix: str = "") -> None:
        self.client, self.prefix = client, prefix
        self.skip_until = 0.0
        self.interval_ms = 1000.0 / rps
        self.tolerance_ms = self.interval_ms * (burst - 1)
        self.script = client.register_script(GCRA_SCRIPT)

    def key(self, tenant_id: str) -> str:
        return f"{self.prefix}ocrq:ratelimit:{tenant_id}"

    def hit(self, tenant_id: str) -> Decision:
        if time.monotonic() < self.skip_until:
            return Decision(True)
        try:
            wait_ms = int(self.script(keys=[self.key(tenant_id)], args=[self.interval_ms, self.tolerance_ms]))
        except redis.RedisError as exc:
            self.skip_until = time.monotonic() + OUTAGE_PAUSE_S
            log.warning("rate limiter unavailable, letting requests through for %s s: %s", OUTAGE_PAUSE_S, exc)
            return Decision(True)
        return Decision(True) if wait_ms <= 0 else Decision(False, wait_ms / 1000)

    def close(self) -> None:
        self.client.close()


class LocalRateLimiter:
    """The same algorithm in this process's memory, for the embedded default's single API process."""

    def __init__(self, *, rps: float, burst: int) -> None:
        self.interval = 1.0 / rps
        self.tolerance = self.interval * (burst - 1)
        self.arrivals: dict[str, float] = {}
        self.lock = threading.Lock()

    def hit(self, tenant_id: str) -> Decision:
        with self.lock:
            now = time.monotonic()
            tat = max(self.arrivals.get(tenant_id, now), now)
            if tat - now > self.tolerance:
                return Decision(False, tat - now - self.tolerance)
            self.arrivals[tenant_id] = tat + self.interval
            return Decision(True)

    def close(self) -> None:
        pass


def make_rate_limiter(settings: Settings) -> RateLimiter:
    """Redis when the broker is Redis, this process's memory otherwise, nothing when the limit is 0."""
    if not settings.rate_limit_rps:
        return NoLimit()
    url = settings.resolved_broker_url
    if url.startswith(("redis://", "rediss://")):
        # One quick try: a limiter that waits on a dead Redis would slow every request down.
        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5,
                                      retry=Retry(NoBackoff(), 0))
        return RedisRateLimiter(client, rps=settings.rate_limit_rps, burst=settings.rate_limit_burst,
                                prefix=settings.broker_key_prefix)
    return LocalRateLimiter(rps=settings.rate_limit_rps, burst=settings.rate_limit_burst)


def retry_after_header(decision: Decision) -> str:
    """Whole seconds, at least 1, as Retry-After requires."""
    return str(max(1, math.ceil(decision.retry_after_s)))
