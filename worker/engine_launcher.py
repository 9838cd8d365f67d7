"""Start this host's OCR engines (vLLM servers from a profile, or the CPU stand-in), keep them alive, stop them."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from worker.engines.profiles import DEFAULT_MODEL, Profile, capped, plugin_env, serve_argv

log = logging.getLogger("ocrq.engine")


@dataclass
class EngineSpec:
    """One engine process to run: its command, environment and address."""

    name: str
    argv: list[str]
    env: dict[str, str]
    url: str
    served_model_name: str


@dataclass
class RunningEngine:
    spec: EngineSpec
    process: subprocess.Popen
    log_file: object | None = None
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0


def detect_gpus() -> list[dict]:
    """This host's GPUs as [{'index': '0', 'memory_gib': 139.8}], from nvidia-smi; [] without one."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        index, mib = (part.strip() for part in line.split(","))
        gpus.append({"index": index, "memory_gib": float(mib) / 1024})
    return gpus


def plan_vllm(
    *,
    profile: Profile,
    model: str = DEFAULT_MODEL,
    served_model_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8100,
    gpus: list[dict],
    engines_per_gpu: int = 1,
    memory_cap_gib: float | None = None,
    load_format: str | None = None,
    extra_args: tuple[str, ...] = (),
) -> list[EngineSpec]:
    """One vLLM server per GPU and lane, on consecutive ports; the lanes of one GPU split its memory share."""
    if not gpus:
        raise RuntimeError("no GPU found (nvidia-smi); use --backend cpu on a machine without one")
    if engines_per_gpu < 1:
        raise ValueError("engines_per_gpu must be at least 1")
    specs = []
    for gpu in gpus:
        sized = capped(profile, cap_gib=memory_cap_gib, total_gib=gpu["memory_gib"]) if memory_cap_gib else profile
        sized = replace(sized, gpu_memory_utilization=round(sized.gpu_memory_utilization / engines_per_gpu, 4))
        for lane in range(engines_per_gpu):
            engine_port = port + len(specs)
            name = served_model_name or model
            specs.append(
                EngineSpec(
                    name=f"vllm-gpu{gpu['index']}-{lane}",
                    argv=serve_argv(
                        sized, model=model, served_model_name=name, host=host, port=engine_port,
                        load_format=load_format, extra_args=extra_args,
                    ),
                    env={"CUDA_VISIBLE_DEVICES": str(gpu["index"]), **plugin_env(sized)},
                    url=f"http://{host}:{engine_port}",
                    served_model_name=name,
                )
            )
    return specs


def plan_cpu(
    *, served_model_name: str = DEFAULT_MODEL, host: str = "127.0.0.1", port: int = 8100, concurrency: int = 1,
    admin: bool = False,
) -> list[EngineSpec]:
    """The CPU stand-in server (rapidocr behind the same OpenAI-compatible API)."""
    argv = [
        sys.executable, "-m", "worker.engine_server_cpu", "--host", host, "--port", str(port),
        "--served-model-name", served_model_name, "--concurrency", str(concurrency),
    ]
    if admin:
        argv.append("--admin")
    return [EngineSpec(name="cpu", argv=argv, env={}, url=f"http://{host}:{port}", served_model_name=served_model_name)]


def is_ready(*, url: str, model: str, timeout_s: float = 5.0) -> bool:
    """True when the engine's /v1/models answers and lists the model."""
    try:
        response = httpx.get(f"{url}/v1/models", timeout=timeout_s)
        return response.status_code == 200 and any(m.get("id") == model for m in response.json().get("data", []))
    except (httpx.HTTPError, ValueError):
        return False


def start(spec: EngineSpec, *, log_dir: Path | None = None) -> RunningEngine:
    """Start one engine in its own process group, its output appended to LOG_DIR/NAME.log if given."""
    log_file = None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(log_dir / f"{spec.name}.log", "ab")  # noqa: SIM115 - kept open while the engine runs
    process = subprocess.Popen(
        spec.argv,
        env={**os.environ, **spec.env},
        stdout=log_file or None,
        stderr=subprocess.STDOUT if log_file else None,
        start_new_session=True,
    )
    log.info("started %s (pid %d): %s", spec.name, process.pid, " ".join(spec.argv))
    return RunningEngine(spec=spec, process=process, log_file=log_file)


def wait_ready(engine: RunningEngine, *, timeout_s: float, stop: threading.Event | None = None) -> bool:
    """Poll /v1/models until it lists the model; False if the process dies, time runs out or stop is set."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if engine.process.poll() is not None or (stop is not None and stop.is_set()):
            return False
        if is_ready(url=engine.spec.url, model=engine.spec.served_model_name):
            log.info(
                "%s ready at %s after %.1f s", engine.spec.name, engine.spec.url, time.monotonic() - engine.started_at
            )
            return True
        time.sleep(1.0)
    return False


def stop_engine(engine: RunningEngine, *, grace_s: float = 30.0) -> int | None:
    """SIGTERM the engine's process group, SIGKILL it after grace_s; returns the exit code."""
    process = engine.process
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait(timeout=10)
    # Children (vLLM's EngineCore, API servers) share the group and may outlive the leader.
    _signal_group(process, signal.SIGKILL)
    if engine.log_file:
        engine.log_file.close()
    return process.returncode


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def supervise(
    specs: list[EngineSpec],
    *,
    stop: threading.Event,
    log_dir: Path | None = None,
    ready_timeout_s: float = 900.0,
    restart_backoff_s: float = 5.0,
    max_restarts: int = 10,
    on_ready=None,
) -> int:
    """Run the engines until stop is set; a dead or never-ready engine is restarted with back-off."""
    engines = [start(spec, log_dir=log_dir) for spec in specs]
    try:
        for engine in engines:
            if not wait_ready(engine, timeout_s=ready_timeout_s, stop=stop) and not stop.is_set():
                log.error("%s did not become ready (exit code %s)", engine.spec.name, engine.process.poll())
                return 1
        if not stop.is_set():
            log.info("all %d engine(s) ready: %s", len(engines), ", ".join(e.spec.url for e in engines))
            if on_ready:
                on_ready([e.spec.url for e in engines])
        while not stop.wait(2.0):
            for i, engine in enumerate(engines):
                code = engine.process.poll()
                if code is None:
                    continue
                if engine.restarts >= max_restarts:
                    log.error("%s died (exit %s) %d times; giving up", engine.spec.name, code, engine.restarts)
                    return 1
                log.warning("%s died (exit %s); restarting in %.0f s", engine.spec.name, code, restart_backoff_s)
                stop_engine(engine, grace_s=1.0)
                if stop.wait(restart_backoff_s * (2 ** min(engine.restarts, 5))):
                    break
                fresh = start(engine.spec, log_dir=log_dir)
                fresh.restarts = engine.restarts + 1
                engines[i] = fresh
                wait_ready(fresh, timeout_s=ready_timeout_s, stop=stop)
        return 0
    finally:
        for engine in engines:
            stop_engine(engine)
        log.info("engines stopped")


def run(specs: list[EngineSpec], *, log_dir: Path | None = None, ready_timeout_s: float = 900.0, on_ready=None) -> int:
    """Supervise the engines in the foreground until SIGTERM or SIGINT."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return supervise(specs, stop=stop, log_dir=log_dir, ready_timeout_s=ready_timeout_s, on_ready=on_ready)
