"""One webhook delivery attempt through the outbound guard, and the wait before the next one."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Literal

import httpx

from common.netguard import FetchTimeout, UrlRefused, open_checked, read_capped

Outcome = Literal["delivered", "disable", "retry", "failed"]

JITTER = 0.1
MAX_RETRY_AFTER_S = 36000.0
ERROR_SNIPPET_CHARS = 200


@dataclass(frozen=True)
class Attempt:
    """What one delivery attempt gave: the status, how long it took, and what to do next."""

    status_code: int | None
    latency_ms: int
    error: str | None
    outcome: Outcome
    retry_after_s: float | None = None


def send_once(
    *,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    allowlist: Sequence[str],
    timeout_s: float,
    max_response_bytes: int,
) -> Attempt:
    """POST the body once, without following redirects, and classify the answer."""
    started = time.monotonic()
    deadline = started + timeout_s
    request_headers = dict(headers)
    if not any(name.lower() == "content-type" for name in request_headers):
        request_headers["Content-Type"] = "application/json"
    try:
        with open_checked(
            method="POST", url=url, allowlist=allowlist, timeout_s=timeout_s, headers=request_headers, content=body
        ) as response:
            status = response.status_code
            delivered = 200 <= status < 300
            answer = "" if delivered else _read_answer(response, max_bytes=max_response_bytes, deadline=deadline)
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            location = response.headers.get("location")
    except UrlRefused as exc:
        return Attempt(None, _ms_since(started), f"refused: {exc}", "failed")
    except httpx.TimeoutException:
        return Attempt(None, _ms_since(started), f"timed out after {timeout_s:g}s", "retry")
    except httpx.HTTPError as exc:
        return Attempt(None, _ms_since(started), f"connection error: {type(exc).__name__}: {exc}", "retry")
    latency_ms = _ms_since(started)
    if delivered:
        return Attempt(status, latency_ms, None, "delivered")
    error = f"HTTP {status}" + (f": {answer}" if answer else "")
    if status == 410:
        return Attempt(status, latency_ms, error, "disable")
    if status == 429 or 500 <= status < 600:
        return Attempt(status, latency_ms, error, "retry", retry_after)
    if 300 <= status < 400:
        return Attempt(status, latency_ms, f"HTTP {status}: redirect to {location or '?'} not followed", "failed")
    return Attempt(status, latency_ms, error, "failed")


def next_delay(
    *,
    attempt_no: int,
    schedule_s: Sequence[float],
    retry_after_s: float | None,
    rng: random.Random,
    max_retry_after_s: float = MAX_RETRY_AFTER_S,
) -> float | None:
    """Seconds to wait after attempt_no attempts (schedule_s[0] precedes the first), or None when none are left."""
    if attempt_no >= len(schedule_s):
        return None
    delay = schedule_s[attempt_no] * rng.uniform(1 - JITTER, 1 + JITTER)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, max_retry_after_s))
    return delay


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds from now, from either delta-seconds or an HTTP date; None when absent or malformed."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _read_answer(response: httpx.Response, *, max_bytes: int, deadline: float) -> str:
    # The status already decides the outcome; the body only feeds the error text, so a slow or broken one is dropped.
    try:
        content, _ = read_capped(response, max_bytes=max_bytes, deadline=deadline)
    except (httpx.HTTPError, FetchTimeout):
        return ""
    return content[:ERROR_SNIPPET_CHARS].decode("utf-8", "replace").strip()


def _ms_since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
