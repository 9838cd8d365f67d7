"""Publishing work: tasks are sent by name and carry ids only, never bytes."""

from __future__ import annotations

from celery import Celery

from worker.celeryconfig import CONTROL_QUEUE, page_queue

PREPARE_JOB = "ocrq.prepare_job"
OCR_PAGE = "ocrq.ocr_page"


def publish_prepare(app: Celery, *, job_id: str) -> None:
    app.send_task(PREPARE_JOB, args=[job_id], queue=CONTROL_QUEUE)


def publish_pages(app: Celery, *, page_ids: list[str], lane: str, countdown: float | None = None) -> None:
    """Send one task per page; with the connection held open, thousands go out quickly."""
    with app.producer_or_acquire() as producer:
        for page_id in page_ids:
            app.send_task(OCR_PAGE, args=[page_id], queue=page_queue(lane), producer=producer, countdown=countdown)
