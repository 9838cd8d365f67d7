"""The plugin's settings: every OCRQ_* variable it reads, read here once per process.

The plugin runs inside vLLM's processes and stands alone (it imports nothing of ocrq's service, so not
common.settings either); `ocrq engine`'s launcher sets these per engine, and the names are the contract
between the two. No torch or vLLM here: the launcher imports the names.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# The per-GPU folder where the holder publishes its export (set: the shared-weights load formats are registered).
SHARED_DIR_ENV = "OCRQ_SHARED_WEIGHTS_DIR"
# The load format the holder reads the checkpoint with (vLLM's own; default auto).
HOLDER_LOAD_FORMAT_ENV = "OCRQ_HOLDER_LOAD_FORMAT"
# How long an attached engine waits for its holder's export.
ATTACH_TIMEOUT_ENV = "OCRQ_ATTACH_TIMEOUT_S"
# 0 turns the encoder patch off.
ENCODER_PLUGIN_ENV = "OCRQ_ENCODER_PLUGIN"
# auto, or the attention backend / rotary mode the encoder patch uses.
ENCODER_ATTENTION_ENV = "OCRQ_ENCODER_ATTENTION"
ENCODER_ROTARY_ENV = "OCRQ_ENCODER_ROTARY"
# Where the encoder's residual adds go: gemm (into the projections' GEMMs), norm (into the next RMS norm), or off
# (vLLM's own sequence); gemm and norm also run the patch embedding as one GEMM. auto: gemm on a GPU.
ENCODER_FUSION_ENV = "OCRQ_ENCODER_FUSION"
# auto or on: the decoder's per-head q/k RMS norms and rotary embedding as one kernel; off: vLLM's three.
DECODER_FUSION_ENV = "OCRQ_DECODER_FUSION"
# The JSON file of this engine's weight-sharing state, and the priority lane it serves.
STATE_ENV = "OCRQ_ENGINE_STATE_FILE"
LANE_ENV = "OCRQ_ENGINE_LANE"


@dataclass(frozen=True)
class PluginEnv:
    shared_dir: Path | None = None
    holder_load_format: str = "auto"
    attach_timeout_s: float = 900.0
    encoder_plugin: bool = True
    encoder_attention: str = "auto"
    encoder_rotary: str = "auto"
    encoder_fusion: str = "auto"
    decoder_fusion: str = "auto"
    state_file: Path | None = None
    lane: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> PluginEnv:
        def path(name: str) -> Path | None:
            value = environ.get(name)
            return Path(value) if value else None

        return cls(
            shared_dir=path(SHARED_DIR_ENV),
            holder_load_format=environ.get(HOLDER_LOAD_FORMAT_ENV, "auto"),
            attach_timeout_s=float(environ.get(ATTACH_TIMEOUT_ENV, "900")),
            encoder_plugin=environ.get(ENCODER_PLUGIN_ENV, "1") != "0",
            encoder_attention=environ.get(ENCODER_ATTENTION_ENV, "auto"),
            encoder_rotary=environ.get(ENCODER_ROTARY_ENV, "auto"),
            encoder_fusion=environ.get(ENCODER_FUSION_ENV, "auto"),
            decoder_fusion=environ.get(DECODER_FUSION_ENV, "auto"),
            state_file=path(STATE_ENV),
            lane=environ.get(LANE_ENV) or None,
        )


@functools.cache
def current_env() -> PluginEnv:
    """This process's settings, read from its environment on first use (tests call current_env.cache_clear())."""
    return PluginEnv.from_environ()
