"""What one decode step of LightOnOCR-2-1B costs on this GPU, part by part, outside the engine.

    python bench/gpu_decode.py --out results.jsonl

- attention: a decode kernel over a paged KV cache laid out as vLLM 0.26 lays it out (logical
  (blocks, kv heads, block size, K|V); NHD in memory by default, as the engine has it), for each backend, KV
  dtype and block size; one layer, times the 28 layers. Reports the KV bytes read per second.
  Backends: fa3 (vLLM's flash-attention, what FLASH_ATTN runs on Hopper; fp8 KV with fp8 queries) and
  flashinfer (what vLLM's FLASHINFER backend runs for decoding on Hopper: FlashInfer's XQA kernel through
  trtllm_batch_decode_with_kv_cache, bf16 queries also over fp8 KV; JIT-compiled on first use).
- sampling: vLLM's own top-p (temperature 0.2, top_p 0.9) and the random draw over the 151,936-token vocabulary.
- lm_head: the logits GEMM.

Context lengths are spread evenly over the prompt plus what has been generated (2,377 + 0..1,000 tokens).
Each figure is the median of --repeats timed calls after warm-up, by CUDA events.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_raw import emit

from ocrq_vllm_plugin.selfcheck import cuda_median_ms

LAYERS, Q_HEADS, KV_HEADS, HEAD_DIM, HIDDEN, VOCAB = 28, 16, 8, 128, 1024, 151_936
PROMPT_TOKENS, GENERATED = 2377, 1000


# vLLM's FlashInfer workspace (VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE default).
FLASHINFER_WORKSPACE_BYTES = 394 * 1024 * 1024


def attention(*, batch: int, block: int, dtype: str, repeats: int, backend: str = "fa3", layout: str = "NHD") -> dict:
    device = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(0)
    lengths = torch.linspace(PROMPT_TOKENS, PROMPT_TOKENS + GENERATED, batch).round().to(torch.int32)
    blocks_per_seq = -(-int(lengths.max()) // block)
    total_blocks = batch * blocks_per_seq
    cache_dtype = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
    # The logical shape is (blocks, kv heads, block, K|V); NHD keeps tokens outermost within a block in memory.
    memory_shape = (total_blocks, block, KV_HEADS, 2 * HEAD_DIM) if layout == "NHD" else (
        total_blocks, KV_HEADS, block, 2 * HEAD_DIM)
    cache = torch.empty(memory_shape, dtype=torch.bfloat16, device=device)
    cache.normal_(0, 1).clamp_(-4, 4)
    cache = cache.to(cache_dtype)
    by_token = cache if layout == "NHD" else cache.transpose(1, 2)  # (blocks, block, kv heads, K|V) views
    key_cache, value_cache = by_token.split(HEAD_DIM, dim=-1)
    block_table = torch.randperm(total_blocks, generator=gen).view(batch, blocks_per_seq).to(torch.int32).to(device)
    seqused = lengths.to(device)
    q = torch.randn(batch, Q_HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
    out = torch.empty_like(q)
    if backend == "fa3":
        call, kernel = _fa3_call(q, key_cache, value_cache, out, block_table, seqused, lengths, dtype=dtype)
    elif backend == "flashinfer":
        call, kernel = _flashinfer_call(q, key_cache, value_cache, out, block_table, seqused, lengths)
    else:
        raise ValueError(f"unknown backend {backend!r}")
    started = time.monotonic()
    call()
    torch.cuda.synchronize()
    first_call_s = time.monotonic() - started  # FlashInfer compiles its kernel here the first time
    ms = cuda_median_ms(call, repeats=repeats, warmup=3)
    kv_bytes = int(lengths.sum()) * KV_HEADS * 2 * HEAD_DIM * cache.element_size()
    row = {
        "part": "attention", "backend": backend, "kernel": kernel, "layout": layout, "kv_dtype": dtype,
        "block_size": block, "batch": batch, "ms_per_layer": round(ms, 4), "ms_per_step": round(ms * LAYERS, 2),
        "kv_gb_per_s": round(kv_bytes / ms / 1e6, 1), "first_call_s": round(first_call_s, 2),
    }
    if backend != "fa3":  # the same cache through FA3: a fast kernel that reads the wrong bytes would show here
        reference = torch.empty_like(out)
        _fa3_call(q, key_cache, value_cache, reference, block_table, seqused, lengths, dtype=dtype)[0]()
        row["rel_diff_vs_fa3"] = round(((out.float() - reference.float()).norm() / reference.float().norm()).item(), 5)
    del cache
    torch.cuda.empty_cache()
    return row


def _fa3_call(q, key_cache, value_cache, out, block_table, seqused, lengths, *, dtype: str):
    from vllm.v1.attention.backends.fa_utils import get_flash_attn_version
    from vllm.vllm_flash_attn import flash_attn_varlen_func

    batch, device = q.shape[0], q.device
    scales = {}
    if dtype == "fp8":  # vLLM's FLASH_ATTN quantizes the query too when the KV cache is fp8
        q = q.to(torch.float8_e4m3fn)
        one = torch.ones(1, dtype=torch.float32, device=device)
        scales = {name: one.expand(batch, KV_HEADS) for name in ("q_descale", "k_descale", "v_descale")}
    cu_q = torch.arange(batch + 1, dtype=torch.int32, device=device)
    version = get_flash_attn_version()

    def call() -> None:
        flash_attn_varlen_func(
            q=q, k=key_cache, v=value_cache, out=out, cu_seqlens_q=cu_q, max_seqlen_q=1, seqused_k=seqused,
            max_seqlen_k=int(lengths.max()), softmax_scale=HEAD_DIM**-0.5, causal=True, block_table=block_table,
            fa_version=version, **scales,
        )

    return call, f"fa{version}"


def _flashinfer_call(q, key_cache, value_cache, out, block_table, seqused, lengths):
    from flashinfer.decode import trtllm_batch_decode_with_kv_cache

    workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)

    def call() -> None:
        # As vLLM 0.26's FlashInferImpl calls it for Hopper decoding (k/v scales 1: bmm1 = softmax scale).
        trtllm_batch_decode_with_kv_cache(
            query=q, kv_cache=(key_cache, value_cache), workspace_buffer=workspace, block_tables=block_table,
            seq_lens=seqused, max_seq_len=int(lengths.max()), bmm1_scale=HEAD_DIM**-0.5, bmm2_scale=1.0,
            out=out, kv_layout="NHD", backend="xqa",
        )

    return call, "xqa"


def prebuild_flashinfer(*, dtypes: list[str], blocks: list[int]) -> dict:
    """JIT-compile the XQA kernels the survey will call, all at once (each build is its own nvcc/ninja run)."""
    from concurrent.futures import ThreadPoolExecutor

    from flashinfer.jit.xqa import gen_xqa_module

    def build(dtype: str, block: int) -> float:
        started = time.monotonic()
        kv = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
        gen_xqa_module(torch.bfloat16, kv, block, HEAD_DIM, Q_HEADS // KV_HEADS, False, torch.bfloat16, 1).build_and_load()
        return round(time.monotonic() - started, 1)

    started = time.monotonic()
    combos = [(d, b) for d in dtypes for b in blocks]
    with ThreadPoolExecutor(max_workers=len(combos)) as pool:
        seconds = list(pool.map(lambda c: build(*c), combos))
    return {"part": "flashinfer-jit", "builds": {f"{d}-{b}": s for (d, b), s in zip(combos, seconds)},
            "wall_s": round(time.monotonic() - started, 1)}


def sampling(*, batch: int, repeats: int) -> dict:
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p, random_sample

    device = torch.device("cuda")
    logits = torch.randn(batch, VOCAB, dtype=torch.float32, device=device) * 3
    p = torch.full((batch,), 0.9, dtype=torch.float32, device=device)

    def call() -> None:
        scaled = logits.div(0.2)
        filtered = apply_top_k_top_p(scaled, None, p)
        random_sample(filtered.softmax(dim=-1, dtype=torch.float32), {})

    return {"part": "sampling", "batch": batch, "top_p": 0.9, "ms_per_step": round(cuda_median_ms(call, repeats=repeats, warmup=3), 3)}


def lm_head(*, batch: int, repeats: int) -> dict:
    device = torch.device("cuda")
    hidden = torch.randn(batch, HIDDEN, dtype=torch.bfloat16, device=device)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, device=device)

    def call() -> None:
        (hidden @ weight.t()).float()

    return {"part": "lm_head", "batch": batch, "ms_per_step": round(cuda_median_ms(call, repeats=repeats, warmup=3), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="256,512")
    parser.add_argument("--block-sizes", default="16,64,128,256")
    parser.add_argument("--kv-dtypes", default="bf16,fp8")
    parser.add_argument("--backends", default="fa3", help="fa3, flashinfer, or both (comma-separated)")
    parser.add_argument("--layouts", default="NHD", help="NHD (the engine's), HND, or both")
    parser.add_argument("--skip-parts", action="store_true", help="attention only: no sampling or lm_head rows")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--label", default="decode-parts")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    gpu = torch.cuda.get_device_name()
    for backend in args.backends.split(","):
        if backend == "flashinfer":  # after FA3's rows: a build that fails or hangs costs those nothing
            try:
                row = prebuild_flashinfer(dtypes=args.kv_dtypes.split(","),
                                          blocks=[int(b) for b in args.block_sizes.split(",")])
            except Exception as exc:  # noqa: BLE001 - a failed build shows again, per case, below
                row = {"part": "flashinfer-jit", "error": repr(exc)[:600]}
            emit({"mode": "decode-parts", "label": args.label, "gpu": gpu, **row}, args.out)
        cases = [
            (layout, dtype, block, batch)
            for layout in args.layouts.split(",")
            for dtype in args.kv_dtypes.split(",")
            for block in (int(b) for b in args.block_sizes.split(","))
            for batch in batches
        ]
        for layout, dtype, block, batch in cases:
            try:
                row = attention(batch=batch, block=block, dtype=dtype, repeats=args.repeats, backend=backend,
                                layout=layout)
            except Exception as exc:  # noqa: BLE001 - one unsupported combination must not end the survey
                row = {"part": "attention", "backend": backend, "layout": layout, "kv_dtype": dtype,
                       "block_size": block, "batch": batch, "error": repr(exc)[:300]}
            emit({"mode": "decode-parts", "label": args.label, "gpu": gpu, **row}, args.out)
    if not args.skip_parts:
        for batch in batches:
            for row in (sampling(batch=batch, repeats=args.repeats), lm_head(batch=batch, repeats=args.repeats)):
                emit({"mode": "decode-parts", "label": args.label, "gpu": gpu, **row}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
