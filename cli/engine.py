"""`ocrq engine`: launch this host's OCR engines from a profile (thin over worker.engines.launcher)."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Annotated

import typer

from worker.engines.profiles import DEFAULT_MODEL, INTERACTIVE_BULK_SM_PERCENT, PROFILES, get_profile


def engine(
    profile: Annotated[str, typer.Option(
        help=f"Card profile: auto (by the card's name and memory), {', '.join(PROFILES)}.")] = "auto",
    backend: Annotated[str, typer.Option(help="vllm (GPU) or cpu (rapidocr stand-in, same API).")] = "vllm",
    model: Annotated[str, typer.Option(help="Hub id or local model directory.")] = DEFAULT_MODEL,
    port: Annotated[int, typer.Option(help="First engine's port; further engines take the next ones.")] = 8100,
    host: Annotated[str, typer.Option(help="Address the engines listen on.")] = "127.0.0.1",
    engines_per_gpu: Annotated[int, typer.Option(help="Bulk engines per GPU (ignored with --lanes).")] = 1,
    lanes: Annotated[str, typer.Option(help="Engines per GPU by lane, e.g. bulk,interactive.")] = "",
    share_weights: Annotated[bool | None, typer.Option(
        help="Engines of one GPU map one copy of the weights (default: on with several engines per GPU).")] = None,
    kv_cache_gib: Annotated[float | None, typer.Option(help="Fixed KV cache per bulk engine, GiB.")] = None,
    state_dir: Annotated[Path | None, typer.Option(help="Weight handles and engine state (default: a temp dir).")]
    = None,
    mps: Annotated[str, typer.Option(
        help="Run a GPU's engines under a private CUDA MPS daemon (side by side, not time-sliced): auto "
        "(bulk and interactive lanes on one GPU, if nvidia-cuda-mps-control exists), on or off.")] = "auto",
    bulk_sm_percent: Annotated[int | None, typer.Option(
        help="Under MPS, the share of SMs a bulk engine may use beside an interactive one "
        f"(1-100; default {INTERACTIVE_BULK_SM_PERCENT}).")] = None,
    gpus: Annotated[str, typer.Option(help="Comma-separated GPU indices; default: all.")] = "",
    served_model_name: Annotated[str | None, typer.Option(help="Name clients use; default: --model.")] = None,
    kv_cache_dtype: Annotated[str | None, typer.Option(help="Override: bf16 or fp8.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="Override the profile's share.")] = None,
    memory_cap_gib: Annotated[float | None, typer.Option(help="Behave as on a card of this size.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="Override.")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(help="Override.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Output cap used to size max_model_len.")] = None,
    api_server_count: Annotated[int | None, typer.Option(help="Override.")] = None,
    renderer_workers: Annotated[int | None, typer.Option(help="Override.")] = None,
    cuda_graphs: Annotated[str | None, typer.Option(help="Override: decode, compiled or off.")] = None,
    attention_backend: Annotated[str | None, typer.Option(
        help="Override the profile's vLLM attention backend, e.g. FLASH_ATTN or FLASHINFER.")] = None,
    encoder_plugin: Annotated[bool, typer.Option(help="Per-image encoder attention (ocrq plugin).")] = True,
    load_format: Annotated[str | None, typer.Option(help="vLLM load format, e.g. dummy.")] = None,
    vllm_args: Annotated[str, typer.Option(
        help="Further `vllm serve` flags for every engine, as one shell-quoted string, e.g. '--block-size 64'.")]
    = "",
    cpu_concurrency: Annotated[int, typer.Option(help="cpu backend: pages OCRed at once.")] = 1,
    log_dir: Annotated[Path | None, typer.Option(help="Write each engine's output to DIR/NAME.log.")] = None,
    ready_timeout_s: Annotated[float, typer.Option(help="Seconds to wait for /v1/models.")] = 900.0,
    # vLLM's scheduler and API servers turn CPU into GPU work: where the ocrq stack shares the host's cores, an
    # upload burst that took them all slowed prefill 1.7x (BENCHMARKS.md, 2026-12-02, issue 21, run 12).
    nice: Annotated[int, typer.Option(
        min=-20, max=19, help="CPU priority of the engines (-20 to 19), ahead of the ocrq stack's 0 on a shared host. "
        "Below 0 needs root or CAP_SYS_NICE; 0 leaves it.")] = -10,
    dry_run: Annotated[bool, typer.Option(help="Print the commands and exit.")] = False,
) -> None:
    """Start the OCR engines for this host, wait until they serve, restart any that dies; stop on SIGTERM."""
    from worker.engines import launcher as engine_launcher
    from worker.engines import mps as mps_daemon

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    lane_list = tuple(lane.strip() for lane in lanes.split(",") if lane.strip())
    if backend == "cpu":
        specs = engine_launcher.plan_cpu(
            served_model_name=served_model_name or model, host=host, port=port, concurrency=cpu_concurrency,
            lanes=lane_list,
        )
        if dry_run:
            return _print(specs)
        engine_launcher.take_cpu_priority(nice)
        raise typer.Exit(engine_launcher.run(specs, log_dir=log_dir, ready_timeout_s=ready_timeout_s))
    if backend != "vllm":
        raise typer.BadParameter("backend must be vllm or cpu")
    if refusal := engine_launcher.known_bad(engine_launcher.installed_versions()):
        typer.echo(f"error: {refusal}", err=True)
        raise typer.Exit(2)
    found = engine_launcher.detect_gpus()
    wanted = {g.strip() for g in gpus.split(",") if g.strip()}
    chosen_gpus = [g for g in found if not wanted or g["index"] in wanted]
    if dry_run and not chosen_gpus:
        chosen_gpus = [{"index": g or "0", "name": "", "memory_gib": 80.0} for g in (wanted or {"0"})]
    if profile == "auto":
        try:
            profile = engine_launcher.auto_profile(chosen_gpus)
        except RuntimeError as exc:
            raise typer.BadParameter(str(exc), param_hint="--profile") from exc
        cards = sorted({f"{g.get('name') or 'GPU'} ({g['memory_gib']:.0f} GiB)" for g in chosen_gpus})
        logging.getLogger("ocrq.engine").info("profile %s, chosen for %s", profile, ", ".join(cards))
    try:
        chosen = get_profile(
            profile,
            kv_cache_dtype=kv_cache_dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_tokens=max_tokens,
            api_server_count=api_server_count,
            renderer_workers=renderer_workers,
            cuda_graphs=cuda_graphs,
            attention_backend=attention_backend,
            encoder_plugin=encoder_plugin,
            kv_cache_gib=kv_cache_gib,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    card_lanes = lane_list or ("bulk",) * engines_per_gpu
    engine_count = len(card_lanes)
    state = state_dir or engine_launcher.default_state_dir(port)

    def plan(daemon: mps_daemon.MpsDaemon | None) -> list[engine_launcher.EngineSpec]:
        try:
            return engine_launcher.plan_vllm(
                profile=chosen, model=model, served_model_name=served_model_name, host=host, port=port,
                gpus=chosen_gpus, engines_per_gpu=engines_per_gpu, lanes=lane_list,
                share_weights=engine_count > 1 if share_weights is None else share_weights,
                state_dir=state, memory_cap_gib=memory_cap_gib, load_format=load_format,
                mps=daemon, bulk_sm_percent=bulk_sm_percent, extra_args=tuple(shlex.split(vllm_args)),
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc

    try:
        use_mps = mps_daemon.wanted(mps, lanes=card_lanes)
    except (ValueError, mps_daemon.MpsError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    planned = plan(mps_daemon.MpsDaemon(state / "mps") if use_mps else None)  # bad options fail before a daemon starts
    if dry_run:
        return _print(planned)
    engine_launcher.take_cpu_priority(nice)
    with mps_daemon.serving(mps, lanes=card_lanes, directory=state / "mps") as daemon:
        code = engine_launcher.run(plan(daemon), log_dir=log_dir, ready_timeout_s=ready_timeout_s, mps=daemon)
    raise typer.Exit(code)


def _print(specs: list) -> None:
    for spec in specs:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env.items())
        typer.echo(f"{env} {shlex.join(spec.argv)}".strip())


if __name__ == "__main__":
    typer.run(engine)
