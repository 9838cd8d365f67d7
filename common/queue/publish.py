"""Publishing work: tasks are sent by name and carry ids only, never bytes."""

from __future__ import annotations

from celery import Celery

from common.queue.names import (
    CONTROL_QUEUE,
    DELIVER_WEBHOOK,
    FINISH_BATCH,
    ITEM_ENDED,
    LIST_BATCH,
    LISTING_QUEUE,
    OCR_PAGE,
    PREPARE_JOB,
    WEBHOOK_QUEUE,
    gpu_queue,
    gpu_task,
    page_queue,
    prepare_queue,
)


def publish_prepare(app: Celery, *, job_id: str, lane: str, countdown: float | None = None) -> None:
    app.send_task(PREPARE_JOB, args=[job_id], queue=prepare_queue(lane), countdown=countdown)


# kombu's Redis transport keeps a list per priority step and reads the lowest number first (0 before 3). Pages go
# out at PAGE_PRIORITY; a page sent again because its worker died or its message was lost goes out AHEAD, so it is
# read next instead of behind the backlog it had already waited through (kombu restores an unacked message to the
# head of its queue too). The filesystem broker has no priorities.
PAGE_PRIORITY = 3
AHEAD_PRIORITY = 0


def publish_pages(app: Celery, *, page_ids: list[str], lane: str, countdown: float | None = None,
                  bucket: str | None = None, ahead: bool = False) -> None:
    """Send one task per page, to the CPU lane or to a GPU size bucket; one connection for all of them."""
    task, queue = (gpu_task(bucket), gpu_queue(lane, bucket)) if bucket else (OCR_PAGE, page_queue(lane))
    priority = AHEAD_PRIORITY if ahead else PAGE_PRIORITY
    with app.producer_or_acquire() as producer:
        for page_id in page_ids:
            app.send_task(task, args=[page_id], queue=queue, producer=producer, countdown=countdown,
                          priority=priority)


def publish_prepares(app: Celery, *, job_ids: list[str], lane: str = "bulk") -> None:
    """Send one prepare task per job over one connection: a page of a batch's listing at a time."""
    with app.producer_or_acquire() as producer:
        for job_id in job_ids:
            app.send_task(PREPARE_JOB, args=[job_id], queue=prepare_queue(lane), producer=producer)


def publish_list_batch(app: Celery, *, batch_id: str) -> None:
    app.send_task(LIST_BATCH, args=[batch_id], queue=LISTING_QUEUE)


def publish_item_ended(app: Celery, *, job_id: str) -> None:
    app.send_task(ITEM_ENDED, args=[job_id], queue=CONTROL_QUEUE)


def publish_finish_batch(app: Celery, *, batch_id: str) -> None:
    app.send_task(FINISH_BATCH, args=[batch_id], queue=CONTROL_QUEUE)


def publish_deliveries(app: Celery, *, delivery_ids: list[str], countdown: float | None = None) -> None:
    """Send one webhook delivery task per id over one connection."""
    with app.producer_or_acquire() as producer:
        for delivery_id in delivery_ids:
            app.send_task(DELIVER_WEBHOOK, args=[delivery_id], queue=WEBHOOK_QUEUE, producer=producer,
                          countdown=countdown or None)
