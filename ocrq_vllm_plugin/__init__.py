"""vLLM general plugin: per-image attention in the Pixtral vision encoder, the decoder's q/k norms and rotary as
one kernel, and shared weights across engines.

The model patches are on unless OCRQ_ENCODER_PLUGIN=0. The `ocrq_holder` and `ocrq_attach` load formats
are registered in engines that `ocrq engine` starts to share one GPU's weights (OCRQ_SHARED_WEIGHTS_DIR set).
"""

from __future__ import annotations

from ocrq_vllm_plugin.env import current_env


def plugin_log():
    """The plugin's logger, formatted as vLLM's (vLLM is imported when it is first asked for)."""
    from vllm.logger import init_logger

    return init_logger("vllm.ocrq_vllm_plugin")


def register() -> None:
    """Entry point for `vllm.general_plugins`; safe to call more than once per process."""
    log = plugin_log()
    env = current_env()
    if env.shared_dir:
        import ocrq_vllm_plugin.shared_weights  # noqa: F401  (registers the load formats)
    if not env.encoder_plugin:
        log.info("ocrq plugin: model patches disabled by OCRQ_ENCODER_PLUGIN=0")
        return
    from ocrq_vllm_plugin.pixtral_attention import patch_pixtral
    from ocrq_vllm_plugin.qwen3_attention import patch_qwen3

    patch_pixtral()
    patch_qwen3()
