"""Celery tasks: thin wrappers that take ids and call the pipeline."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from common.outages import TASK_RETRY_TYPES
from common.services.webhooks import DELIVER_TASK
from worker import (
    batch_listing,
    batch_results,
    batch_sweep,
    dispatch,
    liveness,
    pipeline,
    retention,
    sweeper,
    webhook_delivery,
    webhook_sweeper,
)
from worker.context import context_of

# While the database or storage is unreachable a task tries again later instead of failing: every task is
# idempotent, and the sweepers would find its work anyway, only later. Periodic sweeps just wait for the next run.
RETRY_OUTAGES = {"autoretry_for": TASK_RETRY_TYPES, "retry_backoff": 2, "retry_backoff_max": 30,
                 "retry_jitter": True, "max_retries": 40}


@shared_task(name=dispatch.PREPARE_JOB, bind=True, **RETRY_OUTAGES)
def prepare_job(self, job_id: str) -> None:
    pipeline.prepare_job(context_of(self.app), job_id=job_id)


@shared_task(name=dispatch.OCR_PAGE, bind=True, **RETRY_OUTAGES)
def ocr_page(self, page_id: str) -> None:
    ctx = context_of(self.app)
    try:
        pipeline.process_page(ctx, page_id=page_id)
    except SoftTimeLimitExceeded:
        pipeline.time_out_pages(ctx, page_ids=[page_id])


@shared_task(name="ocrq.requeue_stale", bind=True)
def requeue_stale(self) -> dict[str, int]:
    return sweeper.requeue_stale(context_of(self.app))


@shared_task(name=liveness.RECOVER_LAPSED, bind=True)
def recover_lapsed(self) -> int:
    return liveness.recover_lapsed(context_of(self.app))


@shared_task(name=retention.PURGE_EXPIRED, bind=True)
def purge_expired(self) -> dict[str, int]:
    return retention.purge_expired(context_of(self.app))


@shared_task(name=DELIVER_TASK, bind=True, **RETRY_OUTAGES)
def deliver_webhook(self, delivery_id: str) -> str | None:
    return webhook_delivery.deliver(context_of(self.app), delivery_id=delivery_id)


@shared_task(name="ocrq.sweep_webhooks", bind=True)
def sweep_webhooks(self) -> int:
    return webhook_sweeper.republish_due(context_of(self.app))


@shared_task(name=dispatch.LIST_BATCH, bind=True, **RETRY_OUTAGES)
def list_batch(self, batch_id: str) -> None:
    batch_listing.list_next_page(context_of(self.app), batch_id=batch_id)


@shared_task(name=dispatch.FINISH_BATCH, bind=True, **RETRY_OUTAGES)
def finish_batch(self, batch_id: str) -> None:
    batch_results.finish_if_done(context_of(self.app), batch_id=batch_id)


@shared_task(name="ocrq.sweep_batches", bind=True)
def sweep_batches(self) -> dict[str, int]:
    return batch_sweep.sweep(context_of(self.app))
