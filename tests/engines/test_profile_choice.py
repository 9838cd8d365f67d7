"""`ocrq engine --profile auto` on the cards NVML names (a fake nvidia-smi answering as each would), and the
warning for a profile whose KV cache cannot hold its own sequences, on paper and from a serving engine."""

from __future__ import annotations

import logging
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import typer
from typer.testing import CliRunner

from cli.engine import engine as engine_command
from worker.engines import launcher
from worker.engines.profiles import STEADY_PAGE_TOKENS, get_profile, kv_shortfall, kv_tokens_estimate

# nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits, as each card answers (MiB).
CARDS = {
    "NVIDIA H100 80GB HBM3": (81559, "h100"),
    "NVIDIA H100 PCIe": (81559, "h100"),
    "NVIDIA H100 NVL": (95830, "h100"),
    "NVIDIA H200": (143771, "h200"),
    "NVIDIA GH200 480GB": (97871, "h100"),
    "NVIDIA A100-SXM4-80GB": (81920, "a100-80"),
    "NVIDIA A100-SXM4-40GB": (40960, "l40s"),
    "NVIDIA L40S": (46068, "l40s"),
    "NVIDIA RTX 6000 Ada Generation": (49140, "l40s"),
    "NVIDIA L4": (23034, "24gb"),
    "NVIDIA A10": (23028, "24gb"),
    "Tesla T4": (15360, "16gb"),
}


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    """Put a fake nvidia-smi first on PATH; returns a function that sets the cards it reports."""
    script = tmp_path / "nvidia-smi"
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")

    def cards(*rows: tuple[str, int]) -> None:
        lines = "\n".join(f"{i}, {name}, {mib}" for i, (name, mib) in enumerate(rows))
        script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{lines}\nEOF\n")
        script.chmod(0o755)

    return cards


def _dry_run(*args: str) -> list[list[str]]:
    app = typer.Typer()
    app.command()(engine_command)
    result = CliRunner().invoke(app, ["--dry-run", "--model", "/m", *args])
    assert result.exit_code == 0, result.output
    return [shlex.split(line) for line in result.output.splitlines() if " serve " in line]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("card", sorted(CARDS))
def test_auto_picks_the_profile_of_the_card_nvml_names(nvidia_smi, card, caplog):
    mib, expected = CARDS[card]
    nvidia_smi((card, mib))
    with caplog.at_level(logging.INFO, logger="ocrq.engine"):
        [argv] = _dry_run("--profile", "auto")
    profile = get_profile(expected)
    assert _flag(argv, "--max-num-seqs") == str(profile.max_num_seqs)
    assert _flag(argv, "--gpu-memory-utilization") == f"{profile.gpu_memory_utilization:g}"
    assert f"profile {expected}, chosen for {card} ({mib / 1024:.0f} GiB)" in caplog.text  # it says what it picked


def test_auto_is_the_default_and_sizes_for_the_smallest_card(nvidia_smi):
    nvidia_smi(("NVIDIA H200", 143771), ("NVIDIA H100 80GB HBM3", 81559))
    engines = _dry_run()
    assert len(engines) == 2 and {_flag(a, "--max-num-seqs") for a in engines} == {str(get_profile("h100").max_num_seqs)}
    assert {_flag(a, "--kv-cache-dtype") for a in engines} == {"fp8"}


def test_auto_without_a_card_is_refused(nvidia_smi):
    nvidia_smi()
    assert launcher.detect_gpus() == []
    with pytest.raises(RuntimeError, match="no GPU found"):
        launcher.auto_profile([])


@pytest.mark.parametrize("name", ["h200", "h100", "a100-80", "l40s", "24gb", "16gb"])
def test_every_profile_holds_its_own_sequences_on_its_card(name):
    card_gib = {"h200": 139.8, "h100": 79.6, "a100-80": 80.0, "l40s": 44.9, "24gb": 22.5, "16gb": 15.0}[name]
    profile = get_profile(name)
    assert kv_shortfall(profile, kv_tokens_estimate(profile, total_gib=card_gib)) is None


def test_the_h200_profile_on_an_h100_warns_before_it_starts(nvidia_smi, caplog):
    nvidia_smi(("NVIDIA H100 80GB HBM3", 81559))
    with caplog.at_level(logging.WARNING, logger="ocrq.engine"):
        _dry_run("--profile", "h200", "--kv-cache-dtype", "fp8")
    assert "holds" in caplog.text and "not its max_num_seqs 512" in caplog.text and "--max-num-seqs" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ocrq.engine"):
        _dry_run("--profile", "h100")
    assert "max_num_seqs" not in caplog.text


class _Metrics(BaseHTTPRequestHandler):
    blocks = 0

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = ("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                "# TYPE vllm:cache_config_info gauge\n"
                f'vllm:cache_config_info{{block_size="16",cache_dtype="fp8",num_gpu_blocks="{self.blocks}"}} 1.0\n')
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(("blocks", "warned"), [(30_000, True), (82_304, False)])
def test_a_serving_engine_whose_kv_cache_is_short_warns(blocks, warned, caplog):
    """vLLM reports its KV cache as num_gpu_blocks x block_size; 30,000 blocks of 16 hold 142 steady pages, 82,304
    (what one H100 reported) 389."""
    handler = type("Metrics", (_Metrics,), {"blocks": blocks})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = launcher.EngineSpec(name="vllm-gpu0-0-bulk", argv=[], env={}, url=f"http://127.0.0.1:{server.server_port}",
                                   served_model_name="m", profile=get_profile("h100"))
        with caplog.at_level(logging.INFO, logger="ocrq.engine"):
            shortfall = launcher.check_kv(spec)
    finally:
        server.shutdown()
    assert f"KV cache {blocks * 16:,} tokens" in caplog.text
    assert (shortfall is not None) == warned
    if warned:
        assert f"holds {blocks * 16 // STEADY_PAGE_TOKENS} pages" in shortfall and "WARNING" in caplog.text


def test_the_h100_profile_decodes_fp8_with_xqa_as_the_h200_one_does():
    """On one H100 the h100 engine logged decode_backend=flashinfer-native while the h200 one beside it used XQA:
    the offline switch to XQA was given to h200 alone (BENCHMARKS.md, 2026-12-06, issue 54)."""
    from worker.engines.profiles import on_host, plugin_env

    for name in ("h200", "h100"):
        env = plugin_env(on_host(get_profile(name), kernels="nvcc"))
        assert env.get("VLLM_HAS_FLASHINFER_CUBIN") == "1", name
    assert "VLLM_HAS_FLASHINFER_CUBIN" not in plugin_env(on_host(get_profile("l40s"), kernels="nvcc"))
