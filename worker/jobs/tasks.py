"""Job tasks: thin wrappers that take ids and call the pipeline, the stale-page sweeper and retention."""

from __future__ import annotations

from celery import Celery, shared_task
from celery.exceptions import SoftTimeLimitExceeded

from common.queue import buckets, names
from worker.context import context_of
from worker.jobs import pipeline, retention, stale
from worker.queue.batches import PageBatches
from worker.queue.tasks import RETRY_OUTAGES


@shared_task(name=names.PREPARE_JOB, bind=True, **RETRY_OUTAGES)
def prepare_job(self, job_id: str) -> None:
    pipeline.prepare_job(context_of(self.app), job_id=job_id)


@shared_task(name=names.OCR_PAGE, bind=True, **RETRY_OUTAGES)
def ocr_page(self, page_id: str) -> None:
    ctx = context_of(self.app)
    try:
        pipeline.process_page(ctx, page_id=page_id, delivery=self.request.id)
    except SoftTimeLimitExceeded:
        pipeline.time_out_pages(ctx, page_ids=[page_id])


def register_gpu_tasks(app: Celery, *, pair_size: int, wait_s: float) -> None:
    """One celery-batches task per size bucket, so each batch holds pages of similar size; each flush sends up to
    `pair_size` pages to the engine together."""
    for bucket in buckets.buckets():
        app.task(name=names.gpu_task(bucket), base=PageBatches, bind=True, flush_every=pair_size,
                 flush_interval=wait_s, acks_late=True)(_read_batch)


def _read_batch(self, requests) -> None:
    deliveries = {request.args[0]: request.id for request in requests}
    page_ids = list(deliveries)
    ctx = context_of(self.app)
    try:
        pipeline.process_pages(ctx, page_ids=page_ids, deliveries=deliveries)
    except SoftTimeLimitExceeded:
        pipeline.time_out_pages(ctx, page_ids=page_ids)


@shared_task(name=names.REQUEUE_STALE, bind=True)
def requeue_stale(self) -> dict[str, int]:
    return stale.requeue_stale(context_of(self.app))


@shared_task(name=names.PURGE_EXPIRED, bind=True)
def purge_expired(self) -> dict[str, int]:
    return retention.purge_expired(context_of(self.app))
