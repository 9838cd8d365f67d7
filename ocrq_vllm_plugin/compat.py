"""Which vLLM Pixtral encoder this is, read from its code's shape rather than its version number (torch-free).

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
