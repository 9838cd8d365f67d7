"""On a GPU: per-image attention against vLLM's dense block-diagonal mask, for error and time.

    python -m ocrq_vllm_plugin.selfcheck
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import torch.nn.functional as F

from ocrq_vllm_plugin.pixtral_attention import ImageSpans, attend_per_image

# Patches per image: a 1190x1540 page, a square 1540 px page, a business card, a half page.
LENGTHS = [9350, 12100, 1488, 4620]
HEADS, HEAD_DIM = 16, 64


def dense_mask_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """What vLLM 0.26 does without xformers: one SDPA over all images with a dense block-diagonal mask."""
    from transformers.models.pixtral.modeling_pixtral import generate_block_attention_mask

    mask = generate_block_attention_mask(lengths, q.unsqueeze(0))
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0), attn_mask=mask
    )
    return out.squeeze(0).transpose(0, 1)


def cuda_median_ms(fn, *, repeats: int = 5, warmup: int = 1) -> float:
    """Median milliseconds of fn() on the current CUDA stream, by CUDA events, after warmup calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    if not torch.cuda.is_available():
        print("selfcheck needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(1234)
    total = sum(LENGTHS)
    q, k, v = (torch.randn(total, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    spans = ImageSpans.of(LENGTHS, device=q.device)
    reference = torch.cat(
        [
            F.scaled_dot_product_attention(
                qi.double().transpose(0, 1), ki.double().transpose(0, 1), vi.double().transpose(0, 1)
            ).transpose(0, 1)
            for qi, ki, vi in zip(q.split(LENGTHS), k.split(LENGTHS), v.split(LENGTHS))
        ]
    )
    report: dict = {"lengths": LENGTHS}
    variants = {
        "dense_mask": lambda: dense_mask_attention(q, k, v, LENGTHS),
        "flash_varlen": lambda: attend_per_image(q, k, v, spans, backend="flash"),
        "sdpa_per_image": lambda: attend_per_image(q, k, v, spans, backend="sdpa"),
    }
    ok = True
    for name, fn in variants.items():
        out = fn()
        error = ((out.double() - reference).norm() / reference.norm()).item()
        finite = bool(torch.isfinite(out).all())
        ok &= finite and error < 2e-2
        report[name] = {"rel_error": round(error, 6), "finite": finite, "ms": round(cuda_median_ms(fn), 3)}
    report["ok"] = ok
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
