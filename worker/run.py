"""Starting a Celery worker with ocrq's queues and the engine loaded before the first task."""

from __future__ import annotations

import socket

from celery.signals import worker_process_init

from common.settings import Settings
from worker.celery_app import create_celery
from worker.celeryconfig import cpu_worker_queues
from worker.context import context_of


def run_worker(settings: Settings, *, queues: list[str] | None, concurrency: int, beat: bool) -> None:
    import worker.tasks  # noqa: F401  (registers the tasks)

    app = create_celery(settings)

    @worker_process_init.connect(weak=False)
    def _load_engine(**_kwargs) -> None:
        context_of(app).engine  # load models now, not inside the first page's time limit

    queues = queues or cpu_worker_queues()
    argv = ["worker", "-Q", ",".join(queues), "-c", str(concurrency), "--loglevel", settings.log_level,
            "-n", f"ocrq-{socket.gethostname()}-%i@%h", "--without-gossip", "--without-mingle"]
    if beat:
        settings.home.mkdir(parents=True, exist_ok=True)
        argv += ["--beat"]
    app.worker_main(argv)
