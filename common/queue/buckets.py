"""Size buckets for GPU pages: pages of similar image-token counts are batched together."""

from __future__ import annotations

import math

PATCH = 28  # Pixtral's 14 px patches, merged 2x2
# Upper token bounds; a 1540 px page is at most 55 x 55 = 3,025 image tokens.
BUCKET_EDGES = (512, 1024, 2048, 3025)


def image_tokens(width: int, height: int) -> int:
    """Image tokens LightOnOCR spends on a page of this rendered size."""
    return math.ceil(width / PATCH) * math.ceil(height / PATCH)


def bucket_of(width: int, height: int) -> str:
    tokens = image_tokens(width, height)
    for edge in BUCKET_EDGES:
        if tokens <= edge:
            return f"t{edge}"
    return f"t{BUCKET_EDGES[-1]}"


def buckets() -> list[str]:
    return [f"t{edge}" for edge in BUCKET_EDGES]
