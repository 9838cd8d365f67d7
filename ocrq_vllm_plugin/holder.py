"""Where the engines of one GPU find the weight holder's export, and whether that holder still lives.

The holder engine publishes its CUDA IPC handles in a per-GPU folder. An attached engine reads them
only while the process that wrote them is alive: a pid alone could be reused, so the holder is known
by its pid and the kernel's start time for it.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ocrq_vllm_plugin.env import SHARED_DIR_ENV, current_env

HANDLES = "handles.pkl"
# Exit status of an attached engine whose holder died: the launcher restarts holder then readers.
HOLDER_LOST_EXIT = 75


@dataclass(frozen=True)
class HolderId:
    pid: int
    start_ticks: int

    @classmethod
    def of_this_process(cls) -> HolderId:
        pid = os.getpid()
        ticks = process_start_ticks(pid)
        if ticks is None:
            raise RuntimeError("cannot read this process's start time from /proc")
        return cls(pid=pid, start_ticks=ticks)

    def alive(self) -> bool:
        return process_start_ticks(self.pid) == self.start_ticks


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22); None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces; count fields after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def shared_dir() -> Path:
    value = current_env().shared_dir
    if value is None:
        raise RuntimeError(f"{SHARED_DIR_ENV} is not set; `ocrq engine --share-weights` sets it for each GPU")
    return value


def write_atomically(path: Path, data: bytes) -> None:
    """Write a file another process reads while it changes: a reader sees the whole of it or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def publish(directory: Path, payload: dict) -> Path:
    """Write the export where attached engines look for it."""
    target = directory / HANDLES
    write_atomically(target, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
    return target


def clear(directory: Path) -> None:
    (directory / HANDLES).unlink(missing_ok=True)


def read_live(directory: Path) -> dict | None:
    """The published export if its holder is still the process that wrote it, else None."""
    try:
        payload = pickle.loads((directory / HANDLES).read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError):
        return None
    holder = payload.get("holder")
    if not isinstance(holder, HolderId) or not holder.alive():
        return None
    return payload


def wait_for_holder(directory: Path, *, timeout_s: float, poll_s: float = 0.5) -> dict:
    """Block until a live holder has published its export; TimeoutError naming the folder otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        payload = read_live(directory)
        if payload is not None:
            return payload
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no live weight holder published in {directory} within {timeout_s:.0f} s")
        time.sleep(poll_s)


class HolderWatch(threading.Thread):
    """Calls on_lost once when the holder process is gone; an attached engine must not read freed memory."""

    def __init__(self, holder: HolderId, *, on_lost: Callable[[], None], period_s: float = 0.2) -> None:
        super().__init__(name="ocrq-holder-watch", daemon=True)
        self.holder, self.on_lost, self.period_s = holder, on_lost, period_s
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.period_s):
            if not self.holder.alive():
                self.on_lost()
                return

    def stop(self) -> None:
        self._done.set()
