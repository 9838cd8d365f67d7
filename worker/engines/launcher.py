"""Start this host's OCR engines (vLLM servers from a profile, or the CPU stand-in), keep them alive, stop them."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import httpx
from packaging.version import InvalidVersion, Version

from ocrq_vllm_plugin.env import HOLDER_LOAD_FORMAT_ENV, LANE_ENV, SHARED_DIR_ENV, STATE_ENV
from ocrq_vllm_plugin.holder import HolderId
from ocrq_vllm_plugin.holder import clear as clear_handles
from worker.engines.mps import MpsDaemon, MpsError
from worker.engines.profiles import (
    DEFAULT_MODEL,
    INTERACTIVE_BULK_SM_PERCENT,
    Profile,
    capped,
    choose_profile,
    flashinfer_kernels,
    for_lane,
    kv_shortfall,
    kv_tokens_estimate,
    on_host,
    plugin_env,
    serve_argv,
    size_engines,
)

log = logging.getLogger("ocrq.engine")


@dataclass
class EngineSpec:
    """One engine process to run: its command, environment and address.

    Engines of one GPU that share weights form a group: the holder loads them, the attached engines map
    its memory, so they start after it and die with it.
    """

    name: str
    argv: list[str]
    env: dict[str, str]
    url: str
    served_model_name: str
    lane: str = "bulk"
    role: str = "own"  # own | holder | attached
    group: str | None = None
    profile: Profile | None = None  # a vLLM engine's, to check its KV cache once it serves
    shared_dir: Path | None = None


@dataclass
class RunningEngine:
    spec: EngineSpec
    process: subprocess.Popen
    log_file: object | None = None
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0


def detect_gpus() -> list[dict]:
    """This host's GPUs as [{'index': '0', 'name': 'NVIDIA H100 80GB HBM3', 'memory_gib': 79.6}], from
    nvidia-smi (NVML's answers); [] without one."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [part.strip() for part in line.split(",")]
        gpus.append({"index": parts[0], "name": ", ".join(parts[1:-1]), "memory_gib": float(parts[-1]) / 1024})
    return gpus


def auto_profile(gpus: list[dict]) -> str:
    """The profile for these cards: the one for the smallest of them, so that every engine fits its card."""
    if not gpus:
        raise RuntimeError("no GPU found (nvidia-smi) to choose a profile for; name one with --profile")
    smallest = min(gpus, key=lambda g: g["memory_gib"])
    return choose_profile(smallest.get("name", ""), smallest["memory_gib"])


def kv_tokens(engine_url: str) -> int | None:
    """The KV cache tokens a running vLLM engine reports (vllm:cache_config_info: num_gpu_blocks x block_size)."""
    try:
        text = httpx.get(f"{engine_url.rstrip('/')}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            try:
                return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
            except (KeyError, ValueError):
                return None
    return None


def check_kv(spec: EngineSpec) -> str | None:
    """Warn when a serving engine's KV cache cannot hold its profile's max_num_seqs steady pages."""
    if spec.profile is None or (tokens := kv_tokens(spec.url)) is None:
        return None
    log.info("%s: KV cache %s tokens", spec.name, f"{tokens:,}")
    if shortfall := kv_shortfall(spec.profile, tokens):
        log.warning("%s: %s", spec.name, shortfall)
    return shortfall


def default_state_dir(port: int) -> Path:
    """Where engines on PORT.. keep weight handles, state files and the MPS pipes unless told otherwise."""
    return Path(tempfile.gettempdir()) / f"ocrq-engines-{port}"


def plan_vllm(
    *,
    profile: Profile,
    model: str = DEFAULT_MODEL,
    served_model_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8100,
    gpus: list[dict],
    engines_per_gpu: int = 1,
    lanes: tuple[str, ...] = (),
    share_weights: bool = False,
    state_dir: Path | None = None,
    memory_cap_gib: float | None = None,
    load_format: str | None = None,
    extra_args: tuple[str, ...] = (),
    mps: MpsDaemon | None = None,
    bulk_sm_percent: int | None = None,
) -> list[EngineSpec]:
    """vLLM servers on consecutive ports: per GPU one per lane (or engines_per_gpu bulk ones).

    Several engines on one card each get a fixed KV cache; with share_weights the first is the holder
    of the card's one copy of the weights and the others attach to it. With mps they run as clients of that
    daemon, and a bulk engine beside an interactive one may use bulk_sm_percent of the SMs (no effect without).
    """
    if not gpus:
        raise RuntimeError("no GPU found (nvidia-smi); use --backend cpu on a machine without one")
    if engines_per_gpu < 1:
        raise ValueError("engines_per_gpu must be at least 1")
    lanes = tuple(lanes) or ("bulk",) * engines_per_gpu
    if share_weights and len(lanes) < 2:
        raise ValueError("sharing weights needs at least two engines per GPU")
    if bulk_sm_percent is not None and not 0 < bulk_sm_percent <= 100:
        raise ValueError("bulk_sm_percent must be in 1..100")
    state_dir = state_dir or default_state_dir(port)
    name = served_model_name or model
    chosen = profile.attention
    profile = on_host(profile, kernels=flashinfer_kernels())
    if profile.attention != chosen:
        log.warning("FlashInfer cannot get its kernels here (no flashinfer-cubin with flashinfer-jit-cache, no nvcc): "
                    "%s decodes through %s",
                    profile.name, profile.attention or "vLLM's default")
    specs = []
    for gpu in gpus:
        card = capped(profile, cap_gib=memory_cap_gib, total_gib=gpu["memory_gib"]) if memory_cap_gib else profile
        sized = [for_lane(card, lane) for lane in lanes]
        if len(sized) > 1:
            sized = size_engines(sized, total_gib=gpu["memory_gib"], share_weights=share_weights)
        for engine_profile in sized:
            if shortfall := kv_shortfall(engine_profile, kv_tokens_estimate(engine_profile, total_gib=gpu["memory_gib"])):
                log.warning("GPU %s (%.0f GiB), estimated: %s", gpu["index"], gpu["memory_gib"], shortfall)
        shared_dir = state_dir / f"gpu{gpu['index']}" if share_weights else None
        for i, (lane, engine_profile) in enumerate(zip(lanes, sized)):
            engine_port = port + len(specs)
            engine_name = f"vllm-gpu{gpu['index']}-{i}-{lane}"
            role = "own" if not share_weights else ("holder" if i == 0 else "attached")
            env = {
                "CUDA_VISIBLE_DEVICES": str(gpu["index"]), **plugin_env(engine_profile),
                LANE_ENV: lane, STATE_ENV: str(state_dir / f"{engine_name}.json"),
            }
            if mps is not None:
                env.update(mps.env)
                if lane == "bulk" and "interactive" in lanes:
                    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(bulk_sm_percent or INTERACTIVE_BULK_SM_PERCENT)
            engine_format = load_format
            if shared_dir is not None:
                env[SHARED_DIR_ENV] = str(shared_dir)
                if role == "holder":
                    env[HOLDER_LOAD_FORMAT_ENV] = load_format or "auto"
                engine_format = f"ocrq_{'holder' if role == 'holder' else 'attach'}"
            specs.append(
                EngineSpec(
                    name=engine_name,
                    argv=serve_argv(
                        engine_profile, model=model, served_model_name=name, host=host, port=engine_port,
                        load_format=engine_format, extra_args=extra_args,
                    ),
                    env=env,
                    url=f"http://{host}:{engine_port}",
                    served_model_name=name,
                    lane=lane,
                    role=role,
                    group=f"gpu{gpu['index']}" if share_weights else None,
                    shared_dir=shared_dir,
                    profile=engine_profile,
                )
            )
    return specs


def plan_cpu(
    *, served_model_name: str = DEFAULT_MODEL, host: str = "127.0.0.1", port: int = 8100, concurrency: int = 1,
    admin: bool = False, lanes: tuple[str, ...] = (),
) -> list[EngineSpec]:
    """The CPU stand-in server (rapidocr behind the same OpenAI-compatible API), one per lane if lanes are given."""
    specs = []
    for i, lane in enumerate(lanes or (None,)):
        argv = [
            sys.executable, "-m", "worker.engines.server_cpu", "--host", host, "--port", str(port + i),
            "--served-model-name", served_model_name, "--concurrency", str(concurrency),
        ]
        if admin:
            argv.append("--admin")
        if lane:
            argv += ["--lane", lane]
        specs.append(EngineSpec(name=f"cpu-{lane}" if lane else "cpu", argv=argv, env={},
                                url=f"http://{host}:{port + i}", served_model_name=served_model_name,
                                lane=lane or "bulk"))
    return specs


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
            check_kv(engine.spec)
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


def _alive(engine: RunningEngine) -> bool:
    """The launched process runs and, for a weight holder, so does the engine core that exported the weights.

    vLLM's API servers can outlive a killed engine core by minutes; its readers must not wait that long.
    """
    if engine.process.poll() is not None:
        return False
    if engine.spec.role != "holder" or STATE_ENV not in engine.spec.env:
        return True
    try:
        exported_by = json.loads(Path(engine.spec.env[STATE_ENV]).read_text()).get("holder")
    except (OSError, ValueError):
        return True  # nothing exported yet
    return exported_by is None or HolderId(**exported_by).alive()


def _clear_state(spec: EngineSpec) -> None:
    """Forget what an engine's previous run wrote: its state file and, for a holder, its exported handles."""
    if STATE_ENV in spec.env:
        Path(spec.env[STATE_ENV]).unlink(missing_ok=True)
    if spec.role == "holder" and spec.shared_dir is not None:
        clear_handles(spec.shared_dir)


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
    """Run the engines until stop is set; a dead or never-ready engine is restarted with back-off.

    A holder that dies takes its attached engines down with it (their weights are gone); the group is
    restarted holder first. Engines stop in reverse order, so holders outlive their readers.
    """
    for spec in specs:
        _clear_state(spec)
    engines = [start(spec, log_dir=log_dir) for spec in specs]
    try:
        for engine in engines:
            if not wait_ready(engine, timeout_s=ready_timeout_s, stop=stop) and not stop.is_set():
                log.error("%s did not become ready (exit code %s)", engine.spec.name, engine.process.poll())
                return 1
        if not stop.is_set():
            log.info("all %d engine(s) ready: %s", len(engines),
                     ", ".join(f"{e.spec.lane} {e.spec.url}" for e in engines))
            if on_ready:
                on_ready([e.spec.url for e in engines])
        while not stop.wait(2.0):
            dead = [i for i, engine in enumerate(engines) if not _alive(engine)]
            for i in dead:
                engine = engines[i]
                if _alive(engine):
                    continue  # restarted with its group already
                if engine.restarts >= max_restarts:
                    log.error("%s died (exit %s) %d times; giving up", engine.spec.name,
                              engine.process.returncode, engine.restarts)
                    return 1
                group = [i]
                if engine.spec.role == "holder":
                    group += [j for j, e in enumerate(engines) if e.spec.group == engine.spec.group and j != i]
                    log.warning("%s (weight holder) died (exit %s); stopping its %d attached engine(s)",
                                engine.spec.name, engine.process.returncode, len(group) - 1)
                else:
                    log.warning("%s died (exit %s)", engine.spec.name, engine.process.returncode)
                for j in reversed(group):
                    stop_engine(engines[j], grace_s=1.0)
                    _clear_state(engines[j].spec)
                if stop.wait(restart_backoff_s * (2 ** min(engine.restarts, 5))):
                    break
                for j in group:
                    fresh = start(engines[j].spec, log_dir=log_dir)
                    fresh.restarts = engines[j].restarts + 1
                    engines[j] = fresh
                for j in group:
                    wait_ready(engines[j], timeout_s=ready_timeout_s, stop=stop)
        return 0
    finally:
        for engine in reversed(engines):
            stop_engine(engine)
        log.info("engines stopped")


def take_cpu_priority(nice: int) -> int:
    """Run this thread, and so every engine and thread it starts later, at `nice` (Linux: a thread's own, inherited
    by what it starts). Going below the current nice needs root or CAP_SYS_NICE: without, it stays and says so.
    The nice it runs at."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if nice == current:
        return current
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except PermissionError:
        log.warning(
            "engines run at nice %d, not %d: raising CPU priority needs root or CAP_SYS_NICE (in containers, "
            "give the engine's container a larger cpu_shares)", current, nice,
        )
        return current
    log.info("engines run at nice %d", nice)
    return nice


def run(
    specs: list[EngineSpec], *, log_dir: Path | None = None, ready_timeout_s: float = 900.0, on_ready=None,
    mps: MpsDaemon | None = None,
) -> int:
    """Supervise the engines in the foreground until SIGTERM or SIGINT; with mps, report its clients once ready."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if mps is not None:
        on_ready = functools.partial(_ready_under_mps, mps, specs, on_ready=on_ready)
    return supervise(specs, stop=stop, log_dir=log_dir, ready_timeout_s=ready_timeout_s, on_ready=on_ready)


def _ready_under_mps(mps: MpsDaemon, specs: list[EngineSpec], urls: list[str], *, on_ready=None) -> None:
    try:
        clients = mps.clients()
    except (MpsError, subprocess.SubprocessError, OSError) as exc:
        log.warning("MPS daemon did not list its clients: %s", exc)
    else:
        # Each vLLM engine attaches one process (its engine core); fewer means some run time-sliced beside it.
        level = logging.INFO if len(clients) >= len(specs) else logging.WARNING
        log.log(level, "MPS: %d client process(es) for %d engine(s): %s", len(clients), len(specs), clients)
    if on_ready:
        on_ready(urls)


# Versions that break LightOnOCR, from LightOn's own README (lightonai/LightOnOCR, "vLLM version", at 36755d4):
# "transformers 5.17 breaks the 1B models on vLLM 0.30.0, and vLLM 0.27.1 makes every model loop". The gpu
# extra excludes the same versions; this refusal catches an environment installed some other way.
KNOWN_BAD_VLLM = {"0.27.1": "makes every LightOnOCR model loop"}
FIRST_BAD_TRANSFORMERS = Version("5.17")


def installed_versions() -> dict[str, str | None]:
    """The installed vLLM and transformers versions (None where one is not installed)."""
    found: dict[str, str | None] = {}
    for name in ("vllm", "transformers"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def known_bad(versions: Mapping[str, str | None]) -> str | None:
    """A sentence saying why these vLLM and transformers versions must not serve LightOnOCR, or None."""
    reasons = []
    try:
        vllm = Version(versions["vllm"]) if versions.get("vllm") else None
        transformers = Version(versions["transformers"]) if versions.get("transformers") else None
    except InvalidVersion:
        return None
    if vllm is not None and vllm.base_version in KNOWN_BAD_VLLM:  # 0.27.1+cu129 too
        reasons.append(f"vLLM {versions['vllm']} {KNOWN_BAD_VLLM[vllm.base_version]}")
    if transformers is not None and transformers >= FIRST_BAD_TRANSFORMERS:
        reasons.append(f"transformers {versions['transformers']} breaks the 1B models (5.17 renamed "
                       "PixtralRotaryEmbedding, which vLLM imports)")
    if not reasons:
        return None
    return ("; ".join(reasons) + " (LightOn's LightOnOCR README). Install the gpu extra's versions: "
            "pip install 'ocrq[gpu]' (vLLM 0.26.0 ran here; transformers 5.16.1).")
