"""Named vLLM serving profiles for LightOnOCR-2-1B, and the `vllm serve` command line built from one."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, fields, replace
from typing import Literal

DEFAULT_MODEL = "lightonai/LightOnOCR-2-1B"

# A page rendered to a 1540 px longest side is at most 55 x 55 merged 28 px patches; LightOnOCR
# drops Pixtral's break/end tokens, so that is also its prompt's image token count.
MAX_IMAGE_TOKENS = 3025
# Chat template tokens around the image (<|im_start|>user ... <|im_end|><|im_start|>assistant ...).
PROMPT_OVERHEAD_TOKENS = 32

# LightOn's own serving flags: one image per prompt, no multimodal processor cache, no prefix caching.
LIGHTON_FLAGS: tuple[str, ...] = (
    "--limit-mm-per-prompt",
    json.dumps({"image": 1}),
    "--mm-processor-cache-gb",
    "0",
    "--no-enable-prefix-caching",
)

KvCacheDtype = Literal["bf16", "fp8"]
KV_CACHE_DTYPES: dict[str, str] = {"bf16": "auto", "fp8": "fp8"}

# decode: full CUDA graphs for decode steps without torch.compile (fast start, decode is OCR's steady state);
# compiled: vLLM's default torch.compile + piecewise graphs; off: eager.
CudaGraphs = Literal["decode", "compiled", "off"]
CUDA_GRAPH_FLAGS: dict[str, tuple[str, ...]] = {
    "decode": ("--compilation-config", json.dumps({"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"})),
    "compiled": (),
    "off": ("--enforce-eager",),
}


@dataclass(frozen=True)
class Profile:
    """How one vLLM engine is sized for one kind of card."""

    name: str
    gpu_memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_tokens: int = 4096
    api_server_count: int = 1
    renderer_workers: int = 1
    kv_cache_dtype: KvCacheDtype = "bf16"
    pair_size: int = 2
    cuda_graphs: CudaGraphs = "decode"
    attention_backend: str | None = None
    encoder_plugin: bool = True

    @property
    def max_model_len(self) -> int:
        """Longest sequence: the largest page's image tokens, the template, and the output cap."""
        return _round_up(MAX_IMAGE_TOKENS + PROMPT_OVERHEAD_TOKENS + self.max_tokens, 64)


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


PROFILES: dict[str, Profile] = {
    "h200": Profile(
        name="h200",
        gpu_memory_utilization=0.90,
        max_num_seqs=512,
        max_num_batched_tokens=16384,
        api_server_count=4,
        renderer_workers=8,
        pair_size=16,
        attention_backend="FLASH_ATTN",
    ),
    "a100-80": Profile(
        name="a100-80",
        gpu_memory_utilization=0.90,
        max_num_seqs=256,
        max_num_batched_tokens=16384,
        api_server_count=2,
        renderer_workers=4,
        pair_size=8,
    ),
    "24gb": Profile(
        name="24gb",
        gpu_memory_utilization=0.90,
        max_num_seqs=16,
        max_num_batched_tokens=8192,
        api_server_count=1,
        renderer_workers=2,
        pair_size=4,
    ),
    "16gb": Profile(
        name="16gb",
        gpu_memory_utilization=0.88,
        max_num_seqs=16,
        max_num_batched_tokens=4096,
        api_server_count=1,
        renderer_workers=2,
        pair_size=2,
    ),
}

_FIELD_TYPES = {f.name: f.type for f in fields(Profile)}


def get_profile(name: str, **overrides: object) -> Profile:
    """The named profile with any non-None overrides applied and checked."""
    try:
        base = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}") from None
    unknown = set(overrides) - set(_FIELD_TYPES) - {"name"}
    if unknown:
        raise ValueError(f"unknown profile fields: {', '.join(sorted(unknown))}")
    profile = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    _validate(profile)
    return profile


def _validate(profile: Profile) -> None:
    if not 0.01 <= profile.gpu_memory_utilization <= 0.98:
        raise ValueError("gpu_memory_utilization must be within [0.01, 0.98]")
    if profile.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype must be one of {', '.join(KV_CACHE_DTYPES)}")
    if profile.cuda_graphs not in CUDA_GRAPH_FLAGS:
        raise ValueError(f"cuda_graphs must be one of {', '.join(CUDA_GRAPH_FLAGS)}")
    for name in ("max_num_seqs", "max_num_batched_tokens", "max_tokens", "api_server_count",
                 "renderer_workers", "pair_size"):
        if getattr(profile, name) < 1:
            raise ValueError(f"{name} must be at least 1")
    if profile.max_num_batched_tokens < MAX_IMAGE_TOKENS + PROMPT_OVERHEAD_TOKENS:
        raise ValueError("max_num_batched_tokens must hold at least one whole page prompt")


def capped(profile: Profile, *, cap_gib: float, total_gib: float) -> Profile:
    """The profile on a card of total_gib behaving as on a card of cap_gib (same share of the smaller card)."""
    if cap_gib <= 0 or total_gib <= 0 or cap_gib > total_gib:
        raise ValueError("need 0 < cap_gib <= total_gib")
    share = profile.gpu_memory_utilization * cap_gib / total_gib
    return replace(profile, gpu_memory_utilization=round(share, 4))


def serve_argv(
    profile: Profile,
    *,
    model: str = DEFAULT_MODEL,
    served_model_name: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8100,
    load_format: str | None = None,
    python: str = sys.executable,
    extra_args: tuple[str, ...] = (),
) -> list[str]:
    """The `vllm serve` command line (as `python -m vllm.entrypoints.cli.main serve`) for a profile."""
    argv = [
        python, "-m", "vllm.entrypoints.cli.main", "serve", model,
        "--served-model-name", served_model_name or model,
        "--host", host,
        "--port", str(port),
        "--gpu-memory-utilization", f"{profile.gpu_memory_utilization:g}",
        "--max-model-len", str(profile.max_model_len),
        "--max-num-seqs", str(profile.max_num_seqs),
        "--max-num-batched-tokens", str(profile.max_num_batched_tokens),
        "--kv-cache-dtype", KV_CACHE_DTYPES[profile.kv_cache_dtype],
        "--api-server-count", str(profile.api_server_count),
        "--renderer-num-workers", str(profile.renderer_workers),
        *LIGHTON_FLAGS,
    ]
    if profile.attention_backend:
        argv += ["--attention-backend", profile.attention_backend]
    argv += CUDA_GRAPH_FLAGS[profile.cuda_graphs]
    if load_format:
        argv += ["--load-format", load_format]
    argv += list(extra_args)
    return argv


def plugin_env(profile: Profile) -> dict[str, str]:
    """Environment that switches the ocrq encoder plugin on or off for an engine process."""
    return {"OCRQ_ENCODER_PLUGIN": "1" if profile.encoder_plugin else "0"}
