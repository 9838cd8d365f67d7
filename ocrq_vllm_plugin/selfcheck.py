"""On a GPU: per-image attention against vLLM's dense block-diagonal mask, the fused rotary against HF's
element-wise one, the residual adds folded into the projections' GEMMs or into the norms and the patch embedding
as a GEMM against vLLM's own sequence, and the decoder's fused q/k norm and rotary against vLLM's three kernels,
for error and time.

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
    attention_core,
    embed_patches,
    encoder_attention,
    fused_residual_layers,
    gemm_residual_layers,
)
from ocrq_vllm_plugin.qwen3_attention import norm_and_rotate

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
    decoder = decoder_check()
    report["decoder"] = decoder
    report["ok"] = ok and rotary["ok"] and fusion["ok"] and decoder["ok"]
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


class _Projection(torch.nn.Linear):
    """A vLLM linear layer as the encoder calls one: it returns (output, bias)."""

    def forward(self, x):
        return super().forward(x), None


class _Attention(torch.nn.Module):
    """PixtralHFAttention as the plugin runs it: QKV projection, fused rotary, per-image attention, o_proj."""

    def __init__(self, width: int):
        super().__init__()
        self.qkv_proj, self.o_proj = _Projection(width, 3 * width, bias=False), _Projection(width, width, bias=False)
        self.n_heads, self.head_dim = HEADS, HEAD_DIM

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None):
        out, _ = self.o_proj(attention_core(self, hidden_states, attention_mask, position_embeddings))
        return out, None


class _MLP(torch.nn.Module):
    """PixtralHFMLP: gate and up projections in one, SiLU-and-mul, down projection."""

    def __init__(self, width: int):
        from vllm.model_executor.layers.activation import SiluAndMul

        super().__init__()
        self.gate_up_proj = _Projection(width, 8 * width, bias=False)
        self.down_proj = _Projection(4 * width, width, bias=False)
        self.act_and_mul = SiluAndMul()

    def forward(self, x):
        gate_up, _ = self.gate_up_proj(x)
        out, _ = self.down_proj(self.act_and_mul(gate_up))
        return out


class _Layer(torch.nn.Module):
    """One Pixtral block with vLLM's RMSNorm, as PixtralHFTransformerBlock has them."""

    def __init__(self, width: int):
        from vllm.model_executor.layers.layernorm import RMSNorm

        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(width, eps=1e-5), RMSNorm(width, eps=1e-5)
        for norm in (self.attention_norm, self.ffn_norm):
            torch.nn.init.normal_(norm.weight, 1.0, 0.1)
        self.attention, self.feed_forward = _Attention(width), _MLP(width)
        for linear in (self.attention.qkv_proj, self.attention.o_proj, self.feed_forward.gate_up_proj,
                       self.feed_forward.down_proj):
            torch.nn.init.normal_(linear.weight, 0.0, 0.02)

    def forward(self, x, attention_mask=None, position_embeddings=None):
        # PixtralHFTransformerBlock.forward in vLLM 0.26.
        r, _ = self.attention.forward(self.attention_norm(x), attention_mask=attention_mask,
                                      position_embeddings=position_embeddings)
        h = x + r
        return h + self.feed_forward.forward(self.ffn_norm(h))


