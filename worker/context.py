"""What a worker process holds: database, storage, source cache and the engine, built once per process."""

from __future__ import annotations

import os
from functools import cached_property

from celery import Celery

from common.db import Database
from common.documents import Limits
from common.s3_profiles import profile_client
from common.settings import Settings
from common.storage import make_storage, s3_client
from worker.engines.base import Engine
from worker.metrics import WorkerMetrics
from worker.sources import SourceCache


class WorkerContext:
    def __init__(self, *, app: Celery, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.pid = os.getpid()
        self.db = Database(settings.resolved_database_url)
        self.storage = make_storage(settings)
        self.limits = Limits.from_settings(settings)

    @cached_property
    def s3(self):
        return s3_client(self.settings)

    @cached_property
    def sources(self) -> SourceCache:
        return SourceCache(root=self.settings.home / "cache" / f"w{self.pid}", storage=self.storage, s3=self.s3,
                           clients=self.s3_for)

    def s3_for(self, profile: str | None):
        """The S3 client of a named source profile (built once per process), or the service's own for None."""
        if profile is None:
            return self.s3
        if profile not in self.profile_clients:
            self.profile_clients[profile] = profile_client(self.settings, profile)
        return self.profile_clients[profile]

    @cached_property
    def profile_clients(self) -> dict:
        return {}

    @cached_property
    def metrics(self) -> WorkerMetrics:
        return WorkerMetrics()

    @cached_property
    def engine(self) -> Engine:
        from worker.engines.factory import make_engine

        return make_engine(self.settings)

    @cached_property
    def line_detector(self):
        """rapidocr's detector alone, for PDF results from engines that give no positions; loaded on first use."""
        from worker.line_boxes import LineDetector

        return LineDetector(threads=self.settings.cpu_threads)

    def close(self) -> None:
        if "engine" in self.__dict__:
            self.engine.close()
        self.db.dispose()


def context_of(app: Celery) -> WorkerContext:
    """This process's context, built on first use (after a fork, never shared with the parent)."""
    ctx: WorkerContext | None = getattr(app, "ocrq_context", None)
    if ctx is None or ctx.pid != os.getpid():
        ctx = WorkerContext(app=app, settings=app.ocrq_settings)
        app.ocrq_context = ctx
    return ctx
