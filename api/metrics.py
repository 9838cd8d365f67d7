"""The API's /metrics: one registry per app, filled at scrape time from the database, the broker, the
engines and the metrics files of the workers on this host."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import func, select

from common.engines.lanes import configured_engines
from common.engines.metrics import scrape_engine
from common.engines.probe import probe_engines
from common.jobs.models import Job, Page
from common.jobs.states import JOB_ACTIVE, JOB_TERMINAL, PAGE_ACTIVE, PAGE_DONE
from common.orm import utcnow
from common.queue.depth import QueueDepths
from common.queue.names import LANES, gpu_worker_queues, page_queue
from common.services import Services
from common.webhooks.models import WebhookAttempt, WebhookDelivery

log = logging.getLogger("ocrq.metrics")
PAGE_STATUSES = (*PAGE_ACTIVE, *PAGE_DONE, "canceled")
RATE_WINDOW_S = 60


class ServiceCollector:
    """Jobs, pages and webhooks by status, pages/s, queue depths and engine state, read when scraped."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc
        # GPU bucket queues are listed only where GPUs read them; on the CPU they show up only if they hold messages.
        gpu = set() if svc.settings.engine == "vllm" else set(gpu_worker_queues())
        known = [q.name for q in svc.celery.conf.task_queues or [] if q.name not in gpu]
        known += [page_queue(lane) for lane in LANES]
        self.queues = QueueDepths(svc.settings, known=known)
        self.engines = configured_engines(svc.settings)
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
            oldest = dict(session.execute(
                select(Job.priority, func.min(Page.enqueued_at)).join(Job, Job.id == Page.job_id)
                .where(Page.status == "queued").group_by(Job.priority)).all())
        yield _by_label("ocrq_jobs", "Jobs by status.", "status", dict.fromkeys((*JOB_ACTIVE, *JOB_TERMINAL), 0) | jobs)
        yield _by_label("ocrq_pages", "Pages by status.", "status", dict.fromkeys(PAGE_STATUSES, 0) | pages)
        yield GaugeMetricFamily("ocrq_pages_per_second",
                                f"Pages finished per second by all workers over the last {RATE_WINDOW_S} s.",
                                value=recent / RATE_WINDOW_S)
        yield _by_label("ocrq_webhook_deliveries", "Webhook deliveries (one per event and URL) by status.",
                        "status", dict(deliveries))
        yield _by_label("ocrq_webhook_attempts", "Webhook delivery attempts by outcome.", "outcome", dict(attempts))
        yield _by_label("ocrq_oldest_queued_page_seconds", "How long the oldest queued page of each lane has waited "
                        "(0: none queued).", "lane",
                        {lane: max((now - since).total_seconds(), 0) if (since := oldest.get(lane)) else 0
                         for lane in LANES})

    def _queues(self):
        yield _by_label("ocrq_queue_depth", "Messages waiting in each ocrq.* broker queue.", "queue",
                        self.queues.read())

    def _engines(self):
        if not self.engines:
            return
        urls = list(dict.fromkeys(ref.url for ref in self.engines))
        with ThreadPoolExecutor(max_workers=len(urls), thread_name_prefix="engine-metrics") as pool:
            scraped = pool.map(lambda url: scrape_engine(self.http, url), urls)
            probes = probe_engines(self.http, self.engines)
            stats = dict(zip(urls, scraped, strict=True))
        labels = ["url", "lane"]
        families = {
            "up": GaugeMetricFamily("ocrq_engine_up", "Whether the engine answers /v1/models.", labels=labels),
            "kv": GaugeMetricFamily("ocrq_engine_kv_cache_usage_ratio", "KV cache in use, 0-1 (from vLLM).",
                                    labels=labels),
            "running": GaugeMetricFamily("ocrq_engine_requests_running", "Requests the engine is running.",
                                         labels=labels),
            "waiting": GaugeMetricFamily("ocrq_engine_requests_waiting", "Requests waiting in the engine.",
                                         labels=labels),
            "shared": GaugeMetricFamily(
                "ocrq_engine_shared_weight_bytes",
                "Weight bytes the engine maps from the holder (attached), or exports (holder); 0 when it owns them.",
                labels=[*labels, "role"]),
            "kv_bytes": GaugeMetricFamily("ocrq_engine_kv_cache_bytes", "Bytes of the engine's KV cache.",
                                          labels=labels),
        }
        for probe in probes:
            key, engine_stats = [probe.url, probe.lane], stats[probe.url]
            families["up"].add_metric(key, 1 if probe.up else 0)
            for name, value in (("kv", engine_stats.kv_cache_usage), ("running", engine_stats.running),
                                ("waiting", engine_stats.waiting)):
                if value is not None:
                    families[name].add_metric(key, value)
            weights = probe.weights or {}
            if weights.get("role"):
                families["shared"].add_metric([*key, str(weights["role"])], _number(weights.get("shared_bytes")))
            if weights.get("kv_cache_bytes") is not None:
                families["kv_bytes"].add_metric(key, _number(weights["kv_cache_bytes"]))
        yield from families.values()
        sharing = {probe.url for probe in probes if probe.shares_weights}
        yield GaugeMetricFamily("ocrq_engines_sharing_weights",
                                "Engines holding or attached to one shared copy of the weights.", value=len(sharing))

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


def _number(value) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


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
