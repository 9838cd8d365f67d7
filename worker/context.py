"""What a worker process holds: database, storage, source cache and the engine, built once per process."""

from __future__ import annotations

import os
from functools import cached_property

from botocore.client import BaseClient
from celery import Celery

from common.batches.models import Batch
from common.db import Database
from common.documents import Limits
from common.jobs.models import Job
from common.settings import Settings
from common.storage import make_storage
from common.tenancy.s3_grants import Mode, S3Clients, S3Location
from worker.engines.base import Engine
from worker.jobs.sources import SourceCache
from worker.metrics import WorkerMetrics


class WorkerContext:
    def __init__(self, *, app: Celery, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.pid = os.getpid()
        # This worker's heartbeat lease, recorded on the pages it claims; None outside `ocrq worker`.
        self.worker: str | None = getattr(app, "ocrq_worker", None)
        self.db = Database(settings.resolved_database_url)
        self.storage = make_storage(settings)
        self.limits = Limits.from_settings(settings)

    @cached_property
    def s3_clients(self) -> S3Clients:
        return S3Clients(self.settings)

    @cached_property
    def sources(self) -> SourceCache:
        return SourceCache(root=self.settings.home / "cache" / f"w{self.pid}", storage=self.storage,
                           s3_for=self.s3_for_job)

    def s3_for_job(self, job: Job) -> BaseClient:
        """The client of the grant that lets the job's tenant read its s3_uri, checked again at read time."""
        access = [("read", S3Location.parse(job.source_uri))]
        return self.s3_clients.granted(tenant_id=job.tenant_id, access=access, profile=job.source_profile)

    def s3_for_batch(self, batch: Batch, mode: Mode) -> BaseClient:
        """The client of the batch's grant for listing (read) or results (write); a revoked grant raises NotGranted."""
        location = (S3Location(batch.input_bucket, batch.input_prefix) if mode == "read"
                    else S3Location(batch.output_bucket, batch.output_prefix))
        return self.s3_clients.granted(tenant_id=batch.tenant_id, access=[(mode, location)],
                                       profile=batch.source_profile)

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
        from worker.engines.line_boxes import LineDetector

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
