"""`ocrq serve`: the whole stack in one process tree on the embedded default."""

from __future__ import annotations

import ctypes
import functools
import logging
import logging.config
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import uvicorn

from cli.connect import key_file, url_file
from common.db import Database
from common.log_format import CONSOLE_LOGGER, record_from_line, serve_logging_config
from common.queue.names import WEBHOOK_QUEUE
from common.settings import Settings
from common.tenancy import keys

PR_SET_PDEATHSIG = 1
# Page workers `ocrq serve` starts by default, one per core up to this: each holds its own models, a page's arrays
# and OpenVINO's kernels for the input shapes it has met (0.85 GB at its peak reading one 2550x3300 scan, 1.26 GB
# with OCRQ_CPU_FAST=false; about 1.8 GB after 300 corpus pages), and a laptop's memory is not a server's.
MAX_DEFAULT_PAGE_WORKERS = 4
# How long the start-up summary waits for the workers to say they are ready.
READY_WAIT_S = 300.0
# Celery's line when a worker is ready to take tasks.
READY_MARK = b" ready."
# A worker that dies within this many seconds of its start is restarted after a growing pause.
QUICK_DEATH_S = 30.0
MAX_RESTART_PAUSE_S = 60.0
# After SIGTERM or Ctrl-C: the API's open requests get this long, then the workers this long before SIGKILL; a page
# cut short is read again (delivery is at least once), and the whole stop stays under 10 s.
API_GRACE_S = 2
WORKER_GRACE_S = 5.0

log = logging.getLogger("ocrq.serve")
console = logging.getLogger(CONSOLE_LOGGER)


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


def worker_plan(settings: Settings, *, cores: int | None = None) -> dict[str, dict]:
    """The workers `ocrq serve` runs: page workers (the first with the sweeper schedule), and webhooks apart, so a
    slow receiver never holds up a page."""
    count = settings.serve_page_workers or min(cores or os.cpu_count() or 1, MAX_DEFAULT_PAGE_WORKERS)
    plan = {"worker" if n == 0 else f"worker-{n + 1}": {"beat": n == 0} for n in range(count)}
    return plan | {"webhooks": {"beat": False, "queues": WEBHOOK_QUEUE}}


def start_worker(name: str, *, beat: bool, queues: str | None = None,
                 ready: threading.Event | None = None) -> subprocess.Popen:
    """Start a worker whose JSON log lines join ours; `ready` is set when it says it is ready."""
    # solo: one process reading one page at a time, and acks without a 2 s poll delay.
    args = [sys.executable, "-m", "cli.main", "worker", "--pool", "solo"] + (["--beat"] if beat else [])
    args += ["--queues", queues] if queues else []
    # JSON, so each line keeps its logger and level here; the worker ends itself if this process is gone.
    env = os.environ | {"OCRQ_LOG_FORMAT": "json", "OCRQ_SUPERVISOR_PID": str(os.getpid())}
    prctl = _prctl()  # looked up before the fork: the child, forked from a threaded process, only calls it
    process = subprocess.Popen(args, env=env, start_new_session=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               preexec_fn=(lambda: prctl(PR_SET_PDEATHSIG, signal.SIGTERM)) if prctl else None)  # noqa: PLW1509
    threading.Thread(target=relay, args=(process, ready, f"ocrq.{name}"), name=f"{name}-output",
                     daemon=True).start()
    return process


def relay(process: subprocess.Popen, ready: threading.Event | None, logger: str) -> None:
    """Hand a worker's output lines to our logging (the log file; the console what it shows), watching for
    its ready line."""
    for line in iter(process.stdout.readline, b""):
        record = record_from_line(line.decode("utf-8", "replace").rstrip("\n"), default_logger=logger)
        logging.getLogger(record.name).handle(record)
        if ready is not None and READY_MARK in line:
            ready.set()


@functools.cache
def _prctl():
    """Linux's prctl, to have the worker SIGTERMed if `ocrq serve` dies without cleaning up (e.g. SIGKILL)."""
    return ctypes.CDLL("libc.so.6", use_errno=True).prctl if sys.platform == "linux" else None


