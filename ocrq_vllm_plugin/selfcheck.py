"""On a GPU: per-image attention against vLLM's dense block-diagonal mask, the fused rotary against HF's
element-wise one, and the residual adds folded into the norms and the patch embedding as a GEMM against vLLM's
own sequence, for error and time.

    python -m ocrq_vllm_plugin.selfcheck
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import torch.nn.functional as F

from ocrq_vllm_plugin.pixtral_attention import (
    ImageSpans,
    attend_per_image,
    embed_patches,
    encoder_attention,
    fused_residual_layers,
)

# Patch grids (rows, columns) per image: a 1190x1540 page, a square 1540 px page, a business card, a half page.
GRIDS = [(110, 85), (110, 110), (31, 48), (55, 84)]
LENGTHS = [rows * cols for rows, cols in GRIDS]
HEADS, HEAD_DIM, LAYERS = 16, 64, 24
TOLERANCE = 2e-2


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
        ok &= finite and error < TOLERANCE
        report[name] = {"rel_error": round(error, 6), "finite": finite, "ms": round(cuda_median_ms(fn), 3)}
    rotary = rotary_check()
    report["rotary"] = rotary
    fusion = fusion_check()
    report["fusion"] = fusion
    report["ok"] = ok and rotary["ok"] and fusion["ok"]
    print(json.dumps(report))
    return 0 if report["ok"] else 1


def pixtral_rotary_tables(grids: list[tuple[int, int]], *, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin as vLLM 0.26's PixtralHFVisionModel builds them (HF's PixtralRotaryEmbedding), LightOnOCR's config."""
    from transformers import PixtralVisionConfig
    from transformers.models.pixtral.modeling_pixtral import PixtralRotaryEmbedding, position_ids_in_meshgrid

    config = PixtralVisionConfig(image_size=1540, patch_size=14, hidden_size=HEADS * HEAD_DIM, num_attention_heads=HEADS,
                                 head_dim=HEAD_DIM)
    grids_as_patches = [torch.empty(1, 1, rows, cols) for rows, cols in grids]
    position_ids = position_ids_in_meshgrid(grids_as_patches, max_width=config.image_size // config.patch_size).cuda()
    rope = PixtralRotaryEmbedding(config).cuda()
    return rope(torch.empty(0, device="cuda", dtype=dtype), position_ids)


def rotary_check() -> dict:
    """The fused rotary + attention against HF's eager rotary + attention, both against a float64 reference.

    Times one layer's rotary and attention for the four images, and for one 1190x1540 page alone.
    """
    from transformers.models.pixtral.modeling_pixtral import apply_rotary_pos_emb

    width = 3 * HEADS * HEAD_DIM
    qkv = torch.randn(1, sum(LENGTHS), width, device="cuda", dtype=torch.bfloat16)
    cos, sin = pixtral_rotary_tables(GRIDS, dtype=torch.bfloat16)
    spans = ImageSpans.of(LENGTHS, device=qkv.device)

    q, k, v = qkv.double().chunk(3, dim=-1)
    q = q.view(1, -1, HEADS, HEAD_DIM).transpose(1, 2)
    k = k.view(1, -1, HEADS, HEAD_DIM).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos.double(), sin.double(), unsqueeze_dim=0)
    q, k = q.transpose(1, 2)[0], k.transpose(1, 2)[0]
    reference = attend_per_image(q, k, v.reshape(-1, HEADS, HEAD_DIM), spans, backend="sdpa")

    def run(mode: str, data: torch.Tensor, tables, on: ImageSpans) -> torch.Tensor:
        # The fused path rotates in place: every call gets a fresh copy of the projection.
        return encoder_attention(data.clone(), *tables, on, heads=HEADS, head_dim=HEAD_DIM, rotary=mode)

    report: dict = {}
    outputs = {}
    for mode in ("eager", "fused"):
        out = run(mode, qkv, (cos, sin), spans)
        outputs[mode] = out
        error = ((out.double() - reference).norm() / reference.norm()).item()
        report[mode] = {"rel_error": round(error, 6), "finite": bool(torch.isfinite(out).all())}
    between = ((outputs["fused"].double() - outputs["eager"].double()).norm() / outputs["eager"].double().norm()).item()
    report["fused_vs_eager_rel_error"] = round(between, 6)
    report["ok"] = all(r["finite"] and r["rel_error"] < TOLERANCE for r in (report["eager"], report["fused"])) and (
        between < TOLERANCE
    )

    page = GRIDS[:1]
    page_qkv = qkv[:, : LENGTHS[0]].contiguous()
    page_tables = pixtral_rotary_tables(page, dtype=torch.bfloat16)
    page_spans = ImageSpans.of(LENGTHS[:1], device=qkv.device)
    copy_ms = cuda_median_ms(lambda: page_qkv.clone(), repeats=20, warmup=3)
    for mode in ("eager", "fused"):
        ms = cuda_median_ms(lambda m=mode: run(m, page_qkv, page_tables, page_spans), repeats=20, warmup=3)
        report[mode]["page_ms_per_layer"] = round(ms - copy_ms, 4)
        report[mode]["page_ms_24_layers"] = round((ms - copy_ms) * LAYERS, 2)
        all_ms = cuda_median_ms(lambda m=mode: run(m, qkv, (cos, sin), spans), repeats=10, warmup=2)
        report[mode]["four_images_ms_per_layer"] = round(all_ms, 4)
    report["page_clone_ms_subtracted"] = round(copy_ms, 4)
    return report


