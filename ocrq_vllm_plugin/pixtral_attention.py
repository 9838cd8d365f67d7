"""Per-image attention for vLLM 0.26's PixtralHFVisionModel, in place of its dense block-diagonal mask.

Without xformers, vLLM concatenates every image of an encoder step into one sequence and runs SDPA
with a dense (N x N) mask, N being the patches of all those images together: time and memory grow
with the square of the images per step. Here each image attends to its own patches only, through
one flash-attention varlen call (cu_seqlens) or, where that is unavailable, one SDPA call per image.
The rotary embedding runs as one Triton kernel in place on the projection's q and k, and attention reads
them as strided views: no HF element-wise rotary (mul, cat, add) and no transposed copies around it.
Each residual add goes into the GEMM of the projection before it, as its accumulator (or, where that cannot
be done, into the next RMS norm, as vLLM's decoders do), and the patch embedding, a convolution whose stride is
its kernel, runs as one GEMM over the unfolded patches.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ocrq_vllm_plugin import plugin_log
from ocrq_vllm_plugin.compat import fusable_transformer, pixtral_encoder_kind
from ocrq_vllm_plugin.env import ENCODER_ATTENTION_ENV, ENCODER_FUSION_ENV, ENCODER_ROTARY_ENV, current_env

_MARK = "_ocrq_per_image_attention"
BACKENDS = ("auto", "flash", "sdpa")
ROTARY_MODES = ("auto", "fused", "eager")
FUSION_MODES = ("auto", "gemm", "norm", "off")


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

    # Strided rows are fine (the fused rotary's views); the head dimension must be dense.
    return flash_attn_varlen_func(
        q,
        k,
        v,
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


def _setting(name: str, wanted: str, allowed: tuple[str, ...]) -> str:
    if wanted not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}")
    return wanted


@functools.cache
def encoder_backend() -> str:
    """flash (varlen, cu_seqlens) where vLLM's flash attention runs, else sdpa; OCRQ_ENCODER_ATTENTION overrides."""
    wanted = _setting(ENCODER_ATTENTION_ENV, current_env().encoder_attention, BACKENDS)
    if wanted != "auto":
        return wanted
    try:
        from vllm.platforms import current_platform
        from vllm.vllm_flash_attn.flash_attn_interface import is_fa_version_supported

        version = _fa_version() if current_platform.is_cuda() else None
        chosen = "flash" if version is not None and is_fa_version_supported(version) else "sdpa"
    except Exception:  # noqa: BLE001 - any import or probe failure leaves the always-correct fallback
        chosen = "sdpa"
    plugin_log().info("ocrq encoder plugin: per-image attention through %s", chosen)
    return chosen


@functools.cache
def rotary_mode() -> str:
    """fused (vLLM's Triton rotary kernel, in place on q and k) where it imports on a GPU, else eager.

    OCRQ_ENCODER_ROTARY=eager keeps HF's element-wise rotary and the transposes around it.
    """
    wanted = _setting(ENCODER_ROTARY_ENV, current_env().encoder_rotary, ROTARY_MODES)
    chosen = wanted
    if wanted == "auto":
        try:
            from vllm.vllm_flash_attn.ops.triton.rotary import apply_rotary  # noqa: F401

            chosen = "fused" if torch.cuda.is_available() else "eager"
        except Exception:  # noqa: BLE001 - no Triton kernel here: HF's element-wise rotary is always correct
            chosen = "eager"
    plugin_log().info("ocrq encoder plugin: rotary embedding %s (%s=%s)", chosen, ENCODER_ROTARY_ENV, wanted)
    return chosen


@functools.cache
def fusion_mode() -> str:
    """gemm (residual adds in the projections' GEMMs, the patch embedding as a GEMM) on a GPU, else off;
    OCRQ_ENCODER_FUSION=norm puts the adds in the norms instead, off keeps vLLM's own sequence."""
    wanted = _setting(ENCODER_FUSION_ENV, current_env().encoder_fusion, FUSION_MODES)
    chosen = ("gemm" if torch.cuda.is_available() else "off") if wanted == "auto" else wanted
    plugin_log().info("ocrq encoder plugin: residual and patch-embedding fusion %s (%s=%s)", chosen,
                      ENCODER_FUSION_ENV, wanted)
    return chosen


