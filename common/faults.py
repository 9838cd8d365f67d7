"""Crash points for recovery tests: with OCRQ_FAULT_POINT set to a point's name, the process SIGKILLs
itself when it gets there, as a power cut or the OOM killer would; unset, every point is a no-op."""

from __future__ import annotations

import logging
import os
import signal

from common.settings import Settings

log = logging.getLogger("ocrq.faults")


def reach(settings: Settings, point: str) -> None:
    """Die here, without cleanup, if this is the configured fault point."""
    if settings.fault_point == point:
        log.warning("fault point reached: killing this process", extra={"point": point})
        os.kill(os.getpid(), signal.SIGKILL)
