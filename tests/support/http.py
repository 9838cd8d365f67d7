"""One HTTP client for the tests' calls to loopback servers they start.

`httpx.get` and its kin open a client for each call, and each client loads the CA bundle: about 20 ms of CPU. The
readiness loops and engine-admin calls paid that several times a second, a fifth of the test processes' CPU in
a suite run (py-spy; BENCHMARKS.md, tenth session). No connection is kept: a server a test stopped may have a
successor on its port.
"""

from __future__ import annotations

import functools

import httpx


@functools.cache
def loopback() -> httpx.Client:
    return httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0))
