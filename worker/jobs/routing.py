"""Which queue a page goes to: the CPU lanes, or, for the vLLM engine, a size bucket of its lane."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select

from common.jobs.models import Page
from common.queue import buckets
from common.queue import publish as dispatch
from worker.context import WorkerContext


def publish_pages(ctx: WorkerContext, *, page_ids: list[str], lane: str, countdown: float | None = None) -> None:
    """Publish pages to their queues; GPU pages are grouped by the size recorded when the job was split."""
    if ctx.settings.engine != "vllm":
        dispatch.publish_pages(ctx.app, page_ids=page_ids, lane=lane, countdown=countdown)
        return
    with ctx.db.session() as session:
        sizes = session.execute(select(Page.id, Page.width, Page.height).where(Page.id.in_(page_ids))).all()
    by_bucket: dict[str, list[str]] = defaultdict(list)
    for page_id, width, height in sizes:
        by_bucket[buckets.bucket_of(width or 1540, height or 1540)].append(page_id)
    for bucket, ids in by_bucket.items():
        dispatch.publish_pages(ctx.app, page_ids=ids, lane=lane, countdown=countdown, bucket=bucket)
