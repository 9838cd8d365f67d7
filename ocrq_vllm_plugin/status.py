"""An engine's weight-sharing state: written by its model loader, served at GET /ocrq/weights by its API server.

The loader runs in vLLM's engine-core process and the HTTP routes in the API server processes, so the
state travels through a small JSON file named by OCRQ_ENGINE_STATE_FILE (the launcher sets one per engine).
`weights_route` is passed to `vllm serve --middleware`.
"""

from __future__ import annotations

import json
from pathlib import Path

from ocrq_vllm_plugin.env import current_env
from ocrq_vllm_plugin.holder import HolderId, write_atomically

ROUTE = "/ocrq/weights"


def default_state() -> dict:
    return {
        "role": "own", "lane": current_env().lane, "engine_pid": None, "holder_pid": None,
        "shared_bytes": 0, "weight_bytes_allocated": None, "kv_cache_bytes": None, "tensors": 0, "state": "ok",
    }


def _path() -> Path | None:
    return current_env().state_file


def write_state(**fields: object) -> None:
    """Merge fields into this engine's state file (atomically); nothing without OCRQ_ENGINE_STATE_FILE."""
    path = _path()
    if path is None:
        return
    write_atomically(path, json.dumps({**read_state(check_holder=False), **fields}).encode())


def read_state(*, check_holder: bool = True) -> dict:
    """The state as written, and for an attached engine whether its holder is still alive now."""
    state = default_state()
    path = _path()
    if path is not None:
        try:
            state.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    holder = state.get("holder")
    if check_holder and state["role"] == "attached" and isinstance(holder, dict) and not HolderId(**holder).alive():
        state["state"] = "holder_lost"
    return state


async def weights_route(request, call_next):
    """vLLM --middleware: answers GET /ocrq/weights, passes every other request on."""
    if request.url.path == ROUTE and request.method == "GET":
        from starlette.responses import JSONResponse

        state = read_state()
        state.pop("holder", None)
        return JSONResponse(state)
    return await call_next(request)