def serve(settings: Settings, *, host: str, port: int, verbose: bool = False) -> None:
    """Migrate, start one worker (with the sweeper schedule), then the API in this process."""
    settings.home.mkdir(parents=True, exist_ok=True)
    log_dir = settings.home / "logs"
    log_dir.mkdir(exist_ok=True)
    log_config = serve_logging_config(settings, log_dir=log_dir, verbose=verbose)
    logging.config.dictConfig(log_config)
    console.info("logs: %s%s", log_dir, "" if verbose else " (-v shows them here too)")
    # Imported once the log file is in place: Alembic logs its plugins as it loads.
    from api.app import create_app
    from common import migrate

    # Webhook links of the API and of the workers point where we serve, unless OCRQ_PUBLIC_URL says otherwise.
    os.environ |= {"OCRQ_HOST": host, "OCRQ_PORT": str(port)}
    settings = settings.model_copy(update={"host": host, "port": port})
    url = local_url(host, port)
    url_file().write_text(url + "\n")
    migrate.upgrade(settings.resolved_database_url)
    console.info("database: up to date")
    key = None if settings.auth_disabled else first_key(settings)
    plan = worker_plan(settings)
    console.info("workers: starting %s", ", ".join(plan))
    ready = {name: threading.Event() for name in plan}
    workers = {name: start_worker(name, **options, ready=ready[name]) for name, options in plan.items()}
    stop = threading.Event()
    watcher = threading.Thread(target=keep_alive, args=(workers, plan, stop), kwargs={"ready": ready},
                               name="worker-watch", daemon=True)
    watcher.start()
    console.info("API: starting on %s", url)
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host=host, port=port,
                                           log_level=settings.log_level.lower(), log_config=log_config,
                                           timeout_graceful_shutdown=API_GRACE_S))
    threading.Thread(target=announce, args=(server, ready, stop, url, key, settings), name="announce",
                     daemon=True).start()
    # uvicorn raises the SIGTERM or SIGINT it caught again once it has stopped, which would end this process before
    # it stops the workers: with these handlers that second signal changes nothing.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_args: None)
    try:
        server.run()
    finally:
        console.info("stopping")
        stop.set()
        watcher.join(timeout=2)
        stop_workers(list(workers.values()), grace_s=WORKER_GRACE_S)
        console.info("stopped")
    # Everything is stopped; the API's idle thread-pool threads would hold the interpreter up to 10 s more (seen:
    # 8 s after "stopped" on a busy machine). A bind that failed is exit status 3, as uvicorn's own.
    logging.shutdown()
    sys.stdout.flush()
    os._exit(0 if server.started else 3)


def stop_workers(workers: list[subprocess.Popen], *, grace_s: float) -> None:
    """SIGTERM each worker's process group, and SIGKILL what is left of them after grace_s."""
    for worker in workers:
        _signal_group(worker, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for worker in workers:
        try:
            worker.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            pass
    for worker in workers:
        # Even a worker that has exited may leave a pool child or the beat process in its group.
        _signal_group(worker, signal.SIGKILL)
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            log.warning("worker %d did not end after SIGKILL", worker.pid)


def _signal_group(worker: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(worker.pid, sig)
    except ProcessLookupError:
        pass


def keep_alive(workers: dict[str, subprocess.Popen], plan: dict[str, dict], stop: threading.Event, *,
               ready: dict[str, threading.Event] | None = None, every_s: float = 1.0) -> None:
    """Start again a worker that exits (a crash, the OOM killer): the API alone would take jobs nobody reads. One
    that dies before it was ever ready still says so when its successor is, so the start-up summary comes."""
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
            workers[name] = start_worker(name, **plan[name], ready=(ready or {}).get(name))
            started[name] = time.monotonic()


def local_url(host: str, port: int) -> str:
    """The URL a client on this machine uses: a wildcard bind is reached on loopback."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def announce(server: uvicorn.Server, ready: dict[str, threading.Event], stop: threading.Event, url: str,
             key: str | None, settings: Settings) -> None:
    """Once the API listens and the workers are ready, say where it is, where the key is, and what to try."""
    deadline = time.monotonic() + READY_WAIT_S
    while not server.started or not all(event.is_set() for event in ready.values()):
        if stop.wait(0.2) or time.monotonic() > deadline:
            return
    console.info("workers: ready")
    print(startup_summary(url=url, key=key, key_path=key_file(), auth_disabled=settings.auth_disabled), flush=True)


def startup_summary(*, url: str, key: str | None, key_path: Path, auth_disabled: bool) -> str:
    """The last lines of start-up: the URL, the key (where it is; itself on first start), two commands to try."""
    ocrq = "./run ocrq" if Path("run").is_file() and Path("cli/main.py").is_file() else "ocrq"
    sample = "tests/samples/linn.png" if Path("tests/samples/linn.png").is_file() else "scan.png"
    lines = ["", f"ocrq is ready at {url}   (web page {url}/ , API docs {url}/docs)"]
    if auth_disabled:
        lines.append("API keys are off (OCRQ_AUTH_DISABLED=true).")
        auth = ""
    elif key:
        lines += [f"Your API key, shown this once, saved in {key_path}:", f"  {key}"]
        auth = f'-H "Authorization: Bearer $(cat {shlex.quote(str(key_path))})" '
    elif key_path.exists():
        lines.append(f"Your API key is in {key_path}")
        auth = f'-H "Authorization: Bearer $(cat {shlex.quote(str(key_path))})" '
    else:
        lines.append("No API key is saved here: create one with `ocrq keys create --tenant T`.")
        auth = '-H "Authorization: Bearer $KEY" '
    lines += ["Try:", f"  {ocrq} submit {sample} --wait",
              f"  curl -s {auth}-F file=@{sample} {url}/jobs", ""]
    return "\n".join(lines)