def fusion_check() -> dict:
    """Residual adds in the projections' GEMMs and in vLLM's fused_add_rms_norm, each against separate adds and
    norms (four blocks over one page's patches, real attention), and the patch embedding as a GEMM against
    vLLM's cuDNN convolution (one 1190x1540 page)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.conv import Conv2dLayer

    width, patches = HEADS * HEAD_DIM, LENGTHS[0]
    report: dict = {}
    with set_current_vllm_config(VllmConfig()), torch.no_grad():
        layers = torch.nn.ModuleList(_Layer(width) for _ in range(4)).cuda().to(torch.bfloat16)
        x = torch.randn(1, patches, width, device="cuda", dtype=torch.bfloat16)
        spans = ImageSpans.of(LENGTHS[:1], device=x.device)
        tables = pixtral_rotary_tables(GRIDS[:1], dtype=torch.bfloat16)

        def unfused():
            h = x
            for layer in layers:
                h = layer(h, spans, tables)
            return h

        separate = unfused()
        ways = {"residual_in_gemm": gemm_residual_layers, "residual_in_norm": fused_residual_layers}
        report["ms_separate_4_layers"] = round(cuda_median_ms(unfused, repeats=20, warmup=3), 4)
        for name, way in ways.items():
            together = way(layers, x.clone(), spans, tables)
            error = ((together.double() - separate.double()).norm() / separate.double().norm()).item()
            report[name] = {
                "rel_error_vs_separate": round(error, 6), "finite": bool(torch.isfinite(together).all()),
                "ms_4_layers": round(cuda_median_ms(lambda w=way: w(layers, x.clone(), spans, tables), repeats=20,
                                                    warmup=3), 4),
            }
        report["ms_clone_in_each"] = round(cuda_median_ms(lambda: x.clone(), repeats=20, warmup=3), 4)

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
        (report["residual_in_gemm"], "rel_error_vs_separate"), (report["residual_in_norm"], "rel_error_vs_separate"),
        (report["patch_embedding"], "rel_error_vs_conv")))
    return report


def decoder_check() -> dict:
    """The decoder's fused q/k norm and rotary against vLLM's RMSNorm and rotary kernels, both against float64,
    over one 1190x1540 page's prompt (2,377 tokens) in LightOnOCR's decoder shape (16 q and 8 KV heads of 128)."""
    from types import SimpleNamespace

    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.layernorm import RMSNorm
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    tokens, heads, kv_heads, dim, eps = 2377, 16, 8, 128, 1e-6
    q_size, kv_size = heads * dim, kv_heads * dim
    with set_current_vllm_config(VllmConfig()), torch.no_grad():
        rope = RotaryEmbedding(dim, dim, 8192, 1_000_000, True, torch.bfloat16).cuda()
        q_norm, k_norm = (RMSNorm(dim, eps=eps).cuda().to(torch.bfloat16) for _ in range(2))
        for norm in (q_norm, k_norm):
            torch.nn.init.normal_(norm.weight, 1.0, 0.1)
        layer = SimpleNamespace(rotary_emb=rope, q_norm=q_norm, k_norm=k_norm, num_heads=heads,
                                num_kv_heads=kv_heads, head_dim=dim)
        qkv = torch.randn(tokens, q_size + 2 * kv_size, device="cuda", dtype=torch.bfloat16)
        positions = torch.arange(tokens, device="cuda", dtype=torch.int64) + 5

        def unfused():
            # Qwen3Attention.forward in vLLM 0.26, through vLLM's CUDA kernels.
            q, k, v = qkv.clone().split([q_size, kv_size, kv_size], dim=-1)
            q = q_norm.forward_cuda(q.view(tokens, heads, dim)).view(tokens, q_size)
            k = k_norm.forward_cuda(k.view(tokens, kv_heads, dim)).view(tokens, kv_size)
            q, k = rope.forward_cuda(positions, q, k)
            return torch.cat([q, k, v], dim=-1)

        def fused():
            out = qkv.clone()
            norm_and_rotate(layer, positions, out)
            return out

        reference = _qk_norm_rope_reference(qkv, positions, rope.cos_sin_cache, q_norm.weight, k_norm.weight,
                                            heads=heads, kv_heads=kv_heads, dim=dim, eps=eps)
        report: dict = {}
        for name, fn in (("unfused", unfused), ("fused", fused)):
            out = fn()
            error = ((out.double() - reference).norm() / reference.norm()).item()
            report[name] = {"rel_error": round(error, 6), "finite": bool(torch.isfinite(out).all()),
                            "v_untouched": bool(torch.equal(out[:, q_size + kv_size:], qkv[:, q_size + kv_size:])),
                            "ms": round(cuda_median_ms(fn, repeats=20, warmup=3), 4)}
        between = ((fused().double() - unfused().double()).norm() / unfused().double().norm()).item()
        report["fused_vs_unfused_rel_error"] = round(between, 6)
        report["ms_clone_in_each"] = round(cuda_median_ms(lambda: qkv.clone(), repeats=20, warmup=3), 4)
    report["ok"] = all(r["finite"] and r["v_untouched"] and r["rel_error"] < TOLERANCE
                       for r in (report["unfused"], report["fused"])) and between < TOLERANCE
    return report


def _qk_norm_rope_reference(qkv, positions, cos_sin_cache, q_weight, k_weight, *, heads, kv_heads, dim, eps):
    """Per-head RMS norm, then NeoX rotary over the whole head, in float64."""
    tokens = qkv.shape[0]
    q, k, v = qkv.double().split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
    cos, sin = cos_sin_cache.double()[positions].chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

    def one(x, count, weight):
        x = x.view(tokens, count, dim)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
        first, second = x.chunk(2, dim=-1)
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1).view(tokens, count * dim)

    return torch.cat([one(q, heads, q_weight), one(k, kv_heads, k_weight), v], dim=-1)


if __name__ == "__main__":
    sys.exit(main())
