"""Every queue and task name of ocrq, each spelled once: the contract between the API and the workers."""

from __future__ import annotations

from typing import Literal, get_args

from common.queue.buckets import buckets

Priority = Literal["interactive", "bulk"]
# The priority lanes, interactive first: workers of both lanes consume their queues in this order.
LANES: tuple[Priority, ...] = get_args(Priority)

CONTROL_QUEUE = "ocrq.control"
WEBHOOK_QUEUE = "ocrq.webhooks"
LISTING_QUEUE = "ocrq.listing"
PREPARE_BULK_QUEUE = "ocrq.prepare.bulk"

PREPARE_JOB = "ocrq.prepare_job"
OCR_PAGE = "ocrq.ocr_page"
GPU_TASK_PREFIX = "ocrq.gpu_pages."
LIST_BATCH = "ocrq.list_batch"
FINISH_BATCH = "ocrq.finish_batch"
ITEM_ENDED = "ocrq.item_ended"
DELIVER_WEBHOOK = "ocrq.deliver_webhook"
# Periodic: the sweepers and retention, sent by the one elected scheduler.
REQUEUE_STALE = "ocrq.requeue_stale"
SWEEP_BATCHES = "ocrq.sweep_batches"
SWEEP_WEBHOOKS = "ocrq.sweep_webhooks"
PURGE_EXPIRED = "ocrq.purge_expired"


def page_queue(lane: str) -> str:
    return f"ocrq.pages.{lane}"


def prepare_queue(lane: str) -> str:
    return PREPARE_BULK_QUEUE if lane == "bulk" else CONTROL_QUEUE


def gpu_queue(lane: str, bucket: str) -> str:
    return f"ocrq.gpu.{lane}.{bucket}"


def gpu_task(bucket: str) -> str:
    return f"{GPU_TASK_PREFIX}{bucket}"


def is_page_task(name: str) -> bool:
    """Whether a task of this name reads pages (the CPU task or a GPU bucket's batching task)."""
    return name == OCR_PAGE or name.startswith(GPU_TASK_PREFIX)


def cpu_worker_queues() -> list[str]:
    """Queues a CPU worker consumes, most urgent first."""
    # Listing first: each batch listing task is one short page that chains the next, and behind the
    # thousands of prepare tasks the previous page published it would wait minutes.
    # Bulk jobs are split after interactive pages are read, so a big batch never delays an interactive page.
    return [LISTING_QUEUE, CONTROL_QUEUE, page_queue("interactive"), PREPARE_BULK_QUEUE, page_queue("bulk")]


def gpu_worker_queues(*lanes: str) -> list[str]:
    """The GPU queues of these lanes (default both), interactive before bulk."""
    return [gpu_queue(lane, bucket) for lane in (lanes or LANES) for bucket in buckets()]


def gpu_worker_default_queues(lane: str = "all") -> list[str]:
    """Queues a GPU worker consumes: interactive buckets before bulk ones, and the splitting of jobs.

    A worker of one lane takes only that lane's buckets and the splitting of that lane's jobs (interactive
    jobs are split on the control queue), so an interactive page never waits behind a bulk batch.
    """
    interactive = [CONTROL_QUEUE, *gpu_worker_queues("interactive")]
    bulk = [PREPARE_BULK_QUEUE, *gpu_worker_queues("bulk")]
    return {"interactive": interactive, "bulk": bulk}.get(lane, interactive + bulk)
