"""The stack on the vLLM engine for the text-layer tests, which count what reaches the engine."""

from __future__ import annotations

import pytest

from tests.conftest import make_settings
from tests.support.engine_server import MODEL
from tests.support.stack import Stack


@pytest.fixture()
def gpu_stack(tmp_path, pg_url, redis_url, s3, server):
    """The whole stack on the vLLM engine (the CPU stand-in behind it), whose requests are counted."""
    settings = make_settings(home=tmp_path / "home", pg_url=pg_url, redis_url=redis_url, s3=s3, engine="vllm",
                             engine_urls=[server.url], engine_model=MODEL, engine_pair_size=2)
    with Stack(settings, logs=tmp_path) as stack:
        stack.start_worker("--gpu", "--concurrency", "1")
        yield stack, server
