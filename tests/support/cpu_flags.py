"""What the CPU the suite runs on can do: the CPU engine's models compute a little differently without AVX-512."""
from __future__ import annotations

from pathlib import Path


def _flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[1].split()}


AVX2_ONLY = "avx2" in _flags() and "avx512f" not in _flags()
