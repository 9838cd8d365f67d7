"""The decoder's per-head q/k RMS norms and rotary embedding as one kernel, for vLLM 0.26's Qwen3Attention.

LightOnOCR's decoder is Qwen3. Eager, vLLM 0.26 runs q_norm, k_norm and the rotary embedding as three kernels
over the QKV projection's output; its compiled mode can fuse them (pass config `enable_qk_norm_rope_fusion`, off
by default), but the h200 profile compiles nothing. That pass's kernel, `fused_qk_norm_rope`, normalises and
rotates q and k in place in the projection's output, in float32 between the two steps; it is called here directly.
"""

from __future__ import annotations

import functools

import torch

from ocrq_vllm_plugin import plugin_log
from ocrq_vllm_plugin.compat import fusable_qwen3_forward, qk_norm_rope_fusable
from ocrq_vllm_plugin.env import DECODER_FUSION_ENV, current_env

_MARK = "_ocrq_fused_qk_norm_rope"  # on the class: patched
_FUSABLE = "_ocrq_qk_norm_rope_fusable"  # on each layer: what qk_norm_rope_fusable() said
MODES = ("auto", "on", "off")


@functools.cache
def decoder_fusion_mode() -> str:
    """on where the kernel exists and a GPU is here, else off; OCRQ_DECODER_FUSION=off keeps vLLM's three kernels."""
    wanted = current_env().decoder_fusion
    if wanted not in MODES:
        raise ValueError(f"{DECODER_FUSION_ENV} must be one of {', '.join(MODES)}")
    chosen = wanted
    if wanted == "auto":
        chosen = "on" if torch.cuda.is_available() and _kernel() is not None else "off"
    plugin_log().info("ocrq plugin: decoder q/k norm and rotary fused %s (%s=%s)", chosen, DECODER_FUSION_ENV, wanted)
    return chosen


def _kernel():
    ops = getattr(torch.ops, "_C", None)
    try:
        return ops.fused_qk_norm_rope if ops is not None else None
    except (AttributeError, RuntimeError):
        return None


def norm_and_rotate(attention, positions: torch.Tensor, qkv: torch.Tensor) -> None:
    """q_norm, k_norm and the rotary embedding of one Qwen3Attention, in place in its (tokens, q + k + v) qkv."""
    rope = attention.rotary_emb
    torch.ops._C.fused_qk_norm_rope(
        qkv, attention.num_heads, attention.num_kv_heads, attention.num_kv_heads, attention.head_dim,
        attention.q_norm.variance_epsilon, attention.q_norm.weight, attention.k_norm.weight,
        rope._match_cos_sin_cache_dtype(qkv), rope.is_neox_style, positions.view(-1), -1,
    )


def patch_qwen3() -> bool:
    """Replace vLLM 0.26's Qwen3Attention.forward with one that fuses where it can; True if this call did."""
    from vllm.model_executor.models import qwen3

    attention_cls = qwen3.Qwen3Attention
    if getattr(attention_cls, _MARK, False):
        return False
    if not fusable_qwen3_forward(attention_cls):
        plugin_log().info("ocrq plugin: this vLLM's Qwen3Attention is not 0.26's; its q/k norms and rotary stay")
        return False
    original = attention_cls.forward

    def forward(self, positions, hidden_states):
        # Compiled, vLLM's own pass may fuse the same (enable_qk_norm_rope_fusion); the replacement stays eager.
        if torch.compiler.is_compiling() or decoder_fusion_mode() != "on":
            return original(self, positions, hidden_states)
        use = getattr(self, _FUSABLE, None)
        if use is None:
            use = qk_norm_rope_fusable(self)
            setattr(self, _FUSABLE, use)
        if (not use or not hidden_states.is_cuda or hidden_states.dtype not in (torch.bfloat16, torch.float16)
                or positions.dtype != torch.int64):
            return original(self, positions, hidden_states)
        qkv, _ = self.qkv_proj(hidden_states)
        norm_and_rotate(self, positions, qkv)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        output, _ = self.o_proj(self.attn(q, k, v))
        return output

    attention_cls.forward = forward
    setattr(attention_cls, _MARK, True)
    plugin_log().info("ocrq plugin: Qwen3Attention patched to fuse its q/k norms and rotary where it can")
    return True
