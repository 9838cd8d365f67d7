"""Named vLLM serving profiles for LightOnOCR-2-1B, and the `vllm serve` command line built from one."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal

from common.queue.names import LANES

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

# The steady page the profiles are sized for: a letter or A4 page at 1540 px (1190 x 1540: 2,377 prompt tokens,
# measured) and 1,000 generated tokens, a dense page's markdown.
STEADY_PAGE_TOKENS = 2377 + 1000
# KV cache bytes per token of LightOnOCR-2-1B's decoder: 28 layers x (K, V) x 8 KV heads x 128 x 2 bytes.
KV_BYTES_PER_TOKEN_BF16 = 28 * 2 * 8 * 128 * 2
# Estimates for sizing several engines on one card: the weights (1.88 GiB measured) and what one engine
# needs besides weights and KV cache (CUDA context, encoder activations at max_num_batched_tokens, graphs).
WEIGHTS_GIB = 2.0
ENGINE_OVERHEAD_GIB = 5.0
# The interactive lane: few sequences, so a page starts decoding at once and finishes at single-page speed.
INTERACTIVE_MAX_NUM_SEQS = 8
# Under MPS, a bulk engine beside an interactive one may use this share of the SMs. Uncapped, its kernels held
# the SMs and interactive pages took 30-50x as long; at 50 % they took 1.5x idle, time-slicing 2.3x (H200).
INTERACTIVE_BULK_SM_PERCENT = 50

# Serves GET /ocrq/weights (the engine's weight-sharing state) from each vLLM API server.
STATUS_MIDDLEWARE = "ocrq_vllm_plugin.status.weights_route"

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
    # The backend for an fp8 KV cache where it differs (the h200 profile: FlashInfer, which decodes with XQA).
    fp8_attention_backend: str | None = None
    # Set by on_host, what flashinfer_kernels() found: "prebuilt", "nvcc" or None (FlashInfer cannot run here);
    # "unchecked" leaves vLLM to its own defaults.
    flashinfer: str | None = "unchecked"
    encoder_plugin: bool = True
    # A fixed KV cache size (vLLM --kv-cache-memory-bytes) instead of a share of the card; set per engine
    # when several engines share one GPU.
    kv_cache_gib: float | None = None

    @property
    def max_model_len(self) -> int:
        """Longest sequence: the largest page's image tokens, the template, and the output cap."""
        return _round_up(MAX_IMAGE_TOKENS + PROMPT_OVERHEAD_TOKENS + self.max_tokens, 64)

    @property
    def attention(self) -> str | None:
        """The vLLM attention backend this engine runs."""
        if self.kv_cache_dtype == "fp8" and self.fp8_attention_backend:
            return self.fp8_attention_backend
        return self.attention_backend

    @property
    def kv_bytes_per_token(self) -> int:
        return KV_BYTES_PER_TOKEN_BF16 // (2 if self.kv_cache_dtype == "fp8" else 1)


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
        # fp8 KV: 10.20 steady pages/s against bf16's 7.75 on one H200 (BENCHMARKS.md, issue 21), and room for
        # the 512 sequences (2.2 M tokens estimated; bf16's 1.1 M would hold 329 steady pages).
        kv_cache_dtype="fp8",
        pair_size=16,
        # FA3 reads bf16 KV at 4.0-4.2 TB/s but fp8 at 2.4-2.7; FlashInfer's XQA reads fp8 at 3.4-3.8 and gave
        # 9.46 steady pages/s against FA3's 8.02 (BENCHMARKS.md, issue 21).
        attention_backend="FLASH_ATTN",
        fp8_attention_backend="FLASHINFER",
    ),
    # One 80 GB H100 (fp8 KV native on Hopper). The h200 profile's 512 sequences preempted there: 529 times in
    # 768 steady pages. The card's KV cache (1.24 M tokens estimated, 1.32 M measured) holds 367-389 pages of
    # STEADY_PAGE_TOKENS. 352 sequences stay within it with 0 preemptions and ran 9.34-9.61 steady pages/s against
    # 224's 9.06 on the same card (BENCHMARKS.md, issue 54, run 16).
    "h100": Profile(
        name="h100",
        gpu_memory_utilization=0.92,
        max_num_seqs=352,
        max_num_batched_tokens=16384,
        api_server_count=4,
        renderer_workers=8,
        kv_cache_dtype="fp8",
        pair_size=16,
        attention_backend="FLASH_ATTN",
        fp8_attention_backend="FLASHINFER",
    ),
    # bf16 KV (no fp8 attention before Hopper): about 0.61 M tokens on paper, 180 steady pages; 176 sequences.
    "a100-80": Profile(
        name="a100-80",
        gpu_memory_utilization=0.90,
        max_num_seqs=176,
        max_num_batched_tokens=16384,
        api_server_count=2,
        renderer_workers=4,
        pair_size=8,
    ),
    # 48 GB cards (L40S, L40, RTX 6000 Ada, A6000), sized on paper: 0.90 x 48 GiB less weights and the engine's
    # memory leaves about 36 GiB, 0.33 M bf16 KV tokens, 98 steady pages; 80 sequences keep a margin. vLLM picks the
    # attention backend (no FA3 before Hopper).
    "l40s": Profile(
        name="l40s",
        gpu_memory_utilization=0.90,
        max_num_seqs=80,
        max_num_batched_tokens=8192,
        api_server_count=2,
        renderer_workers=4,
        pair_size=8,
    ),
    # 24 GB cards (L4, A10, RTX 4090): about 14 GiB of bf16 KV, 0.13 M tokens, 38 steady pages.
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


