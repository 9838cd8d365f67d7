"""What one decode step of LightOnOCR-2-1B costs on this GPU, part by part, outside the engine.

    python bench/gpu_decode.py --out results.jsonl

- attention: vLLM's flash-attention (FA3 on Hopper) over a paged KV cache laid out as vLLM 0.26 lays it out
  ((blocks, kv heads, block size, K|V)), for each KV dtype and block size; one layer, times the 28 layers.
  Reports the KV bytes read per second against the card's bandwidth.
- sampling: vLLM's own top-p (temperature 0.2, top_p 0.9) and the random draw over the 151,936-token vocabulary.
- lm_head: the logits GEMM.

Context lengths are spread evenly over the prompt plus what has been generated (2,377 + 0..1,000 tokens).
Each figure is the median of --repeats timed calls after warm-up, by CUDA events.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_raw import emit

from ocrq_vllm_plugin.selfcheck import cuda_median_ms

LAYERS, Q_HEADS, KV_HEADS, HEAD_DIM, HIDDEN, VOCAB = 28, 16, 8, 128, 1024, 151_936
PROMPT_TOKENS, GENERATED = 2377, 1000


def attention(*, batch: int, block: int, dtype: str, repeats: int) -> dict:
    from vllm.v1.attention.backends.fa_utils import get_flash_attn_version
    from vllm.vllm_flash_attn import flash_attn_varlen_func

    device = torch.device("cuda")
    gen = torch.Generator(device="cpu").manual_seed(0)
    lengths = torch.linspace(PROMPT_TOKENS, PROMPT_TOKENS + GENERATED, batch).round().to(torch.int32)
    blocks_per_seq = -(-int(lengths.max()) // block)
    total_blocks = batch * blocks_per_seq
    cache_dtype = torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16
    cache = torch.empty(total_blocks, KV_HEADS, block, 2 * HEAD_DIM, dtype=torch.bfloat16, device=device)
    cache.normal_(0, 1).clamp_(-4, 4)
    cache = cache.to(cache_dtype)
    key_cache, value_cache = cache.transpose(1, 2).split(HEAD_DIM, dim=-1)
    block_table = torch.randperm(total_blocks, generator=gen).view(batch, blocks_per_seq).to(torch.int32).to(device)
    q = torch.randn(batch, Q_HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
    out = torch.empty_like(q)
    scales = {}
    if dtype == "fp8":
        q = q.to(torch.float8_e4m3fn)
        one = torch.ones(1, dtype=torch.float32, device=device)
        scales = {name: one.expand(batch, KV_HEADS) for name in ("q_descale", "k_descale", "v_descale")}
    cu_q = torch.arange(batch + 1, dtype=torch.int32, device=device)
    seqused = lengths.to(device)
    version = get_flash_attn_version()

    def call() -> None:
        flash_attn_varlen_func(
            q=q, k=key_cache, v=value_cache, out=out, cu_seqlens_q=cu_q, max_seqlen_q=1, seqused_k=seqused,
            max_seqlen_k=int(lengths.max()), softmax_scale=HEAD_DIM**-0.5, causal=True, block_table=block_table,
            fa_version=version, **scales,
        )

    ms = cuda_median_ms(call, repeats=repeats, warmup=3)
    kv_bytes = int(lengths.sum()) * KV_HEADS * 2 * HEAD_DIM * cache.element_size()
    del cache
    torch.cuda.empty_cache()
    return {
        "part": "attention", "kv_dtype": dtype, "block_size": block, "batch": batch, "fa_version": version,
        "ms_per_layer": round(ms, 4), "ms_per_step": round(ms * LAYERS, 2),
        "kv_gb_per_s": round(kv_bytes / ms / 1e6, 1),
    }


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
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--label", default="decode-parts")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    for batch in batches:
        for dtype in args.kv_dtypes.split(","):
            for block in (int(b) for b in args.block_sizes.split(",")):
                try:
                    rows.append(attention(batch=batch, block=block, dtype=dtype, repeats=args.repeats))
                except Exception as exc:  # noqa: BLE001 - one unsupported combination must not end the survey
                    rows.append({"part": "attention", "kv_dtype": dtype, "block_size": block, "batch": batch,
                                 "error": repr(exc)[:300]})
        rows.append(sampling(batch=batch, repeats=args.repeats))
        rows.append(lm_head(batch=batch, repeats=args.repeats))
    for row in rows:
        emit({"mode": "decode-parts", "label": args.label, "gpu": torch.cuda.get_device_name(), **row}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
