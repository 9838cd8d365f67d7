"""`ocrq serve`: the whole stack in one process tree on the embedded default."""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import uvicorn

from cli.client import key_file
from common import migrate
from common.db import Database
from common.log_format import logging_config
from common.services import keys
from common.settings import Settings
from worker.celeryconfig import WEBHOOK_QUEUE

PR_SET_PDEATHSIG = 1
# The pages worker (with the sweeper schedule), and webhooks apart, so a slow receiver never holds up a page.
WORKERS = {"worker": {"beat": True}, "webhooks": {"beat": False, "queues": WEBHOOK_QUEUE}}
# A worker that dies within this many seconds of its start is restarted after a growing pause.
QUICK_DEATH_S = 30.0
MAX_RESTART_PAUSE_S = 60.0

log = logging.getLogger("ocrq.serve")


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
    prctl = _prctl()  # looked up before the fork: the child, forked from a threaded process, only calls it
    return subprocess.Popen(args, env=os.environ.copy(), start_new_session=True,
                            preexec_fn=(lambda: prctl(PR_SET_PDEATHSIG, signal.SIGTERM)) if prctl else None)  # noqa: PLW1509


@functools.cache
def _prctl():
    """Linux's prctl, to have the worker SIGTERMed if `ocrq serve` dies without cleaning up (e.g. SIGKILL)."""
    return ctypes.CDLL("libc.so.6", use_errno=True).prctl if sys.platform == "linux" else None


def serve(settings: Settings, *, host: str, port: int) -> None:
    """Migrate, start one worker (with the sweeper schedule), then the API in this process."""
    from api.app import create_app

    settings.home.mkdir(parents=True, exist_ok=True)
    migrate.upgrade(settings.resolved_database_url)
    if not settings.auth_disabled and (key := first_key(settings)):
        print(f"Your API key (shown once, also saved to {key_file()}):\n  {key}", flush=True)
    workers = {name: start_worker(**options) for name, options in WORKERS.items()}
    stop = threading.Event()
    watcher = threading.Thread(target=keep_alive, args=(workers, stop), name="worker-watch", daemon=True)
    watcher.start()
    try:
        uvicorn.run(create_app(settings), host=host, port=port, log_level=settings.log_level.lower(),
                    log_config=logging_config(settings))
    finally:
        stop.set()
        watcher.join(timeout=10)
        for worker in workers.values():
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers.values():
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)


def keep_alive(workers: dict[str, subprocess.Popen], stop: threading.Event, *, every_s: float = 1.0) -> None:
    """Start again a worker that exits (a crash, the OOM killer): the API alone would take jobs nobody reads."""
    started = dict.fromkeys(workers, time.monotonic())
    pause = dict.fromkeys(workers, 1.0)
    while not stop.wait(every_s):
        for name, process in list(workers.items()):
            if process.poll() is None:
                continue
            lived = time.monotonic() - started[name]
            pause[name] = min(pause[name] * 2, MAX_RESTART_PAUSE_S) if lived < QUICK_DEATH_S else 1.0
            log.warning("%s worker exited with %s after %.0f s; starting it again in %.0f s",
                        name, process.returncode, lived, pause[name])
            if stop.wait(pause[name]):
                return
            workers[name] = start_worker(**WORKERS[name])
            started[name] = time.monotonic()
