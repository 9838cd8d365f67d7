"""Encoder + prefill GPU time per page, for several encoder modes, in one in-process vLLM engine.

    VLLM_ENABLE_V1_MULTIPROCESSING=0 python bench/gpu_prefill_profile.py --model DIR --pages 60 --out R.jsonl \
        --tables OUTDIR --modes fused/norm/off,fused/gemm/off,fused/gemm/on

One offline `LLM` with the h200 profile's scheduling (max_num_batched_tokens 16384, FLASH_ATTN, prefix caching
off, one image a prompt, no multimodal cache) and eager execution: the h200 profile compiles nothing
(compilation mode 0) and captures CUDA graphs for decoding only, so a 1-token page runs the same kernels.
The engine core runs in this process, so torch's profiler sees its kernels. A mode is ROTARY/FUSION/DECODER:
the plugin's OCRQ_ENCODER_ROTARY (eager, fused), OCRQ_ENCODER_FUSION (gemm: the encoder's residual adds in the
projections' GEMMs; norm: in the RMS norms; both with the patch embedding as a GEMM; off) and OCRQ_DECODER_FUSION
(on: the decoder's q/k norms and rotary as one kernel; off, the default when left out), read again after clearing
the plugin's caches. For each it sends a few pages
to warm up, then profiles --pages pages of 1190x1540 with one generated token each, and reports the CUDA kernel
time a page, by kind of kernel. Load format dummy: random weights, the real model's shapes and kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_raw import PAGE, VARIANTS, make_page  # noqa: E402

PROMPT = "<|im_start|>system<|im_end|>\n<|im_start|>user\n<|image_pad|><|im_end|>\n<|im_start|>assistant\n"
# Kernel names -> kinds, first match wins (lower-case substrings).
KINDS = (
    ("qk_norm_rope", ("qknormrope",)),
    ("rotary_encoder_triton", ("rotary_kernel",)),
    ("rotary_decoder", ("rotary_embedding_kernel",)),
    ("kv_cache_write", ("reshape_and_cache",)),
    ("attention", ("flash", "fmha", "attn")),
    ("norm", ("norm",)),  # before conv: vLLM's fused_add_rms_norm_kernel names `_typeConvert`
    ("conv", ("convolve", "im2col", "fprop")),
    ("gemm", ("gemm", "nvjet", "xmma", "cutlass", "cublas")),
    ("act_silu_gelu", ("silu", "gelu", "act_and_mul")),
    ("sample_topk", ("sampl", "topk", "top_k", "softmax", "argmax", "sort", "gumbel", "exponential")),
    ("cat", ("catarray", "cat_")),
    ("copy", ("copy",)),  # after cat: CatArrayBatchedCopy
    ("mul_add_neg", ("mul", "add", "neg", "sub")),
    ("memcpy_memset", ("memcpy", "memset")),
)


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, needles in KINDS:
        if any(n in low for n in needles):
            return kind
    return "other"


def cuda_kernels(prof) -> list[tuple[str, float, int]]:
    """(name, self device ms, calls) of every kernel in a finished torch profile."""
    from torch.autograd import DeviceType

    rows = []
    for event in prof.key_averages():
        if event.device_type != DeviceType.CUDA:
            continue
        ms = event.self_device_time_total / 1000.0
        if ms > 0:
            rows.append((event.key, ms, event.count))
    return sorted(rows, key=lambda r: -r[1])


def select(rotary: str, fusion: str, decoder: str) -> None:
    """The plugin's modes for the next pages (it reads them when its caches are cleared)."""
    os.environ["OCRQ_ENCODER_ROTARY"], os.environ["OCRQ_ENCODER_FUSION"] = rotary, fusion
    os.environ["OCRQ_DECODER_FUSION"] = decoder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=12)
    parser.add_argument("--modes", default="fused/norm/off,fused/gemm/on",
                        help="ROTARY/FUSION/DECODER, comma-separated")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    parser.add_argument("--max-num-batched-tokens", type=int, default=16384)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tables", type=Path, help="folder for each mode's kernel table (profile-prefill-MODE.txt)")
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    modes = [(mode, *(mode.split("/") + ["off", "off"])[:3]) for mode in args.modes.split(",")]
    select(*modes[0][1:])

    import torch
    from torch.profiler import ProfilerActivity, profile
    from vllm import LLM, SamplingParams

    from ocrq_vllm_plugin import env, pixtral_attention, qwen3_attention

    t0 = time.time()
    llm = LLM(
        model=args.model, load_format="dummy", enforce_eager=True, attention_backend="FLASH_ATTN",
        max_model_len=7168, max_num_seqs=512, max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization, limit_mm_per_prompt={"image": 1},
        mm_processor_cache_gb=0, enable_prefix_caching=False,
    )
    from vllm.model_executor.models import pixtral

    patched = bool(getattr(pixtral.PixtralHFVisionModel, "_ocrq_per_image_attention", False))
    print(json.dumps({"event": "engine", "ready_s": round(time.time() - t0, 1), "plugin_patched": patched}),
          flush=True)
    images = [make_page(PAGE, seed=i) for i in range(VARIANTS)]
    params = SamplingParams(max_tokens=1, temperature=0.2, top_p=0.9, ignore_eos=True)

    def pages(n: int) -> list[dict]:
        return [{"prompt": PROMPT, "multi_modal_data": {"image": images[i % VARIANTS]}} for i in range(n)]

    for mode, rotary, fusion, decoder in modes:
        select(rotary, fusion, decoder)
        for cached in (env.current_env, pixtral_attention.rotary_mode, pixtral_attention.fusion_mode,
                       qwen3_attention.decoder_fusion_mode):
            cached.cache_clear()
        llm.generate(pages(args.warmup), params, use_tqdm=False)
        torch.cuda.synchronize()
        batch = pages(args.pages)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            start = time.time()
            outputs = llm.generate(batch, params, use_tqdm=False)
            torch.cuda.synchronize()
            wall = time.time() - start
        kernels = cuda_kernels(prof)
        total = sum(ms for _, ms, _ in kernels)
        kinds: dict[str, float] = {}
        for name, ms, _ in kernels:
            kinds[kind_of(name)] = kinds.get(kind_of(name), 0.0) + ms
        prompt_tokens = sum(len(o.prompt_token_ids) for o in outputs) / len(outputs)
        result = {
            "mode": "prefill-profile", "encoder": mode, "rotary": rotary, "fusion": fusion, "decoder": decoder,
            "rotary_mode_seen": pixtral_attention.rotary_mode(), "fusion_mode_seen": pixtral_attention.fusion_mode(),
            "decoder_mode_seen": qwen3_attention.decoder_fusion_mode(),
            "fused_add_rms_norm_calls": sum(c for name, _, c in kernels if "fused_add_rms_norm" in name.lower()),
            "pages": args.pages, "mean_prompt_tokens": round(prompt_tokens, 1), "wall_s": round(wall, 3),
            "pages_per_s_wall_profiled": round(args.pages / wall, 2),
            "cuda_ms_total": round(total, 1), "cuda_ms_per_page": round(total / args.pages, 2),
            "per_page_ms_by_kind": {k: round(v / args.pages, 2) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
            "top_kernels": [[name[:90], round(ms / args.pages, 3), calls] for name, ms, calls in kernels[:12]],
        }
        print(json.dumps(result), flush=True)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(json.dumps(result) + "\n")
        if args.tables:
            args.tables.mkdir(parents=True, exist_ok=True)
            lines = [f"{ms:10.3f} ms {calls:7d}  {kind_of(name):14s} {name[:160]}" for name, ms, calls in kernels]
            (args.tables / f"profile-prefill-{rotary}-{fusion}-{decoder}.txt").write_text(
                f"{args.pages} pages, encoder {mode}, CUDA kernel time {total:.1f} ms\n" + "\n".join(lines) + "\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
