"""The encoder plugin tells vLLM's Pixtral encoders apart by their code's shape (torch-free, no vLLM here).

The stand-in modules copy only what the check reads from vLLM's pixtral.py: PixtralHFAttention.forward's
parameters and the module-level helpers the 0.26 patch calls (0.26.0, 0.27.1 and 0.28.0 as released; 0.29.0 and
0.30.0 as released, after PR 52185 moved the encoder to MMEncoderAttention with cu_seqlens).
"""

from __future__ import annotations

from types import SimpleNamespace

from ocrq_vllm_plugin.compat import DENSE_MASK_HELPERS, fusable_transformer, pixtral_encoder_kind


def _pixtral(forward, *, helpers=DENSE_MASK_HELPERS):
    attention = type("PixtralHFAttention", (), {"forward": forward})
    model = type("PixtralHFVisionModel", (), {})
    return SimpleNamespace(PixtralHFAttention=attention, PixtralHFVisionModel=model,
                           **{name: (lambda *a, **k: None) for name in helpers})


def forward_026(self, hidden_states, attention_mask, position_embeddings):
    """vLLM 0.26.0, 0.27.1, 0.28.0: one dense block-diagonal mask over every image of the step."""


def forward_029(self, hidden_states, position_embeddings, cu_seqlens, max_seqlen, sequence_lengths):
    """vLLM 0.29.0, 0.30.0: MMEncoderAttention over per-image cu_seqlens."""


def test_the_dense_mask_encoder_is_the_one_to_patch():
    assert pixtral_encoder_kind(_pixtral(forward_026)) == "dense_mask"


def test_an_encoder_that_already_attends_per_image_is_left_alone():
    assert pixtral_encoder_kind(_pixtral(forward_029)) == "per_image"
    assert pixtral_encoder_kind(_pixtral(forward_029, helpers=())) == "per_image"


def test_anything_else_is_unknown_and_not_patched():
    assert pixtral_encoder_kind(SimpleNamespace()) == "unknown"
    assert pixtral_encoder_kind(_pixtral(forward_026, helpers=DENSE_MASK_HELPERS[:2])) == "unknown"

    def forward_other(self, hidden_states, mask, position_embeddings):
        pass

    assert pixtral_encoder_kind(_pixtral(forward_other)) == "unknown"


def test_the_residual_fusion_replaces_only_the_transformer_forward_it_knows():
    def forward_026(self, x, attention_mask, position_embeddings, return_all_hidden_states):
        """vLLM 0.26.0's PixtralHFTransformer.forward."""

    def forward_other(self, x, attention_mask, position_embeddings):
        pass

    assert fusable_transformer(SimpleNamespace(PixtralHFTransformer=type("T", (), {"forward": forward_026})))
    assert not fusable_transformer(SimpleNamespace(PixtralHFTransformer=type("T", (), {"forward": forward_other})))
    assert not fusable_transformer(SimpleNamespace())