def choose_profile(card: str, memory_gib: float) -> str:
    """The profile for a card, by its name (as nvidia-smi or NVML gives it) and its memory."""
    name = card.upper()
    if "GH200" in name:  # Grace Hopper: 96 GB (an H100's die) or 144 GB (an H200's)
        return "h200" if memory_gib >= 120 else "h100"
    if "H200" in name:
        return "h200"
    if any(k in name for k in ("H100", "H800")) and memory_gib >= 70:
        return "h100"
    if "A100" in name and memory_gib >= 70:
        return "a100-80"
    if memory_gib >= 120:
        return "h200"
    if memory_gib >= 70:
        return "a100-80"
    if memory_gib >= 40:
        return "l40s"
    if memory_gib >= 22:
        return "24gb"
    return "16gb"


def kv_tokens_estimate(profile: Profile, *, total_gib: float) -> int:
    """The KV cache tokens an engine of this profile should get on a card of total_gib: its share less the
    weights and the engine's own memory (a fixed kv_cache_gib is taken as it is)."""
    if profile.kv_cache_gib is not None:
        kv_gib = profile.kv_cache_gib
    else:
        kv_gib = profile.gpu_memory_utilization * total_gib - WEIGHTS_GIB - ENGINE_OVERHEAD_GIB
    return max(int(kv_gib * 2**30 // profile.kv_bytes_per_token), 0)


def kv_shortfall(profile: Profile, kv_tokens: int) -> str | None:
    """Why a KV cache of kv_tokens cannot hold the profile's max_num_seqs steady pages, or None when it can."""
    wanted = profile.max_num_seqs * STEADY_PAGE_TOKENS
    if kv_tokens >= wanted:
        return None
    fits = kv_tokens // STEADY_PAGE_TOKENS
    return (f"profile {profile.name}: a KV cache of {kv_tokens:,} tokens holds {fits} pages of {STEADY_PAGE_TOKENS:,} "
            f"tokens, not its max_num_seqs {profile.max_num_seqs}: a steady load will preempt and recompute; use "
            f"--max-num-seqs {max(fits, 1)} or a profile for this card")


def get_profile(name: str, **overrides: object) -> Profile:
    """The named profile with any non-None overrides applied and checked."""
    try:
        base = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}") from None
    unknown = set(overrides) - set(_FIELD_TYPES) - {"name"}
    if unknown:
        raise ValueError(f"unknown profile fields: {', '.join(sorted(unknown))}")
    given = {k: v for k, v in overrides.items() if v is not None}
    if "attention_backend" in given:  # a backend asked for by name is the one run, whatever the KV cache
        given.setdefault("fp8_attention_backend", None)
    profile = replace(base, **given)
    _validate(profile)
    return profile


def _validate(profile: Profile) -> None:
    if not 0.01 <= profile.gpu_memory_utilization <= 0.98:
        raise ValueError("gpu_memory_utilization must be within [0.01, 0.98]")
    if profile.kv_cache_gib is not None and profile.kv_cache_gib <= 0:
        raise ValueError("kv_cache_gib must be positive")
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


def for_lane(profile: Profile, lane: str) -> Profile:
    """The engine a lane runs: bulk is the profile itself; interactive is small, with KV for all its sequences."""
    if lane not in LANES:
        raise ValueError(f"unknown lane {lane!r}; choose from {', '.join(LANES)}")
    if lane == "bulk":
        return profile
    seqs = min(INTERACTIVE_MAX_NUM_SEQS, profile.max_num_seqs)
    small = replace(profile, name=f"{profile.name}-interactive", max_num_seqs=seqs, api_server_count=1,
                    renderer_workers=min(2, profile.renderer_workers), pair_size=1,
                    max_num_batched_tokens=min(profile.max_num_batched_tokens, 8192))
    kv_gib = seqs * small.max_model_len * small.kv_bytes_per_token * 1.1 / 2**30
    return replace(small, kv_cache_gib=round(kv_gib, 2))


def size_engines(profiles: list[Profile], *, total_gib: float, share_weights: bool) -> list[Profile]:
    """Give every engine of one card a fixed KV cache: those without one split what the card has left.

    The card's budget is the first profile's utilization share; weights count once when shared.
    """
    budget = profiles[0].gpu_memory_utilization * total_gib
    weights = WEIGHTS_GIB * (1 if share_weights else len(profiles))
    fixed = sum(p.kv_cache_gib for p in profiles if p.kv_cache_gib is not None)
    open_count = sum(1 for p in profiles if p.kv_cache_gib is None)
    left = budget - weights - ENGINE_OVERHEAD_GIB * len(profiles) - fixed
    if open_count and left / open_count < 1.0:
        raise ValueError(f"{len(profiles)} engines do not fit in {budget:.0f} GiB; lower their KV cache sizes")
    sized = []
    for i, p in enumerate(profiles):
        kv_gib = p.kv_cache_gib if p.kv_cache_gib is not None else round(left / open_count, 2)
        own_weights = WEIGHTS_GIB if (i == 0 or not share_weights) else 0.0
        # vLLM only checks this share against the free memory at start when the KV size is fixed.
        share = min(0.98, max(0.02, (kv_gib + ENGINE_OVERHEAD_GIB + own_weights) / total_gib))
        sized.append(replace(p, kv_cache_gib=kv_gib, gpu_memory_utilization=round(share, 4)))
    return sized


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
        "--middleware", STATUS_MIDDLEWARE,
    ]
    if profile.attention:
        argv += ["--attention-backend", profile.attention]
    argv += CUDA_GRAPH_FLAGS[profile.cuda_graphs]
    if profile.kv_cache_gib is not None:
        argv += ["--kv-cache-memory-bytes", str(int(profile.kv_cache_gib * 2**30))]
    if load_format:
        argv += ["--load-format", load_format]
    argv += list(extra_args)
    return argv