class _Attention(torch.nn.Module):
    """Stands in for the encoder's attention (a projection), called as PixtralHFAttention is."""

    def __init__(self, width: int):
        super().__init__()
        self.proj = torch.nn.Linear(width, width, bias=False)

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None):
        return self.proj(hidden_states), None


class _Layer(torch.nn.Module):
    """One Pixtral block with vLLM's RMSNorm, as PixtralHFTransformerBlock has them."""

    def __init__(self, width: int):
        from vllm.model_executor.layers.layernorm import RMSNorm

        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(width, eps=1e-5), RMSNorm(width, eps=1e-5)
        for norm in (self.attention_norm, self.ffn_norm):
            torch.nn.init.normal_(norm.weight, 1.0, 0.1)
        self.attention = _Attention(width)
        self.feed_forward = torch.nn.Sequential(torch.nn.Linear(width, 4 * width, bias=False), torch.nn.SiLU(),
                                                torch.nn.Linear(4 * width, width, bias=False))

    def forward(self, x, attention_mask=None, position_embeddings=None):
        # PixtralHFTransformerBlock.forward in vLLM 0.26.
        r, _ = self.attention.forward(self.attention_norm(x), attention_mask=attention_mask,
                                      position_embeddings=position_embeddings)
        h = x + r
        return h + self.feed_forward.forward(self.ffn_norm(h))


def fusion_check() -> dict:
    """Residual adds in vLLM's fused_add_rms_norm against separate adds and norms (four blocks of one page's
    patches), and the patch embedding as a GEMM against vLLM's cuDNN convolution (one 1190x1540 page)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.conv import Conv2dLayer

    width, patches = HEADS * HEAD_DIM, LENGTHS[0]
    report: dict = {}
    with set_current_vllm_config(VllmConfig()), torch.no_grad():
        layers = torch.nn.ModuleList(_Layer(width) for _ in range(4)).cuda().to(torch.bfloat16)
        x = torch.randn(1, patches, width, device="cuda", dtype=torch.bfloat16)

        def unfused():
            h = x
            for layer in layers:
                h = layer(h)
            return h

        separate, together = unfused(), fused_residual_layers(layers, x.clone(), None, None)
        error = ((together.double() - separate.double()).norm() / separate.double().norm()).item()
        report["residual_in_norm"] = {
            "rel_error_vs_separate": round(error, 6), "finite": bool(torch.isfinite(together).all()),
            "ms_separate_4_layers": round(cuda_median_ms(unfused, repeats=20, warmup=3), 4),
            "ms_fused_4_layers": round(cuda_median_ms(lambda: fused_residual_layers(layers, x.clone(), None, None),
                                                      repeats=20, warmup=3), 4),
        }

        conv = Conv2dLayer(in_channels=3, out_channels=width, kernel_size=14, stride=14, bias=False).cuda()
        conv = conv.to(torch.bfloat16)
        torch.nn.init.normal_(conv.weight, 0.0, 0.02)
        image = torch.randn(1, 3, 1540, 1190, device="cuda", dtype=torch.bfloat16)
        # cuDNN explicitly: outside an engine's config vLLM's custom ops are off, and conv(image) is the GEMM too.
        def cudnn():
            return F.conv2d(image, conv.weight, conv.bias, stride=conv.stride)

        reference, gemm = cudnn(), embed_patches(conv, image, fused=True)
        error = ((gemm.double() - reference.double()).norm() / reference.double().norm()).item()
        report["patch_embedding"] = {
            "shape": list(gemm.shape), "rel_error_vs_conv": round(error, 6),
            "finite": bool(torch.isfinite(gemm).all()),
            "ms_conv": round(cuda_median_ms(cudnn, repeats=20, warmup=3), 4),
            "ms_gemm": round(cuda_median_ms(lambda: embed_patches(conv, image, fused=True), repeats=20, warmup=3), 4),
        }
    report["ok"] = all(r["finite"] and r[key] < TOLERANCE for r, key in (
        (report["residual_in_norm"], "rel_error_vs_separate"), (report["patch_embedding"], "rel_error_vs_conv")))
    return report


if __name__ == "__main__":
    sys.exit(main())
