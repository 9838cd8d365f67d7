"""Starting a Celery worker with ocrq's queues and the engine loaded before the first task."""

from __future__ import annotations

import logging
import os
import time

from celery.signals import setup_logging, worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown
from sqlalchemy.orm import configure_mappers

from common import tracing
from common.engines import lanes as engine_lanes
from common.queue.app import create_celery
from common.queue.config import gpu_worker_config
from common.queue.names import WEBHOOK_QUEUE, cpu_worker_queues, gpu_worker_default_queues
from common.settings import Settings
from worker.context import context_of
from worker.engines import needs
from worker.queue import liveness

log = logging.getLogger("ocrq.worker")
# The line each process logs once its engine is loaded; with prefork it comes after Celery's "ready.".
ENGINE_LOADED = "engine loaded"


def run_worker(settings: Settings, *, queues: list[str] | None, concurrency: int, beat: bool, pool: str,
               gpu: bool = False, lane: str = "all") -> None:
    # Importing each package's tasks registers them.
    import worker.batches.tasks  # noqa: F401
    import worker.webhooks.tasks  # noqa: F401
    from worker import metrics
    from worker.jobs import tasks as job_tasks

    if queues != [WEBHOOK_QUEUE]:  # a webhook-only worker reads no page
        needs.check(settings)
    if gpu:
        # The app carries these settings to every process: the engine is built from the lane's URLs.
        settings = engine_lanes.for_worker(settings, lane=lane, pool=pool, concurrency=concurrency)
    app = create_celery(settings)
    if gpu:
        job_tasks.register_gpu_tasks(app, pair_size=settings.engine_pair_size, wait_s=settings.engine_batch_wait_s)
        app.conf.update(gpu_worker_config(settings))
        queues = queues or gpu_worker_default_queues(lane)
    metrics.install(app, settings)
    # The CLI configured logging (JSON or text) already; a receiver here stops Celery from replacing it.
    setup_logging.connect(lambda **_kwargs: None, weak=False)

    # Before the engine loads: the database engine it builds must be made after SQLAlchemy is instrumented.
    _trace(settings, pool=pool, service="ocrq-gpu-worker" if gpu else (
        "ocrq-webhooks" if queues == [WEBHOOK_QUEUE] else "ocrq-worker"))

    def _load_engine(**_kwargs) -> None:
        started = time.perf_counter()
        engine = context_of(app).engine  # load models now, not inside the first page's time limit
        log.info(ENGINE_LOADED, extra={"engine": engine.name, "seconds": round(time.perf_counter() - started, 2)})

    # prefork loads in each child; other pools run tasks in the main process. A webhook-only worker reads no page.
    if queues != [WEBHOOK_QUEUE]:
        (worker_process_init if pool == "prefork" else worker_ready).connect(_load_engine, weak=False)

    _keep_alive(app, settings)
    queues = queues or cpu_worker_queues()
    argv = ["worker", "-Q", ",".join(queues), "-c", str(concurrency), "-P", pool, "--loglevel", settings.log_level,
            "-n", node_name(gpu=gpu, lane=lane, queues=queues), "--without-gossip", "--without-mingle"]
    if beat:
        settings.home.mkdir(parents=True, exist_ok=True)
        # Every worker may run the schedule; a lease in the database lets exactly one of them send it.
        argv += ["--beat", "--scheduler", f"{liveness.__name__}:ElectedScheduler"]
    # Before the pool forks and the heartbeat thread starts: a child forked while another thread holds
    # SQLAlchemy's mapper-configuration lock waits on it forever (a replacement pool child hung in its first query).
    configure_mappers()
    app.worker_main(argv)


def _keep_alive(app, settings: Settings) -> None:
    """Name this worker's lease (its children inherit it) and beat from the main process while it runs."""
    app.ocrq_worker = liveness.new_worker_name()
    held = liveness.HeldRequests().connect()  # from the first message on, before the heartbeat starts
    beating: list[liveness.Heartbeat] = []

    def _start(sender=None, **_kwargs) -> None:
        holder = f"{getattr(sender, 'hostname', 'worker')} pid {os.getpid()}"
        beating.append(liveness.Heartbeat(app, settings, name=app.ocrq_worker, holder=holder, held=held).start())

    def _stop(**_kwargs) -> None:
        for heartbeat in beating:
            heartbeat.stop()

    worker_ready.connect(_start, weak=False)
    worker_shutdown.connect(_stop, weak=False)


def _trace(settings: Settings, *, pool: str, service: str) -> None:
    """Tracing where tasks run: in each prefork child (its exporter thread must start after the fork; it exits
    without atexit, so it flushes first), or here for the other pools."""
    if not tracing.enabled(settings):
        return
    if pool != "prefork":
        tracing.setup(settings, service=service)
        return
    worker_process_init.connect(lambda **_kwargs: tracing.setup(settings, service=service), weak=False)
    worker_process_shutdown.connect(lambda **_kwargs: tracing.flush(), weak=False)


def node_name(*, gpu: bool, lane: str, queues: list[str]) -> str:
    """A Celery node name of its own for each worker of a host: its role and pid (one host runs several)."""
    role = f"gpu-{lane}" if gpu else ("webhooks" if queues == [WEBHOOK_QUEUE] else "cpu")
    return f"ocrq-{role}-{os.getpid()}@%h"
