"""What the GPU host's CPUs and the engine did while a benchmark ran: bench/gpu_e2e.py wraps each half in it.

    with HostWatch(engine_url) as watch:
        ...
    watch.summary()

Once a second: the host's busy cores (/proc/stat), and the engine's running and waiting requests and generated
tokens (vLLM's /metrics). At the ends: the CPU seconds of each kind of process (/proc/PID/stat, children reaped
by their parent included, so a worker's render forks count as the worker's). Linux only; elsewhere the CPU parts
are empty.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from typing import Self

import gpu_raw

# The first pattern found in a process's command line names its kind; anything else goes by its comm.
KINDS = (
    ("engine-core", "EngineCore"),
    ("engine-api", "APIServer"),
    ("engine-api", "cli.engine"),
    ("engine-api", "vllm"),
    ("ocrq-gpu-worker", "--gpu"),
    ("ocrq-cpu-worker", "cli.main worker"),
    ("ocrq-api", "cli.main api"),
    ("ocrq-api", "uvicorn"),
    ("postgres", "postgres"),
    ("redis", "redis-server"),
    ("s3", "weed"),
    ("bench", "gpu_e2e"),
    ("bench", "gpu_raw"),
)
ENGINE_SERIES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens_total"]
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def host_busy() -> tuple[float, float] | None:
    """(busy, total) jiffies over all CPUs, from /proc/stat's first line."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def process_seconds() -> dict[int, tuple[str, float]]:
    """Each live process's kind and CPU seconds (its own and its reaped children's)."""
    found = {}
    for entry in os.scandir("/proc") if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        ticks = sum(float(x) for x in rest[11:15])  # utime stime cutime cstime
        kind = next((name for name, pattern in KINDS if pattern in cmdline), comm)
        found[int(entry.name)] = (kind, ticks / TICK)
    return found


class HostWatch:
    def __init__(self, engine_url: str | None, *, every: float = 1.0) -> None:
        self.engine_url, self.every = engine_url, every
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Self:
        self._processes = process_seconds()
        self._host = host_busy()
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._seconds = time.monotonic() - self._began
        self._processes_end = process_seconds()
        self._host_end = host_busy()

    def _sample(self) -> None:
        last_host, last_tokens, last_t = host_busy(), None, time.monotonic()
        while not self._stop.wait(self.every):
            now, host = time.monotonic(), host_busy()
            engine = gpu_raw.engine_counters(self.engine_url, ENGINE_SERIES)
            tokens = engine.get("vllm:generation_tokens_total")
            row = {"t": round(now - self._began, 1),
                   "running": engine.get("vllm:num_requests_running"),
                   "waiting": engine.get("vllm:num_requests_waiting")}
            if host and last_host and host[1] > last_host[1]:
                row["busy_cores"] = round((host[0] - last_host[0]) / TICK / (now - last_t), 1)
            if tokens is not None and last_tokens is not None:
                row["tok_s"] = round((tokens - last_tokens) / (now - last_t))
            self.samples.append(row)
            last_host, last_tokens, last_t = host, tokens, now

    def summary(self, *, full_at: int = 500, fast: float = 0.7) -> dict:
        """Cores busy (mean, p90, seconds with under one core idle), the cores each kind of process used, when the
        engine first ran `full_at` requests, and when its generated tokens/s first reached `fast` times the
        window's fastest second (every page prefilled, decoding alone) with the median rate from then on."""
        cores = os.cpu_count() or 1
        busy = [s["busy_cores"] for s in self.samples if "busy_cores" in s]
        full = next((s["t"] for s in self.samples if (s.get("running") or 0) >= full_at), None)
        rates = [s for s in self.samples if s.get("tok_s") is not None]
        floor = fast * max((s["tok_s"] for s in rates), default=0)
        decoding = [s for s in rates if floor and s["tok_s"] >= floor]
        kinds: dict[str, float] = {}
        for pid, (kind, seconds) in self._processes_end.items():
            before = self._processes.get(pid)
            used = seconds - (before[1] if before and before[0] == kind else 0.0)
            kinds[kind] = kinds.get(kind, 0.0) + used
        top = sorted(kinds.items(), key=lambda kv: -kv[1])[:10]
        return {
            "seconds": round(self._seconds, 1),
            "cores": cores,
            "busy_cores_mean": round(statistics.fmean(busy), 1) if busy else None,
            "busy_cores_p90": round(sorted(busy)[int(0.9 * (len(busy) - 1))], 1) if busy else None,
            "saturated_s": sum(b > cores - 1 for b in busy) * self.every,
            "cores_by_kind": {kind: round(used / self._seconds, 2) for kind, used in top if used > 0},
            "engine_full_first_s": full,
            "decoding_from_s": decoding[0]["t"] if decoding else None,
            "decoding_tok_s_median": statistics.median(s["tok_s"] for s in decoding) if decoding else None,
            "timeline": [[s["t"], s.get("running"), s.get("waiting"), s.get("tok_s"), s.get("busy_cores")]
                         for s in self.samples],
        }
