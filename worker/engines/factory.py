"""Build the engine named by OCRQ_ENGINE."""

from __future__ import annotations

from common.settings import Settings
from worker.engines.base import Engine


def make_engine(settings: Settings) -> Engine:
    if settings.engine == "vllm":
        from worker.engines.vllm import VllmEngine

        return VllmEngine.from_settings(settings)
    from worker.engines.cpu import CpuEngine

    return CpuEngine(threads=settings.cpu_threads, runtime=settings.cpu_runtime, quantised=settings.cpu_int8,
                     fast=settings.cpu_fast)