def fused_residual_layers(layers, x: torch.Tensor, attention_mask, position_embeddings) -> torch.Tensor:
    """Pixtral's pre-norm blocks with each residual add done inside the next RMS norm.

    Same as `h = x + attention(attention_norm(x)); x = h + feed_forward(ffn_norm(h))` per layer. May overwrite x.
    """
    residual = x
    hidden = layers[0].attention_norm(x)
    out = None
    for i, layer in enumerate(layers):
        if i:
            hidden, residual = layer.attention_norm(out, residual)
        out, _ = layer.attention(hidden, attention_mask=attention_mask, position_embeddings=position_embeddings)
        hidden, residual = layer.ffn_norm(out, residual)
        out = layer.feed_forward(hidden)
    return residual + out


def gemm_residual_layers(layers, x: torch.Tensor, attention_mask, position_embeddings) -> torch.Tensor:
    """Pixtral's pre-norm blocks with each residual add done by the projection before it: the residual is the
    accumulator of o_proj's and down_proj's GEMMs (cuBLAS's beta = 1), so each norm reads and writes one tensor.

    Same as `h = x + attention(attention_norm(x)); x = h + feed_forward(ffn_norm(h))` per layer. May overwrite x.
    """
    residual = x.contiguous()
    for layer in layers:
        attended = attention_core(layer.attention, layer.attention_norm(residual), attention_mask,
                                  position_embeddings)
        add_projection(residual, attended, layer.attention.o_proj)
        mlp = layer.feed_forward
        gate_up, _ = mlp.gate_up_proj(layer.ffn_norm(residual))
        add_projection(residual, mlp.act_and_mul(gate_up), mlp.down_proj)
    return residual


def add_projection(residual: torch.Tensor, x: torch.Tensor, linear) -> None:
    """residual += x @ linear.weight.T, as one GEMM accumulating into the residual."""
    residual.view(-1, residual.shape[-1]).addmm_(x.reshape(-1, x.shape[-1]), linear.weight.t())


def gemm_fusable(layers) -> bool:
    """True where every o_proj and down_proj is a plain matrix on one GPU: no quantization, no bias and no
    tensor-parallel reduction, so `residual += x @ W.T` is all the projection does."""

    def plain(linear) -> bool:
        return (type(getattr(linear, "quant_method", None)).__name__ == "UnquantizedLinearMethod"
                and getattr(linear, "bias", None) is None and getattr(linear, "tp_size", 1) == 1
                and getattr(linear, "weight", None) is not None and linear.weight.dim() == 2)

    return all(plain(layer.attention.o_proj) and plain(layer.feed_forward.down_proj)
               and hasattr(layer.feed_forward, "act_and_mul") for layer in layers)


def embed_patches(conv, image: torch.Tensor, *, fused: bool) -> torch.Tensor:
    """The patch convolution; fused, a stride-equals-kernel one runs as vLLM's GEMM over the unfolded patches
    (Conv2dLayer.forward_native) instead of cuDNN's implicit GEMM and im2col."""
    if fused and getattr(conv, "enable_linear", False):
        return conv.forward_native(image)
    return conv(image)


def encoder_attention(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    spans: ImageSpans,
    *,
    heads: int,
    head_dim: int,
    rotary: str | None = None,
    backend: str | None = None,
) -> torch.Tensor:
    """Rotary embedding then per-image attention over the packed (1, patches, 3 * heads * head_dim) projection.

    Returns (patches, heads, head_dim). cos/sin are Pixtral's (patches, head_dim) tables, HF layout.
    """
    tokens = qkv.shape[0] * qkv.shape[1]
    if (rotary or rotary_mode()) == "fused" and qkv.is_cuda:
        return _fused_rotary_attention(qkv, cos, sin, spans, tokens=tokens, heads=heads, head_dim=head_dim,
                                       backend=backend)
    return _eager_rotary_attention(qkv, cos, sin, spans, tokens=tokens, heads=heads, head_dim=head_dim,
                                   backend=backend)


def _eager_rotary_attention(qkv, cos, sin, spans, *, tokens, heads, head_dim, backend):
    """vLLM 0.26's own sequence: chunk, transpose to (batch, heads, patches, dim), HF rotary, transpose back."""
    from transformers.models.pixtral.modeling_pixtral import apply_rotary_pos_emb

    batch, patches, _ = qkv.shape
    q, k, v = qkv.chunk(3, dim=-1)
    q = q.view(batch, patches, heads, head_dim).transpose(1, 2)
    k = k.view(batch, patches, heads, head_dim).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=0)
    shape = (tokens, heads, head_dim)
    return attend_per_image(
        q.transpose(1, 2).reshape(shape), k.transpose(1, 2).reshape(shape), v.reshape(shape), spans, backend=backend
    )


