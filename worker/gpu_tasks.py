"""GPU page tasks: one celery-batches task per size bucket, so each batch holds pages of similar size."""

from __future__ import annotations

from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded
from celery_batches import Batches

from worker import buckets, pipeline
from worker.context import context_of


def register(app: Celery, *, pair_size: int, wait_s: float) -> None:
    """Register a batching task per bucket; each flush sends up to `pair_size` pages to the engine together."""
    for bucket in buckets.buckets():
        app.task(name=buckets.gpu_task(bucket), base=Batches, bind=True, flush_every=pair_size,
                 flush_interval=wait_s, acks_late=True)(_read_batch)


def _read_batch(self, requests) -> None:
    page_ids = list(dict.fromkeys(request.args[0] for request in requests))
    ctx = context_of(self.app)
    try:
        pipeline.process_pages(ctx, page_ids=page_ids)
    except SoftTimeLimitExceeded:
        pipeline.time_out_pages(ctx, page_ids=page_ids)
