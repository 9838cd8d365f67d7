"""Limits applied to documents before and while they are rendered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Limits:
    """How many pages, pixels, pixels per side and seconds a document may take."""

    max_pages: int = 2000
    max_page_pixels: int = 200_000_000
    longest_side: int = 1540
    render_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("max_pages", "max_page_pixels", "longest_side", "render_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive")

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """Limits read from the app's Settings object."""
        return cls(
            max_pages=settings.max_pages_per_job,
            max_page_pixels=settings.max_page_pixels,
            longest_side=settings.render_longest_side,
            render_timeout_s=settings.render_timeout_s,
        )
