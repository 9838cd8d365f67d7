"""The plugin tells vLLM's Pixtral encoders and Qwen3 attentions apart by their code's shape (torch-free, no vLLM
here).

The stand-in modules copy only what the check reads from vLLM's pixtral.py: PixtralHFAttention.forward's
parameters and the module-level helpers the 0.26 patch calls (0.26.0, 0.27.1 and 0.28.0 as released; 0.29.0 and
0.30.0 as released, after PR 52185 moved the encoder to MMEncoderAttention with cu_seqlens).
"""

from __future__ import annotations

from types import SimpleNamespace

from ocrq_vllm_plugin.compat import (
    DENSE_MASK_HELPERS,
    fusable_qwen3_forward,
    fusable_transformer,
    pixtral_encoder_kind,
    qk_norm_rope_fusable,
)


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


def test_the_decoder_fusion_replaces_only_the_qwen3_attention_forward_it_knows():
    def forward_026(self, positions, hidden_states):
        """vLLM 0.26.0's Qwen3Attention.forward."""

    def forward_other(self, positions, hidden_states, kv_cache):
        pass

    assert fusable_qwen3_forward(type("Qwen3Attention", (), {"forward": forward_026}))
    assert not fusable_qwen3_forward(type("Qwen3Attention", (), {"forward": forward_other}))
    assert not fusable_qwen3_forward(object())


RotaryEmbedding = type("RotaryEmbedding", (), {})
Llama3RotaryEmbedding = type("Llama3RotaryEmbedding", (), {})


def _qwen3_layer(*, rope_cls=RotaryEmbedding, head_dim=128, rotary_dim=128, flashinfer=False, k_eps=1e-6,
                 k_weight=True):
    """The attributes of one vLLM 0.26 Qwen3Attention (LightOnOCR's decoder: 16 q and 8 KV heads of 128)."""
    rope = rope_cls()
    rope.head_size, rope.rotary_dim, rope.use_flashinfer = head_dim, rotary_dim, flashinfer
    norm = dict(has_weight=True, variance_size_override=None, variance_epsilon=1e-6)
    return SimpleNamespace(
        qkv_proj=object(), o_proj=object(), attn=object(), rotary_emb=rope, num_heads=16, num_kv_heads=8,
        head_dim=head_dim, q_size=16 * head_dim, kv_size=8 * head_dim, q_norm=SimpleNamespace(**norm),
        k_norm=SimpleNamespace(**{**norm, "variance_epsilon": k_eps, "has_weight": k_weight}))


def test_the_decoder_fusion_takes_only_layers_whose_norms_and_rotary_the_kernel_computes():
    assert qk_norm_rope_fusable(_qwen3_layer())
    assert not qk_norm_rope_fusable(_qwen3_layer(rope_cls=Llama3RotaryEmbedding))  # a scaled variant
    assert not qk_norm_rope_fusable(_qwen3_layer(rotary_dim=64))  # partial rotary
    assert not qk_norm_rope_fusable(_qwen3_layer(flashinfer=True))
    assert not qk_norm_rope_fusable(_qwen3_layer(head_dim=96, rotary_dim=96))  # no kernel built for it
    assert not qk_norm_rope_fusable(_qwen3_layer(k_eps=1e-5))
    assert not qk_norm_rope_fusable(_qwen3_layer(k_weight=False))
    layer = _qwen3_layer()
    del layer.q_norm
    assert not qk_norm_rope_fusable(layer)
