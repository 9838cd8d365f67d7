"""A private CUDA MPS control daemon for this host's engines.

Without MPS, the processes on one GPU take turns: the card time-slices between their contexts, so an
interactive engine beside a busy bulk engine gets about half the card. Under one MPS server their kernels
run side by side. The daemon here has its own pipe directory, so only the engines it is given to use it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"
MODES = ("auto", "on", "off")

log = logging.getLogger("ocrq.engine")


class MpsError(RuntimeError):
    pass


def available() -> bool:
    return shutil.which(CONTROL) is not None


def wanted(mode: str, *, lanes: tuple[str, ...]) -> bool:
    """Whether a GPU running engines for LANES runs them under MPS.

    `auto`: when an interactive engine shares the card with a bulk one (measured: BENCHMARKS.md) and the
    control binary exists. `on`: whenever the card has engines, or fail.
    """
    if mode not in MODES:
        raise ValueError(f"mps must be one of {', '.join(MODES)}")
    if mode == "off":
        return False
    if mode == "on":
        if not available():
            raise MpsError(f"--mps on, but {CONTROL} is not on PATH")
        return True
    return {"bulk", "interactive"} <= set(lanes) and available()


@dataclass(frozen=True)
class MpsDaemon:
    directory: Path

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs to reach this daemon."""
        return {
            "CUDA_MPS_PIPE_DIRECTORY": str(self.directory / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(self.directory / "log"),
        }

    def control(self, command: str, *, timeout_s: float = 10.0) -> str:
        """Send one command to the control daemon; its answer."""
        done = subprocess.run(
            [CONTROL], input=command + "\n", env=self._daemon_env(), capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )
        if done.returncode != 0:
            raise MpsError(f"{CONTROL} '{command}' exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
        return done.stdout

    def start(self, *, timeout_s: float = 15.0) -> None:
        """Start the control daemon (it starts an MPS server when the first engine connects)."""
        for sub in ("pipe", "log"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        if self.running():
            log.warning("an MPS daemon from an earlier run answers in %s; stopping it", self.directory / "pipe")
            self.stop()
        subprocess.run([CONTROL, "-d"], env=self._daemon_env(), check=True, timeout=timeout_s,
                       capture_output=True)
        deadline = time.monotonic() + timeout_s
        while not self.running():
            if time.monotonic() > deadline:
                raise MpsError(f"MPS daemon did not answer within {timeout_s:g} s (log: {self.directory / 'log'})")
            time.sleep(0.2)
        log.info("MPS control daemon started (pipe %s)", self.directory / "pipe")

    def running(self) -> bool:
        try:
            self.control("get_default_active_thread_percentage", timeout_s=2.0)
        except (MpsError, subprocess.SubprocessError, OSError):
            return False
        return True

    def clients(self) -> list[int]:
        """Pids of the processes attached to this daemon's servers."""
        pids = []
        for server in _numbers(self.control("get_server_list")):
            pids += _numbers(self.control(f"get_client_list {server}"))
        return pids

    def stop(self, *, timeout_s: float = 15.0) -> None:
        """Quit the daemon and its server; call it after the engines have exited."""
        if not self.running():
            return
        self.control("quit")
        deadline = time.monotonic() + timeout_s
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.2)
        log.info("MPS control daemon stopped")

    def _daemon_env(self) -> dict[str, str]:
        # Each engine names its card in CUDA_VISIBLE_DEVICES; the one server must see every card they name.
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        return {**env, **self.env}


@contextmanager
def serving(mode: str, *, lanes: tuple[str, ...], directory: Path) -> Iterator[MpsDaemon | None]:
    """A started daemon for the engines, or None; `auto` falls back to time-slicing if it will not start."""
    if not wanted(mode, lanes=lanes):
        yield None
        return
    daemon = MpsDaemon(directory)
    try:
        daemon.start()
    except (MpsError, OSError, subprocess.SubprocessError) as exc:
        if mode == "on":
            raise MpsError(f"MPS daemon did not start: {exc}") from exc
        log.warning("MPS daemon did not start (%s); the engines of a GPU will time-slice it", exc)
        yield None
        return
    try:
        yield daemon
    finally:
        daemon.stop()


def _numbers(text: str) -> list[int]:
    return [int(line) for line in text.split() if line.strip().isdigit()]
