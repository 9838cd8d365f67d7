"""What a worker measures about the pages it processes, and how it serves those metrics.

Celery's prefork pool does the work in child processes, so the worker uses Prometheus' multiprocess
mode: each child writes its counters and histograms to files in a folder of this worker's own
(OCRQ_METRICS_DIR/<host>-<pid>, chosen by worker/metrics_dir.py before prometheus_client is imported), and
the worker's main process serves them merged on OCRQ_WORKER_METRICS_PORT. The API's /metrics merges the
folders of every worker on its host.
"""

from __future__ import annotations

import logging
import os
import shutil

from celery import Celery
from celery.signals import worker_ready, worker_shutdown
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

from common.settings import Settings
from worker.engines.base import EngineError
from worker.metrics_dir import MULTIPROC_ENV, worker_metrics_dir

log = logging.getLogger("ocrq.metrics")
QUEUE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
ENGINE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)


class WorkerMetrics:
    """The counters and histograms one worker process observes, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.queue_seconds = Histogram(
            "ocrq_page_queue_seconds", "Time a page waited from being queued until a worker took it.",
            ["lane"], buckets=QUEUE_BUCKETS, registry=self.registry)
        self.engine_seconds = Histogram(
            "ocrq_page_engine_seconds", "Time the engine took to read one page (successful reads).",
            ["engine"], buckets=ENGINE_BUCKETS, registry=self.registry)
        self.pages = Counter(
            "ocrq_pages_processed", "Pages a worker finished (succeeded, failed) or put back for a retry.",
            ["outcome"], registry=self.registry)
        self.sources = Counter(
            "ocrq_pages_by_source", "Pages read, by where their text came from (text_layer, ocr, mixed).",
            ["source"], registry=self.registry)
        self.engine_errors = Counter(
            "ocrq_engine_errors", "Pages the engine could not read, by kind (overloaded, oom, timeout, ...).",
            ["kind"], registry=self.registry)

    def page_taken(self, *, lane: str, enqueued_at, started_at) -> None:
        if enqueued_at is not None and started_at is not None:
            self.queue_seconds.labels(lane=lane).observe(max(0.0, (started_at - enqueued_at).total_seconds()))

    def page_read(self, *, engine: str, seconds: float, result) -> None:
        """One engine call for one page: its time if it read the page, its kind if it failed."""
        if isinstance(result, EngineError):
            self.engine_errors.labels(kind=result.kind).inc()
        else:
            self.engine_seconds.labels(engine=engine).observe(seconds)

    def page_done(self, outcome: str, source: str | None = None) -> None:
        self.pages.labels(outcome=outcome).inc()
        if source:
            self.sources.labels(source=source).inc()


def install(app: Celery, settings: Settings) -> None:
    """This worker's port once it is ready, and its folder removed when it stops.

    Call in the worker's main process before it forks, after worker.metrics_dir.prepare_multiprocess().
    """
    folder = worker_metrics_dir(settings)
    if os.environ.get(MULTIPROC_ENV) != str(folder):
        raise RuntimeError(f"{MULTIPROC_ENV} is not this worker's folder {folder}: "
                           "call worker.metrics_dir.prepare_multiprocess() before importing the worker")

    @worker_shutdown.connect(weak=False)
    def _forget(**_kwargs) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    if not settings.worker_metrics_port:
        return

    @worker_ready.connect(weak=False)
    def _serve(**_kwargs) -> None:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(folder))
        start_http_server(settings.worker_metrics_port, addr=settings.worker_metrics_host, registry=registry)
        log.info("worker metrics on http://%s:%d/metrics", settings.worker_metrics_host,
                 settings.worker_metrics_port)