def flashinfer_kernels() -> str | None:
    """Where FlashInfer gets its kernels here: "prebuilt", "nvcc" (compiled here), or None.

    Prebuilt needs both wheels: flashinfer-cubin only has the downloaded cubins, and XQA and the sampler are JIT
    modules, which come compiled in flashinfer-jit-cache or are built with nvcc (flashinfer/jit/core.py).
    """
    if importlib.util.find_spec("flashinfer") is None:
        return None
    if all(importlib.util.find_spec(name) is not None for name in ("flashinfer_cubin", "flashinfer_jit_cache")):
        return "prebuilt"
    cuda_home = os.environ.get("CUDA_HOME")
    if shutil.which("nvcc") or (cuda_home and (Path(cuda_home) / "bin" / "nvcc").is_file()):
        return "nvcc"
    return None


def on_host(profile: Profile, *, kernels: str | None) -> Profile:
    """The profile as this host can run it: the profile's own choice of FlashInfer only where its kernels can be had
    (a backend named with --attention-backend is kept as it is)."""
    profile = replace(profile, flashinfer=kernels)
    if profile.attention == "FLASHINFER" and kernels is None and profile.attention_backend != "FLASHINFER":
        return replace(profile, fp8_attention_backend=None)
    return profile


def plugin_env(profile: Profile) -> dict[str, str]:
    """Environment of an engine process: the ocrq encoder plugin on or off, and what FlashInfer needs on Hopper."""
    env = {"OCRQ_ENCODER_PLUGIN": "1" if profile.encoder_plugin else "0"}
    if profile.flashinfer is None:
        # vLLM 0.26 samples through FlashInfer by default: without FlashInfer an engine failed at start, and
        # without nvcc or prebuilt kernels FlashInfer cannot build its sampling module.
        env["VLLM_USE_FLASHINFER_SAMPLER"] = "0"
    if profile.attention == "FLASHINFER" and profile.flashinfer == "nvcc" and profile.name.startswith(("h200", "h100")):
        # vLLM 0.26 decodes with XQA on Hopper only if it believes FlashInfer's prebuilt kernels can be had (NVIDIA's
        # download site reachable, or flashinfer-cubin installed); offline it falls back to a slower kernel. XQA is
        # compiled from source on the host and needs none of them (vllm/utils/flashinfer.py, has_nvidia_artifactory).
        env["VLLM_HAS_FLASHINFER_CUBIN"] = "1"
    return env
