"""vLLM general plugin: the Pixtral vision encoder attends within each image instead of through a dense mask."""

from __future__ import annotations

import os


def register() -> None:
    """Entry point for `vllm.general_plugins`; safe to call more than once per process."""
    if os.environ.get("OCRQ_ENCODER_PLUGIN", "1") == "0":
        from vllm.logger import init_logger

        init_logger("vllm.ocrq_vllm_plugin").info("ocrq encoder plugin disabled by OCRQ_ENCODER_PLUGIN=0")
        return
    from ocrq_vllm_plugin.pixtral_attention import patch_pixtral

    patch_pixtral()
