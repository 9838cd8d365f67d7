"""The worker's Prometheus multiprocess folder, chosen before prometheus_client is imported.

prometheus_client picks multiprocess mode when it is imported, from PROMETHEUS_MULTIPROC_DIR (its documented
deployment step: the variable is set before the process starts using the library). So the worker's command
(`ocrq worker`, cli/main.py) calls prepare_multiprocess() first, and only then imports the worker; the prefork
children it forks inherit both the variable and the mode. This module must not import prometheus_client.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

from common.settings import Settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def worker_metrics_dir(settings: Settings) -> Path:
    return settings.resolved_metrics_dir / f"{socket.gethostname()}-{os.getpid()}"


def prepare_multiprocess(settings: Settings) -> Path:
    """Give this worker (and the children it forks) an empty metrics folder, in PROMETHEUS_MULTIPROC_DIR.

    Call before anything imports prometheus_client. Folders that workers on this host left behind when they
    died are removed.
    """
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before the worker's metrics folder was chosen; "
                           "call prepare_multiprocess() first (see worker/metrics_dir.py)")
    root, own = settings.resolved_metrics_dir, worker_metrics_dir(settings)
    root.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    for folder in root.glob(f"{host}-*"):
        pid = folder.name.rsplit("-", 1)[-1]
        if folder == own or (pid.isdigit() and not _alive(int(pid))):
            shutil.rmtree(folder, ignore_errors=True)
    own.mkdir()
    os.environ[MULTIPROC_ENV] = str(own)
    return own


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
