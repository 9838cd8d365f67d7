"""Single-page jobs for the GPU path's tests (tests/jobs/test_gpu_path*.py): one wide line of large text a page."""

from __future__ import annotations

import io

from tests.documents.hostile import text_page

# A wide single line: a bucket of its own, and large enough text for the CPU engine standing in for vLLM.
PAGE_SIZE = (900, 300)
FONT_SIZE = 48


def png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def submit_page(client, text: str) -> str:
    """The id of a new job of one PNG page reading `text`."""
    page = png(text_page(text, size=PAGE_SIZE, font_size=FONT_SIZE))
    return client.post("/jobs", files={"file": ("page.png", page)}).json()["id"]
