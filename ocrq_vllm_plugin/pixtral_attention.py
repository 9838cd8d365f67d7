"""Per-image attention for vLLM 0.26's PixtralHFVisionModel, in place of its dense block-diagonal mask.

Without xformers, vLLM concatenates every image of an encoder step into one sequence and runs SDPA
with a dense (N x N) mask, N being the patches of all those images together: time and memory grow
with the square of the images per step. Here each image attends to its own patches only, through
one flash-attention varlen call (cu_seqlens) or, where that is unavailable, one SDPA call per image.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F


def _log():
    from vllm.logger import init_logger

    return init_logger("vllm.ocrq_vllm_plugin")

_MARK = "_ocrq_per_image_attention"
BACKENDS = ("auto", "flash", "sdpa")


@dataclass(frozen=True)
class ImageSpans:
    """The images laid end to end in the encoder's one sequence: what the dense mask used to encode."""

    lengths: tuple[int, ...]
    cu_seqlens: torch.Tensor
    max_len: int

    @classmethod
    def of(cls, lengths: list[int], *, device: torch.device) -> ImageSpans:
        cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int32), dim=0)
        return cls(lengths=tuple(lengths), cu_seqlens=cu.to(device), max_len=max(lengths))


def attend_per_image(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spans: ImageSpans, *, backend: str | None = None
) -> torch.Tensor:
    """Non-causal attention over (tokens, heads, head_dim) tensors, each image attending to itself only."""
    chosen = backend or encoder_backend()
    if chosen == "flash" and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        return _flash_varlen(q, k, v, spans)
    return _sdpa_per_image(q, k, v, spans)


def _sdpa_per_image(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spans: ImageSpans) -> torch.Tensor:
    outputs = []
    for qi, ki, vi in zip(q.split(spans.lengths), k.split(spans.lengths), v.split(spans.lengths)):
        out = F.scaled_dot_product_attention(
            qi.transpose(0, 1).unsqueeze(0), ki.transpose(0, 1).unsqueeze(0), vi.transpose(0, 1).unsqueeze(0)
        )
        outputs.append(out.squeeze(0).transpose(0, 1))
    return torch.cat(outputs)


def _flash_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spans: ImageSpans) -> torch.Tensor:
    from vllm.v1.attention.backends.fa_utils import flash_attn_varlen_func

    return flash_attn_varlen_func(
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        max_seqlen_q=spans.max_len,
        cu_seqlens_q=spans.cu_seqlens,
        max_seqlen_k=spans.max_len,
        cu_seqlens_k=spans.cu_seqlens,
        causal=False,
        fa_version=_fa_version(),
    )


@functools.cache
def _fa_version() -> int | None:
    from vllm.v1.attention.backends.fa_utils import get_flash_attn_version

    return get_flash_attn_version()


@functools.cache
def encoder_backend() -> str:
    """flash (varlen, cu_seqlens) where vLLM's flash attention runs, else sdpa; OCRQ_ENCODER_ATTENTION overrides."""
    wanted = os.environ.get("OCRQ_ENCODER_ATTENTION", "auto")
    if wanted not in BACKENDS:
        raise ValueError(f"OCRQ_ENCODER_ATTENTION must be one of {', '.join(BACKENDS)}")
    if wanted != "auto":
        return wanted
    try:
        from vllm.platforms import current_platform
        from vllm.vllm_flash_attn.flash_attn_interface import is_fa_version_supported

        version = _fa_version() if current_platform.is_cuda() else None
        chosen = "flash" if version is not None and is_fa_version_supported(version) else "sdpa"
    except Exception:  # noqa: BLE001 - any import or probe failure leaves the always-correct fallback
        chosen = "sdpa"
    _log().info("ocrq encoder plugin: per-image attention through %s", chosen)
    return chosen


def patch_pixtral() -> bool:
    """Patch PixtralHFVisionModel and PixtralHFAttention in place; False when already patched."""
    from vllm.model_executor.models import pixtral

    model_cls, attention_cls = pixtral.PixtralHFVisionModel, pixtral.PixtralHFAttention
    if getattr(model_cls, _MARK, False):
        return False
    for name in ("position_ids_in_meshgrid", "apply_rotary_pos_emb", "resolve_visual_encoder_outputs"):
        if not hasattr(pixtral, name):
            raise RuntimeError(f"vllm's pixtral module has no {name}: this vLLM is not the one the plugin targets")

    original_attention = attention_cls.forward

    def vision_forward(self, pixel_values, *, select_layers=None, feature_select_strategy=None):
        patch_embeds_list = [self.patch_conv(img.unsqueeze(0).to(self.dtype)) for img in pixel_values]
        flat = [p.flatten(2).permute(0, 2, 1) for p in patch_embeds_list]
        embed_sizes = [p.shape[1] for p in flat]
        patch_embeds = self.ln_pre(torch.cat(flat, dim=1))
        position_ids = pixtral.position_ids_in_meshgrid(
            patch_embeds_list, max_width=self.config.image_size // self.config.patch_size
        ).to(self.device)
        position_embedding = self.patch_positional_embedding(patch_embeds, position_ids)
        out = self.transformer(
            patch_embeds,
            ImageSpans.of(embed_sizes, device=patch_embeds.device),
            position_embedding,
            return_all_hidden_states=select_layers is not None,
        )
        out = pixtral.resolve_visual_encoder_outputs(
            out,
            None,
            select_layers=select_layers,
            max_possible_layers=self.config.num_hidden_layers,
            feature_select_strategy=feature_select_strategy,
        )
        return torch.split(out.squeeze(0), embed_sizes)

    def attention_forward(self, hidden_states, attention_mask, position_embeddings):
        if not isinstance(attention_mask, ImageSpans):
            return original_attention(self, hidden_states, attention_mask, position_embeddings)
        batch, patches, _ = hidden_states.size()
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.chunk(3, dim=-1)
        q = q.view(batch, patches, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, patches, self.n_heads, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = pixtral.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=0)
        shape = (batch * patches, self.n_heads, self.head_dim)
        out = attend_per_image(
            q.transpose(1, 2).reshape(shape), k.transpose(1, 2).reshape(shape), v.reshape(shape), attention_mask
        )
        attn_output, _ = self.o_proj(out.reshape(batch, patches, self.n_heads * self.head_dim))
        return attn_output, None

    model_cls.forward = vision_forward
    attention_cls.forward = attention_forward
    setattr(model_cls, _MARK, True)
    _log().info("ocrq encoder plugin: PixtralHFVisionModel patched for per-image attention")
    return True
