"""The CPU engine server on a loopback port, and rendered text pages; tests/conftest.py holds its fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.support.http import loopback
from tests.support.servers import free_port
from worker.engines import launcher as engine_launcher

MODEL = "lightonai/LightOnOCR-2-1B"
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def render_page(lines: list[str], *, size: tuple[int, int] = (820, 260), font_size: int = 34) -> Image.Image:
    """A white RGB page with the lines in black, as the worker would hand it to an engine."""
    font = ImageFont.truetype(str(DEJAVU), font_size) if DEJAVU.exists() else ImageFont.load_default(font_size)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((40, 40 + i * int(font_size * 2)), line, font=font, fill="black")
    return image


@dataclass
class CpuEngineServer:
    """A running `ocrq engine --backend cpu` server with its admin (fault injection) endpoints on."""

    url: str
    model: str

    def faults(self, mode: str, count: int = 1, delay_s: float = 0.0) -> None:
        spec = {"mode": mode, "count": count, "delay_s": delay_s}
        loopback().post(f"{self.url}/admin/faults", json=spec).raise_for_status()

    def clear_faults(self) -> None:
        loopback().delete(f"{self.url}/admin/faults").raise_for_status()

    def reset(self) -> None:
        self.clear_faults()
        loopback().delete(f"{self.url}/admin/requests").raise_for_status()

    def requests(self) -> list[dict]:
        return sorted(loopback().get(f"{self.url}/admin/requests").json()["requests"], key=lambda r: r["start"])

    def max_in_flight(self) -> int:
        return loopback().get(f"{self.url}/admin/requests").json()["max_in_flight"]


@contextmanager
def running_cpu_engine(*, lane: str | None = None, concurrency: int = 2) -> Iterator[CpuEngineServer]:
    """The CPU engine server in its own process, started and stopped through worker.engines.launcher."""
    (spec,) = engine_launcher.plan_cpu(served_model_name=MODEL, port=free_port(), concurrency=concurrency,
                                       admin=True, lanes=(lane,) if lane else ())
    running = engine_launcher.start(spec)
    try:
        if not engine_launcher.wait_ready(running, timeout_s=60):
            pytest.fail(f"CPU engine server did not start (exit code {running.process.poll()})")
        yield CpuEngineServer(url=spec.url, model=MODEL)
    finally:
        engine_launcher.stop_engine(running, grace_s=10)
