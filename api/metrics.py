"""The API's /metrics: one registry per app, filled at scrape time from the database, the broker, the
engines and the metrics files of the workers on this host."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import func, select

from common.engine_metrics import scrape_engine
from common.job_states import JOB_ACTIVE, JOB_TERMINAL, PAGE_ACTIVE, PAGE_DONE
from common.models import Job, Page, WebhookAttempt, WebhookDelivery
from common.models.base import utcnow
from common.queue_depth import QueueDepths
from common.services.jobs import Services
from worker.celeryconfig import LANES, page_queue

log = logging.getLogger("ocrq.metrics")
PAGE_STATUSES = (*PAGE_ACTIVE, *PAGE_DONE, "canceled")
RATE_WINDOW_S = 60


class ServiceCollector:
    """Jobs, pages and webhooks by status, pages/s, queue depths and engine state, read when scraped."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc
        known = [q.name for q in svc.celery.conf.task_queues or []] + [page_queue(lane) for lane in LANES]
        self.queues = QueueDepths(svc.settings, known=known)
        self.engine_urls = svc.settings.engine_urls if svc.settings.engine == "vllm" else []
        self.http = httpx.Client(timeout=svc.settings.engine_metrics_timeout_s)

    def collect(self):
        up = GaugeMetricFamily("ocrq_metrics_source_up", "Whether /metrics could read each source.",
                               labels=["source"])
        for source, read in (("database", self._database), ("broker", self._queues)):
            try:
                families = list(read())
            except Exception as exc:  # one source down must not take the others' metrics with it
                log.warning("metrics: %s unreadable: %s", source, exc)
                families = []
            up.add_metric([source], 1 if families else 0)
            yield from families
        yield up
        yield from self._engines()

    def _database(self):
        now = utcnow()
        with self.svc.db.session() as session:
            jobs = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            pages = dict(session.execute(select(Page.status, func.count()).group_by(Page.status)).all())
            recent = session.scalar(select(func.count()).where(
                Page.finished_at >= now - timedelta(seconds=RATE_WINDOW_S), Page.status.in_(PAGE_DONE)))
            deliveries = session.execute(
                select(WebhookDelivery.status, func.count()).group_by(WebhookDelivery.status)).all()
            attempts = session.execute(
                select(WebhookAttempt.outcome, func.count()).group_by(WebhookAttempt.outcome)).all()
        yield _by_label("ocrq_jobs", "Jobs by status.", "status", dict.fromkeys((*JOB_ACTIVE, *JOB_TERMINAL), 0) | jobs)
        yield _by_label("ocrq_pages", "Pages by status.", "status", dict.fromkeys(PAGE_STATUSES, 0) | pages)
        yield GaugeMetricFamily("ocrq_pages_per_second",
                                f"Pages finished per second by all workers over the last {RATE_WINDOW_S} s.",
                                value=recent / RATE_WINDOW_S)
        yield _by_label("ocrq_webhook_deliveries", "Webhook deliveries (one per event and URL) by status.",
                        "status", dict(deliveries))
        yield _by_label("ocrq_webhook_attempts", "Webhook delivery attempts by outcome.", "outcome", dict(attempts))

    def _queues(self):
        yield _by_label("ocrq_queue_depth", "Messages waiting in each ocrq.* broker queue.", "queue",
                        self.queues.read())

    def _engines(self):
        if not self.engine_urls:
            return
        families = {
            "up": GaugeMetricFamily("ocrq_engine_up", "Whether the engine's /metrics answered.", labels=["engine"]),
            "kv": GaugeMetricFamily("ocrq_engine_kv_cache_usage_ratio", "KV cache in use, 0-1 (from vLLM).",
                                    labels=["engine"]),
            "running": GaugeMetricFamily("ocrq_engine_requests_running", "Requests the engine is running.",
                                         labels=["engine"]),
            "waiting": GaugeMetricFamily("ocrq_engine_requests_waiting", "Requests waiting in the engine.",
                                         labels=["engine"]),
        }
        for url in self.engine_urls:
            stats = scrape_engine(self.http, url)
            families["up"].add_metric([stats.url], 1 if stats.up else 0)
            for key, value in (("kv", stats.kv_cache_usage), ("running", stats.running),
                               ("waiting", stats.waiting)):
                if value is not None:
                    families[key].add_metric([stats.url], value)
        yield from families.values()

    def close(self) -> None:
        self.queues.close()
        self.http.close()


class WorkerFilesCollector:
    """The counters and histograms of every worker on this host, merged from their multiprocess files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def collect(self):
        files = [str(f) for f in self.folder.glob("*/*.db")]
        return MultiProcessCollector.merge(files) if files else []


def _by_label(name: str, documentation: str, label: str, counts: dict) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for value, count in sorted(counts.items()):
        family.add_metric([str(value)], count)
    return family


class ApiMetrics:
    """The registry behind one app's /metrics; built in the lifespan, closed with it."""

    def __init__(self, svc: Services) -> None:
        self.registry = CollectorRegistry()
        self.service = ServiceCollector(svc)
        self.registry.register(self.service)
        self.registry.register(WorkerFilesCollector(svc.settings.resolved_metrics_dir))

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def close(self) -> None:
        self.service.close()
