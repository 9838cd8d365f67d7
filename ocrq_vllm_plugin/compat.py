"""Which vLLM Pixtral encoder and Qwen3 attention these are, read from their code's shape rather than vLLM's version
number (torch-free).

vLLM 0.26.0-0.28.0: `PixtralHFAttention.forward(hidden_states, attention_mask, position_embeddings)`, and without
xformers the vision model builds one dense block-diagonal mask for all images of a step. The plugin replaces it.
vLLM 0.29 on (PR 52185): `forward(hidden_states, position_embeddings, cu_seqlens, max_seqlen, sequence_lengths)`
through `MMEncoderAttention`, each image attending to itself already. The plugin leaves that alone.
"""

from __future__ import annotations

import inspect
from typing import Literal

EncoderKind = Literal["dense_mask", "per_image", "unknown"]

# What the 0.26 patch calls from vLLM's pixtral module.
DENSE_MASK_HELPERS = ("position_ids_in_meshgrid", "apply_rotary_pos_emb", "resolve_visual_encoder_outputs")


def pixtral_encoder_kind(pixtral_module: object) -> EncoderKind:
    """dense_mask: the encoder the plugin patches; per_image: upstream already attends per image; else unknown."""
    attention = getattr(pixtral_module, "PixtralHFAttention", None)
    model = getattr(pixtral_module, "PixtralHFVisionModel", None)
    if attention is None or model is None:
        return "unknown"
    try:
        parameters = list(inspect.signature(attention.forward).parameters)
    except (TypeError, ValueError):
        return "unknown"
    if "cu_seqlens" in parameters:
        return "per_image"
    if parameters[:4] == ["self", "hidden_states", "attention_mask", "position_embeddings"] and all(
        hasattr(pixtral_module, name) for name in DENSE_MASK_HELPERS
    ):
        return "dense_mask"
    return "unknown"


# PixtralHFTransformer.forward as vLLM 0.26.0 has it: the one the residual fusion replaces.
TRANSFORMER_FORWARD = ["self", "x", "attention_mask", "position_embeddings", "return_all_hidden_states"]


def fusable_transformer(pixtral_module: object) -> bool:
    """True where PixtralHFTransformer.forward has 0.26's parameters, so the fused layers can stand in for it."""
    transformer = getattr(pixtral_module, "PixtralHFTransformer", None)
    try:
        return transformer is not None and list(inspect.signature(transformer.forward).parameters) == TRANSFORMER_FORWARD
    except (TypeError, ValueError):
        return False


# Qwen3Attention.forward as vLLM 0.26.0 has it, and what its body reads: the forward the decoder fusion replaces.
QWEN3_ATTENTION_FORWARD = ["self", "positions", "hidden_states"]
QWEN3_ATTENTION_ATTRIBUTES = ("qkv_proj", "q_norm", "k_norm", "rotary_emb", "attn", "o_proj", "num_heads",
                              "num_kv_heads", "head_dim", "q_size", "kv_size")
# The head sizes vLLM 0.26's fused_qk_norm_rope kernel is built for (SUPPORTED_FUSED_QK_NORM_ROPE_HEAD_DIMS).
QK_NORM_ROPE_HEAD_DIMS = (64, 128, 256)


def fusable_qwen3_forward(attention_cls: object) -> bool:
    """True where Qwen3Attention.forward has 0.26's parameters, the body the decoder fusion stands in for."""
    try:
        return list(inspect.signature(attention_cls.forward).parameters) == QWEN3_ATTENTION_FORWARD
    except (AttributeError, TypeError, ValueError):
        return False


def qk_norm_rope_fusable(attention: object) -> bool:
    """True where one Qwen3 attention layer's norms and rotary are what fused_qk_norm_rope computes: vLLM's plain
    RotaryEmbedding over the whole head (no variant that changes the formula, no FlashInfer rotary), RMS norms with
    weights and one epsilon, and a head size the kernel is built for."""
    if not all(hasattr(attention, name) for name in QWEN3_ATTENTION_ATTRIBUTES):
        return False
    rope, q_norm, k_norm = attention.rotary_emb, attention.q_norm, attention.k_norm
    return (
        type(rope).__name__ == "RotaryEmbedding"
        and getattr(rope, "rotary_dim", None) == getattr(rope, "head_size", None) == attention.head_dim
        and not getattr(rope, "use_flashinfer", False)
        and attention.head_dim in QK_NORM_ROPE_HEAD_DIMS
        and getattr(q_norm, "has_weight", False) and getattr(k_norm, "has_weight", False)
        and getattr(q_norm, "variance_size_override", None) is None
        and getattr(k_norm, "variance_size_override", None) is None
        and getattr(q_norm, "variance_epsilon", None) == getattr(k_norm, "variance_epsilon", None) is not None
    )
