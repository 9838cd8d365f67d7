"""`ocrq api` as a real subprocess, for tests that kill it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from common.settings import Settings
from tests.support.http import loopback
from tests.support.servers import free_port
from tests.support.stack import ROOT, settings_env


class ApiProcess:
    """Started with `launch`, then `wait_ready`; several can start side by side."""

    def __init__(self, settings: Settings, *, log: Path, extra_env: dict[str, str] | None = None,
                 port: int | None = None) -> None:
        self.port, self.log = port or free_port(), log
        self.url = f"http://127.0.0.1:{self.port}"
        env = os.environ.copy() | settings_env(settings) | (extra_env or {})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "api", "--port", str(self.port)], cwd=ROOT, env=env,
            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 90) -> ApiProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"api exited:\n{self.log.read_text()[-3000:]}")
            try:
                if loopback().get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"api not ready in {timeout}s:\n{self.log.read_text()[-3000:]}")

    def wait_exit(self, timeout: float = 10) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
