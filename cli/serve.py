"""`ocrq serve`: the whole stack in one process tree on the embedded default."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

import uvicorn

from cli.client import key_file
from common import migrate
from common.log_format import logging_config
from common.db import Database
from common.services import keys
from common.settings import Settings
from worker.celeryconfig import WEBHOOK_QUEUE

PR_SET_PDEATHSIG = 1


def first_key(settings: Settings) -> str | None:
    """Create the first API key of an empty database, keep it for the CLI, and return it once."""
    db = Database(settings.resolved_database_url)
    try:
        with db.session() as session:
            if keys.any_key(session):
                return None
            _, key = keys.create_key(session, tenant_id="default", name="first key")
    finally:
        db.dispose()
    path = key_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key + "\n")
    path.chmod(0o600)
    return key


def start_worker(*, beat: bool, queues: str | None = None) -> subprocess.Popen:
    # solo: one process reading one page at a time with every core, and acks without a 2 s poll delay.
    args = [sys.executable, "-m", "cli.main", "worker", "--pool", "solo"] + (["--beat"] if beat else [])
    args += ["--queues", queues] if queues else []
    return subprocess.Popen(args, env=os.environ.copy(), start_new_session=True, preexec_fn=_die_with_parent)


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM the worker if `ocrq serve` dies without cleaning up (e.g. SIGKILL)."""
    if sys.platform == "linux":
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def serve(settings: Settings, *, host: str, port: int) -> None:
    """Migrate, start one worker (with the sweeper schedule), then the API in this process."""
    from api.app import create_app

    settings.home.mkdir(parents=True, exist_ok=True)
    migrate.upgrade(settings.resolved_database_url)
    if not settings.auth_disabled and (key := first_key(settings)):
        print(f"Your API key (shown once, also saved to {key_file()}):\n  {key}", flush=True)
    # Webhooks get their own worker, so a slow receiver never holds up a page.
    workers = [start_worker(beat=True), start_worker(beat=False, queues=WEBHOOK_QUEUE)]
    try:
        uvicorn.run(create_app(settings), host=host, port=port, log_level=settings.log_level.lower(),
                    log_config=logging_config(settings))
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
