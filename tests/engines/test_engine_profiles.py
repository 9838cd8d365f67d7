"""Engine profiles, the `vllm serve` command lines built from them, and the launcher that runs engines."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace

import httpx
import pytest
import typer
from typer.testing import CliRunner

from cli.engine import engine as engine_command
from ocrq_vllm_plugin.env import STATE_ENV
from ocrq_vllm_plugin.holder import process_start_ticks
from tests.support.servers import free_port, free_ports
from worker.engines import launcher as engine_launcher
from worker.engines import profiles
from worker.engines.profiles import (
    MAX_IMAGE_TOKENS,
    PROFILES,
    capped,
    get_profile,
    plugin_env,
    serve_argv,
)

LIGHTON_FLAGS = ["--limit-mm-per-prompt", '{"image": 1}', "--mm-processor-cache-gb", "0", "--no-enable-prefix-caching"]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def contains_run(argv: list[str], run: list[str]) -> bool:
    return any(argv[i : i + len(run)] == run for i in range(len(argv)))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_applies_lighton_flags_and_sizes(name):
    profile = get_profile(name)
    argv = serve_argv(profile, model="/models/lightonocr", port=8123)
    assert argv[1:5] == ["-m", "vllm.entrypoints.cli.main", "serve", "/models/lightonocr"]
    assert contains_run(argv, LIGHTON_FLAGS)
    assert json.loads(flag(argv, "--limit-mm-per-prompt")) == {"image": 1}
    assert int(flag(argv, "--max-model-len")) >= MAX_IMAGE_TOKENS + profile.max_tokens
    assert int(flag(argv, "--max-num-batched-tokens")) >= MAX_IMAGE_TOKENS
    assert float(flag(argv, "--gpu-memory-utilization")) == profile.gpu_memory_utilization
    assert flag(argv, "--max-num-seqs") == str(profile.max_num_seqs)
    assert flag(argv, "--api-server-count") == str(profile.api_server_count)
    assert flag(argv, "--renderer-num-workers") == str(profile.renderer_workers)
    assert flag(argv, "--kv-cache-dtype") == ("fp8" if name in ("h100", "h200") else "auto")  # fp8 native on Hopper
    assert flag(argv, "--port") == "8123"


def test_pair_sizes_grow_with_the_card():
    assert get_profile("16gb").pair_size == 2
    assert get_profile("24gb").pair_size > 2
    assert get_profile("h200").pair_size > get_profile("24gb").pair_size


def test_max_model_len_follows_the_output_cap():
    small, large = get_profile("16gb", max_tokens=1024), get_profile("16gb", max_tokens=8192)
    assert MAX_IMAGE_TOKENS + 1024 <= small.max_model_len < MAX_IMAGE_TOKENS + 2048
    assert large.max_model_len >= MAX_IMAGE_TOKENS + 8192


def test_fp8_kv_cache_override():
    argv = serve_argv(get_profile("h200", kv_cache_dtype="fp8"))
    assert flag(argv, "--kv-cache-dtype") == "fp8"


def test_h200_decodes_fp8_through_flashinfer_and_bf16_through_fa3():
    fp8, bf16 = get_profile("h200", kv_cache_dtype="fp8"), get_profile("h200", kv_cache_dtype="bf16")
    assert flag(serve_argv(fp8), "--attention-backend") == "FLASHINFER"
    assert flag(serve_argv(bf16), "--attention-backend") == "FLASH_ATTN"
    interactive = profiles.for_lane(fp8, "interactive")
    assert flag(serve_argv(interactive), "--attention-backend") == "FLASHINFER"
    # A backend named on the command line is the one run, fp8 or not; other cards keep vLLM's own choice.
    named = get_profile("h200", kv_cache_dtype="fp8", attention_backend="FLASH_ATTN")
    assert flag(serve_argv(named), "--attention-backend") == "FLASH_ATTN"
    assert "--attention-backend" not in serve_argv(get_profile("16gb", kv_cache_dtype="fp8"))


@pytest.mark.parametrize(("kernels", "backend", "cubin_env"), [
    ("nvcc", "FLASHINFER", "1"),  # XQA compiled here: vLLM must be told it may use it offline
    ("prebuilt", "FLASHINFER", None),  # flashinfer-cubin installed: vLLM finds it itself
    (None, "FLASH_ATTN", None),  # no way to get FlashInfer's kernels (the slim GPU image has no nvcc): FA3
])
def test_the_host_decides_whether_flashinfer_can_run(kernels, backend, cubin_env):
    fp8 = profiles.on_host(get_profile("h200", kv_cache_dtype="fp8"), kernels=kernels)
    assert flag(serve_argv(fp8), "--attention-backend") == backend
    assert profiles.plugin_env(fp8).get("VLLM_HAS_FLASHINFER_CUBIN") == cubin_env
    bf16 = profiles.on_host(get_profile("h200", kv_cache_dtype="bf16"), kernels=kernels)
    assert flag(serve_argv(bf16), "--attention-backend") == "FLASH_ATTN"
    assert "VLLM_HAS_FLASHINFER_CUBIN" not in profiles.plugin_env(bf16)
    # Asked for by name, FlashInfer runs whatever the host has (and decodes with XQA where it compiles here).
    named = profiles.on_host(get_profile("h200", attention_backend="FLASHINFER"), kernels=kernels)
    assert flag(serve_argv(named), "--attention-backend") == "FLASHINFER"
    assert profiles.plugin_env(named).get("VLLM_HAS_FLASHINFER_CUBIN") == cubin_env


@pytest.mark.parametrize(("kernels", "sampler_env"), [("nvcc", None), ("prebuilt", None), (None, "0")])
def test_vllm_samples_through_flashinfer_only_where_it_can_be_had(kernels, sampler_env):
    # vLLM 0.26's default sampler is FlashInfer's; an engine without FlashInfer failed at start unless told not to.
    for profile in (get_profile("h200"), get_profile("h200", kv_cache_dtype="fp8"), get_profile("16gb")):
        env = profiles.plugin_env(profiles.on_host(profile, kernels=kernels))
        assert env.get("VLLM_USE_FLASHINFER_SAMPLER") == sampler_env


def test_plan_vllm_falls_back_to_fa3_where_flashinfer_has_no_kernels(monkeypatch, tmp_path):
    monkeypatch.setattr(engine_launcher, "flashinfer_kernels", lambda: None)
    (spec,) = engine_launcher.plan_vllm(profile=get_profile("h200", kv_cache_dtype="fp8"), state_dir=tmp_path,
                                        gpus=[{"index": "0", "memory_gib": 140.0}])
    assert flag(spec.argv, "--attention-backend") == "FLASH_ATTN" and "VLLM_HAS_FLASHINFER_CUBIN" not in spec.env
    assert spec.env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    monkeypatch.setattr(engine_launcher, "flashinfer_kernels", lambda: "nvcc")
    (spec,) = engine_launcher.plan_vllm(profile=get_profile("h200", kv_cache_dtype="fp8"), state_dir=tmp_path,
                                        gpus=[{"index": "0", "memory_gib": 140.0}])
    assert flag(spec.argv, "--attention-backend") == "FLASHINFER" and spec.env["VLLM_HAS_FLASHINFER_CUBIN"] == "1"
    assert "VLLM_USE_FLASHINFER_SAMPLER" not in spec.env


def test_overrides_apply_and_none_keeps_the_profile():
    profile = get_profile("24gb", max_num_seqs=7, gpu_memory_utilization=None)
    assert profile.max_num_seqs == 7
    assert profile.gpu_memory_utilization == PROFILES["24gb"].gpu_memory_utilization


@pytest.mark.parametrize(
    "overrides",
    [
        {"kv_cache_dtype": "int4"},
        {"gpu_memory_utilization": 1.5},
        {"max_num_seqs": 0},
        {"max_num_batched_tokens": 1024},
        {"cuda_graphs": "sometimes"},
        {"no_such_field": 1},
    ],
)
def test_bad_overrides_are_refused(overrides):
    with pytest.raises(ValueError):
        get_profile("h200", **overrides)


def test_unknown_profile():
    with pytest.raises(ValueError, match="h200"):
        get_profile("tpu")


def test_cuda_graph_modes():
    decode = serve_argv(get_profile("h200"))
    assert json.loads(flag(decode, "--compilation-config")) == {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"}
    assert "--enforce-eager" in serve_argv(get_profile("h200", cuda_graphs="off"))
    compiled = serve_argv(get_profile("h200", cuda_graphs="compiled"))
    assert "--compilation-config" not in compiled and "--enforce-eager" not in compiled


def test_load_format_and_served_name():
    argv = serve_argv(
        get_profile("16gb"), model="/m", served_model_name="lightonai/LightOnOCR-2-1B", load_format="dummy"
    )
    assert flag(argv, "--served-model-name") == "lightonai/LightOnOCR-2-1B"
    assert flag(argv, "--load-format") == "dummy"
    assert flag(serve_argv(get_profile("16gb"), model="/m"), "--served-model-name") == "/m"


def test_memory_cap_scales_the_share():
    profile = capped(get_profile("16gb"), cap_gib=16, total_gib=140)
    assert profile.gpu_memory_utilization == pytest.approx(PROFILES["16gb"].gpu_memory_utilization * 16 / 140, abs=1e-4)
    assert profile.gpu_memory_utilization * 140 <= 16
    with pytest.raises(ValueError):
        capped(get_profile("16gb"), cap_gib=200, total_gib=140)


def test_encoder_plugin_switch():
    assert plugin_env(get_profile("h200")) == {"OCRQ_ENCODER_PLUGIN": "1"}
    assert plugin_env(get_profile("h200", encoder_plugin=False)) == {"OCRQ_ENCODER_PLUGIN": "0"}


def test_plan_two_engines_on_each_of_two_gpus():
    gpus = [{"index": "0", "memory_gib": 80.0}, {"index": "1", "memory_gib": 80.0}]
    specs = engine_launcher.plan_vllm(profile=get_profile("a100-80"), gpus=gpus, engines_per_gpu=2, port=9000)
    assert [s.url for s in specs] == [f"http://127.0.0.1:{9000 + i}" for i in range(4)]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "0", "1", "1"]
    assert len({flag(s.argv, "--port") for s in specs}) == 4
    # Without sharing each engine loads its own weights; both get the same fixed KV cache, and together
    # they stay within the profile's share of the card.
    kv = {int(flag(s.argv, "--kv-cache-memory-bytes")) for s in specs}
    assert len(kv) == 1
    per_engine = kv.pop() / 2**30 + profiles.ENGINE_OVERHEAD_GIB + profiles.WEIGHTS_GIB
    assert 2 * per_engine == pytest.approx(PROFILES["a100-80"].gpu_memory_utilization * 80, abs=0.1)
    assert all(s.role == "own" and "--load-format" not in s.argv for s in specs)


def test_plan_lanes_sharing_one_copy_of_the_weights(tmp_path):
    gpus = [{"index": "3", "memory_gib": 140.0}]
    bulk, interactive = engine_launcher.plan_vllm(
        profile=get_profile("h200", kv_cache_dtype="bf16"), model="/m", gpus=gpus, lanes=("bulk", "interactive"), share_weights=True,
        state_dir=tmp_path, load_format="dummy", port=8100,
    )
    assert (bulk.role, interactive.role) == ("holder", "attached")
    assert flag(bulk.argv, "--load-format") == "ocrq_holder" and bulk.env["OCRQ_HOLDER_LOAD_FORMAT"] == "dummy"
    assert flag(interactive.argv, "--load-format") == "ocrq_attach"
    assert bulk.env["OCRQ_SHARED_WEIGHTS_DIR"] == interactive.env["OCRQ_SHARED_WEIGHTS_DIR"] == str(tmp_path / "gpu3")
    assert bulk.env["OCRQ_ENGINE_STATE_FILE"] != interactive.env["OCRQ_ENGINE_STATE_FILE"]
    assert (bulk.env["OCRQ_ENGINE_LANE"], interactive.env["OCRQ_ENGINE_LANE"]) == ("bulk", "interactive")
    assert flag(bulk.argv, "--middleware") == profiles.STATUS_MIDDLEWARE
    # The interactive engine is small: few sequences and KV for exactly those at full length.
    seqs = int(flag(interactive.argv, "--max-num-seqs"))
    assert seqs == profiles.INTERACTIVE_MAX_NUM_SEQS < int(flag(bulk.argv, "--max-num-seqs"))
    small_kv = int(flag(interactive.argv, "--kv-cache-memory-bytes"))
    needed = seqs * int(flag(interactive.argv, "--max-model-len")) * profiles.KV_BYTES_PER_TOKEN_BF16
    assert needed <= small_kv <= 1.2 * needed
    # Weights count once: the bulk engine gets what the card has left after both engines' overheads.
    big_kv = int(flag(bulk.argv, "--kv-cache-memory-bytes")) / 2**30
    left = 0.9 * 140 - profiles.WEIGHTS_GIB - 2 * profiles.ENGINE_OVERHEAD_GIB - small_kv / 2**30
    assert big_kv == pytest.approx(left, abs=0.05)


@pytest.mark.parametrize("count", [2, 4, 8])
def test_every_gpu_of_the_host_gets_its_lanes_on_its_own_card_and_ports(tmp_path, count):
    gpus = [{"index": str(i), "memory_gib": 140.0} for i in range(count)]
    specs = engine_launcher.plan_vllm(
        profile=get_profile("h200"), model="/m", gpus=gpus, lanes=("bulk", "interactive"), share_weights=True,
        state_dir=tmp_path, load_format="dummy", port=8100,
    )
    assert len(specs) == 2 * count
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == [str(i // 2) for i in range(2 * count)]
    assert [s.url for s in specs] == [f"http://127.0.0.1:{8100 + i}" for i in range(2 * count)]
    assert sorted(int(flag(s.argv, "--port")) for s in specs) == list(range(8100, 8100 + 2 * count))
    # One holder of the weights per card, the other lane attached to that card's copy and no other.
    for card in range(count):
        holder, attached = specs[2 * card], specs[2 * card + 1]
        assert (holder.role, attached.role) == ("holder", "attached")
        shared = str(tmp_path / f"gpu{card}")
        assert holder.env["OCRQ_SHARED_WEIGHTS_DIR"] == attached.env["OCRQ_SHARED_WEIGHTS_DIR"] == shared
    assert len({s.env["OCRQ_ENGINE_STATE_FILE"] for s in specs}) == 2 * count
    # Every card alike: the same KV cache for each lane whatever card it is on.
    for lane in ("bulk", "interactive"):
        assert len({flag(s.argv, "--kv-cache-memory-bytes") for s in specs if s.env["OCRQ_ENGINE_LANE"] == lane}) == 1


def test_sharing_needs_two_engines_and_engines_must_fit():
    gpus = [{"index": "0", "memory_gib": 16.0}]
    with pytest.raises(ValueError, match="two engines"):
        engine_launcher.plan_vllm(profile=get_profile("16gb"), gpus=gpus, share_weights=True)
    with pytest.raises(ValueError, match="do not fit"):
        engine_launcher.plan_vllm(profile=get_profile("16gb"), gpus=gpus, engines_per_gpu=4)


def test_plan_without_gpu_is_refused():
    with pytest.raises(RuntimeError, match="cpu"):
        engine_launcher.plan_vllm(profile=get_profile("h200"), gpus=[])


def test_cli_dry_run_prints_the_serve_command():
    app = typer.Typer()
    app.command()(engine_command)
    result = CliRunner().invoke(
        app, ["--dry-run", "--profile", "16gb", "--gpus", "0", "--kv-cache-dtype", "fp8", "--model", "/m/dir"]
    )
    assert result.exit_code == 0, result.output
    assert "vllm.entrypoints.cli.main serve /m/dir" in result.output
    assert "--max-num-seqs 16" in result.output and "--kv-cache-dtype fp8" in result.output
    assert "--no-enable-prefix-caching" in result.output


def test_cli_passes_further_vllm_flags_to_every_engine():
    app = typer.Typer()
    app.command()(engine_command)
    result = CliRunner().invoke(
        app, ["--dry-run", "--gpus", "0", "--engines-per-gpu", "2", "--vllm-args", "--block-size 64 --seed '1 2'"]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "serve" in line]
    assert len(lines) == 2
    assert all(line.endswith("--block-size 64 --seed '1 2'") for line in lines)


def test_cli_overrides_the_profiles_attention_backend():
    app = typer.Typer()
    app.command()(engine_command)
    result = CliRunner().invoke(app, ["--dry-run", "--gpus", "0", "--kv-cache-dtype", "fp8",
                                      "--attention-backend", "FLASHINFER"])
    assert result.exit_code == 0, result.output
    argv = shlex.split(next(line for line in result.output.splitlines() if "serve" in line))
    assert argv[argv.index("--attention-backend") + 1] == "FLASHINFER"
    assert argv.count("--attention-backend") == 1
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8"


def test_cli_rejects_a_bad_override():
    app = typer.Typer()
    app.command()(engine_command)
    result = CliRunner().invoke(app, ["--dry-run", "--kv-cache-dtype", "int3"])
    assert result.exit_code != 0


@pytest.mark.timeout(180)
def test_launcher_waits_for_ready_restarts_a_dead_engine_and_stops():
    specs = engine_launcher.plan_cpu(served_model_name="m", port=free_port())
    url = specs[0].url
    stop, ready = threading.Event(), threading.Event()
    codes: list[int] = []

    def supervise() -> None:
        codes.append(
            engine_launcher.supervise(
                specs, stop=stop, restart_backoff_s=0.2, ready_timeout_s=60, on_ready=lambda _: ready.set()
            )
        )

    thread = threading.Thread(target=supervise)
    thread.start()
    try:
        assert ready.wait(60), "engine never became ready"
        assert engine_launcher.is_ready(url=url, model="m")
        first_pid = httpx.get(f"{url}/health").json()["pid"]
        os.kill(first_pid, signal.SIGKILL)
        deadline, second_pid = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            try:
                second_pid = httpx.get(f"{url}/health", timeout=2).json()["pid"]
                if second_pid != first_pid:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        assert second_pid is not None and second_pid != first_pid, "dead engine was not restarted"
    finally:
        stop.set()
        thread.join(60)
    assert codes == [0]
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/health", timeout=2)


@pytest.mark.timeout(420)
@pytest.mark.parametrize("dies", ["server", "engine_core"])
def test_a_dead_holder_takes_its_attached_engines_down_and_the_group_restarts(tmp_path, dies):
    """Whether the holder's server process dies, or only the engine core that exported the weights (vLLM's
    API servers outlived theirs by minutes on the H200), the group restarts."""
    # Two engines on consecutive ports: the second must be free too, or it never binds (seen with two test processes).
    bulk, interactive = engine_launcher.plan_cpu(served_model_name="m", port=free_ports(2),
                                                 lanes=("bulk", "interactive"))
    state_file = tmp_path / "holder.json"
    specs = [replace(bulk, role="holder", group="gpu0", env={STATE_ENV: str(state_file)}),
             replace(interactive, role="attached", group="gpu0")]
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=engine_launcher.supervise, args=(specs,), daemon=True,
                              kwargs={"stop": stop, "restart_backoff_s": 0.2, "ready_timeout_s": 150,
                                      "on_ready": lambda _: ready.set()})
    thread.start()

    def pids() -> list[int | None]:
        out = []
        for spec in specs:
            try:
                out.append(httpx.get(f"{spec.url}/health", timeout=2).json()["pid"])
            except httpx.HTTPError:
                out.append(None)
        return out

    try:
        # Two CPU stand-ins load rapidocr at once; on a loaded 2-core machine that took over a minute.
        assert ready.wait(150), "engines never became ready"
        first = pids()
        if dies == "server":
            os.kill(first[0], signal.SIGKILL)
        else:
            with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) as core:
                ticks = process_start_ticks(core.pid)
                state_file.write_text(json.dumps({"role": "holder", "holder": {"pid": core.pid, "start_ticks": ticks}}))
                time.sleep(3)  # past a supervisor check (engine_launcher.supervise looks every 2 s)
                assert pids() == first, "a live engine core was taken for a dead one"
                core.kill()
        deadline, now = time.monotonic() + 120, first
        while time.monotonic() < deadline:
            now = pids()
            if None not in now and now[0] != first[0] and now[1] != first[1]:
                break
            time.sleep(0.5)
        assert None not in now and now[0] != first[0], f"holder not restarted: {first} -> {now}"
        assert now[1] != first[1], "the attached engine kept running on a dead holder's weights"
    finally:
        stop.set()
        thread.join(60)


def test_the_engine_host_needs_no_celery():
    """`ocrq engine` and the engine client run where vLLM is installed; kombu and Celery need not be."""
    code = (
        "import builtins\n"
        "real = builtins.__import__\n"
        "def guard(name, *args, **kwargs):\n"
        "    if name.split('.')[0] in ('kombu', 'celery'):\n"
        "        raise ImportError(name)\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = guard\n"
        "import cli.engine, worker.engines.launcher, worker.engines.vllm, worker.engines.server_cpu\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("installed", "nvcc", "expected"), [
    ({"flashinfer"}, False, None),  # JIT sources only, nothing to compile them with: the slim GPU image
    ({"flashinfer", "flashinfer_cubin"}, False, None),  # cubins alone hold neither XQA nor the sampler
    ({"flashinfer", "flashinfer_cubin", "flashinfer_jit_cache"}, False, "prebuilt"),
    ({"flashinfer"}, True, "nvcc"),
    (set(), True, None),  # no FlashInfer at all
])
def test_flashinfer_kernels_come_prebuilt_in_both_wheels_or_from_nvcc(monkeypatch, installed, nvcc, expected):
    monkeypatch.setattr(profiles.importlib.util, "find_spec", lambda name: object() if name in installed else None)
    monkeypatch.setattr(profiles.shutil, "which", lambda name: "/usr/local/cuda/bin/nvcc" if nvcc else None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    assert profiles.flashinfer_kernels() == expected


def test_engine_refuses_a_vllm_or_transformers_known_to_break_the_model(monkeypatch):
    from typer.testing import CliRunner

    from cli.main import app
    from worker.engines import launcher

    assert launcher.known_bad({"vllm": "0.26.0", "transformers": "5.16.1"}) is None
    assert launcher.known_bad({"vllm": None, "transformers": None}) is None
    assert "vLLM 0.27.1+cu129 makes every LightOnOCR model loop" in launcher.known_bad(
        {"vllm": "0.27.1+cu129", "transformers": "5.16.1"})
    assert "transformers 5.17.0 breaks the 1B models" in launcher.known_bad(
        {"vllm": "0.30.0", "transformers": "5.17.0"})
    monkeypatch.setattr(launcher, "installed_versions", lambda: {"vllm": "0.27.1", "transformers": "5.16.1"})
    refused = CliRunner().invoke(app, ["engine", "--dry-run"])
    assert refused.exit_code == 2 and "error: vLLM 0.27.1 makes every LightOnOCR model loop" in refused.output
    assert "pip install 'ocrq[gpu]'" in refused.output and "Traceback" not in refused.output
