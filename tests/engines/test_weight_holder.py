"""The torch-free parts of weight sharing: finding a live holder, noticing its death, and /ocrq/weights."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ocrq_vllm_plugin import env, holder, status


@pytest.fixture
def plugin_environ(monkeypatch):
    """Sets the plugin's variables for one test; the plugin reads them once per process, so read them again."""

    def set_variables(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        env.current_env.cache_clear()

    yield set_variables
    env.current_env.cache_clear()


@pytest.fixture
def child():
    """A process standing in for the holder engine, killed on demand."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    process.kill()
    process.wait()


def _child_holder(process) -> holder.HolderId:
    ticks = holder.process_start_ticks(process.pid)
    assert ticks is not None
    return holder.HolderId(pid=process.pid, start_ticks=ticks)


def test_a_published_export_is_read_only_while_its_holder_lives(tmp_path, child):
    me = _child_holder(child)
    holder.publish(tmp_path, {"holder": me, "tensors": {"w": (1, 2)}})
    assert holder.read_live(tmp_path)["tensors"] == {"w": (1, 2)}
    child.kill()
    child.wait()
    assert holder.read_live(tmp_path) is None
    with pytest.raises(TimeoutError, match=str(tmp_path)):
        holder.wait_for_holder(tmp_path, timeout_s=0.3, poll_s=0.1)


def test_a_reused_pid_is_not_taken_for_the_holder(tmp_path):
    me = holder.HolderId.of_this_process()
    assert me.alive()
    assert not dataclasses.replace(me, start_ticks=me.start_ticks - 1).alive()
    holder.publish(tmp_path, {"holder": dataclasses.replace(me, start_ticks=me.start_ticks - 1)})
    assert holder.read_live(tmp_path) is None


def test_the_watch_calls_back_once_when_the_holder_dies(child):
    lost = threading.Event()
    watch = holder.HolderWatch(_child_holder(child), on_lost=lost.set, period_s=0.05)
    watch.start()
    assert not lost.wait(0.3)
    child.kill()
    assert lost.wait(5)
    watch.join(5)
    assert not watch.is_alive()


def test_weights_route_reports_the_state_and_a_lost_holder(tmp_path, plugin_environ, child):
    plugin_environ(**{env.STATE_ENV: str(tmp_path / "engine.json"), env.LANE_ENV: "interactive"})
    app = FastAPI()
    app.middleware("http")(status.weights_route)

    @app.get("/v1/models")
    def models() -> dict:
        return {"data": []}

    client = TestClient(app)
    assert client.get("/ocrq/weights").json()["role"] == "own"
    assert client.get("/v1/models").json() == {"data": []}
    me = _child_holder(child)
    status.write_state(role="attached", holder_pid=me.pid, holder=dataclasses.asdict(me), shared_bytes=2_000_000_000,
                       tensors=3, kv_cache_bytes=123)
    body = client.get("/ocrq/weights").json()
    assert body == {"role": "attached", "lane": "interactive", "engine_pid": None, "holder_pid": me.pid,
                    "shared_bytes": 2_000_000_000, "weight_bytes_allocated": None, "kv_cache_bytes": 123,
                    "tensors": 3, "state": "ok"}
    child.kill()
    child.wait()
    assert client.get("/ocrq/weights").json()["state"] == "holder_lost"