def _fused_rotary_attention(qkv, cos, sin, spans, *, tokens, heads, head_dim, backend):
    """One Triton kernel rotates q and k in place in the projection's output; attention reads strided views.

    HF's Pixtral tables repeat their first half (cat((freqs, freqs))), so the first half is the
    (patches, head_dim / 2) table of a NeoX-style (non-interleaved) rotary.
    """
    from vllm.vllm_flash_attn.ops.triton.rotary import apply_rotary

    half = head_dim // 2
    packed = qkv.view(1, tokens, 3 * heads, head_dim)
    apply_rotary(packed[:, :, : 2 * heads], cos[:, :half], sin[:, :half], interleaved=False, inplace=True)
    q, k, v = packed.view(tokens, 3, heads, head_dim).unbind(1)
    return attend_per_image(q, k, v, spans, backend=backend)


def attention_core(attention, hidden_states: torch.Tensor, spans: ImageSpans, position_embeddings) -> torch.Tensor:
    """A PixtralHFAttention's output before its o_proj: (batch, patches, heads * head_dim)."""
    batch, patches, _ = hidden_states.size()
    qkv, _ = attention.qkv_proj(hidden_states)
    cos, sin = position_embeddings
    out = encoder_attention(qkv, cos, sin, spans, heads=attention.n_heads, head_dim=attention.head_dim)
    return out.view(batch, patches, attention.n_heads * attention.head_dim)


def _gemm_fusable_once(transformer) -> bool:
    """gemm_fusable for this transformer's layers, asked once (its weights do not change kind)."""
    known = getattr(transformer, "_ocrq_gemm_fusable", None)
    if known is None:
        known = gemm_fusable(transformer.layers)
        transformer._ocrq_gemm_fusable = known
        if not known:
            plugin_log().info("ocrq encoder plugin: the encoder's projections are not plain GEMMs; "
                              "residual adds in the norms")
    return known


def patch_pixtral() -> bool:
    """Patch PixtralHFVisionModel and PixtralHFAttention in place where vLLM masks densely; True if this call did."""
    from vllm.model_executor.models import pixtral

    model_cls, attention_cls = pixtral.PixtralHFVisionModel, pixtral.PixtralHFAttention
    transformer_cls = pixtral.PixtralHFTransformer if fusable_transformer(pixtral) else None
    if getattr(model_cls, _MARK, False):
        return False
    kind = pixtral_encoder_kind(pixtral)
    if kind == "per_image":
        plugin_log().info("ocrq encoder plugin: this vLLM's Pixtral encoder already attends per image; left as it is")
        return False
    if kind == "unknown":
        plugin_log().warning("ocrq encoder plugin: this vLLM's Pixtral encoder is not one the plugin knows; "
                             "left as it is")
        return False

    original_attention = attention_cls.forward

    def vision_forward(self, pixel_values, *, select_layers=None, feature_select_strategy=None):
        fused = fusion_mode() != "off"
        patch_embeds_list = [embed_patches(self.patch_conv, img.unsqueeze(0).to(self.dtype), fused=fused)
                             for img in pixel_values]
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
        attn_output, _ = self.o_proj(attention_core(self, hidden_states, attention_mask, position_embeddings))
        return attn_output, None

    model_cls.forward = vision_forward
    attention_cls.forward = attention_forward
    if transformer_cls is not None:
        original_transformer = transformer_cls.forward

        def transformer_forward(self, x, attention_mask, position_embeddings, return_all_hidden_states):
            mode = fusion_mode()
            if return_all_hidden_states or not isinstance(attention_mask, ImageSpans) or mode == "off":
                return original_transformer(self, x, attention_mask, position_embeddings, return_all_hidden_states)
            if mode == "gemm" and _gemm_fusable_once(self):
                return gemm_residual_layers(self.layers, x, attention_mask, position_embeddings)
            return fused_residual_layers(self.layers, x, attention_mask, position_embeddings)

        transformer_cls.forward = transformer_forward
    else:
        plugin_log().info("ocrq encoder plugin: this vLLM's PixtralHFTransformer is not 0.26's; its residual adds stay")
    setattr(model_cls, _MARK, True)
    plugin_log().info("ocrq encoder plugin: PixtralHFVisionModel patched for per-image attention")
    return True
