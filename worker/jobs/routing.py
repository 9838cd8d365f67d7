"""Which queue a page goes to: the CPU lanes, or, for the vLLM engine, a size bucket of its lane."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from sqlalchemy import select

from common.jobs.models import Page
from common.queue import buckets
from common.queue import publish as dispatch
from worker.context import WorkerContext

Size = tuple[int | None, int | None]


def route_pages(ctx: WorkerContext, *, sizes: Mapping[str, Size], lane: str, countdown: float | None = None,
                ahead: bool = False) -> None:
    """Publish pages, given their expected rendered sizes, to their queues; GPU pages go by size bucket. `ahead`:
    before the pages already waiting (see dispatch.AHEAD_PRIORITY)."""
    if ctx.settings.engine != "vllm":
        dispatch.publish_pages(ctx.app, page_ids=list(sizes), lane=lane, countdown=countdown, ahead=ahead)
        return
    by_bucket: dict[str, list[str]] = defaultdict(list)
    for page_id, (width, height) in sizes.items():
        by_bucket[buckets.bucket_of(width or 1540, height or 1540)].append(page_id)
    for bucket, ids in by_bucket.items():
        dispatch.publish_pages(ctx.app, page_ids=ids, lane=lane, countdown=countdown, bucket=bucket, ahead=ahead)


def route_stored_pages(ctx: WorkerContext, *, page_ids: list[str], lane: str, countdown: float | None = None,
                       ahead: bool = False) -> None:
    """Publish pages known only by id (the sweepers'), with the sizes recorded when the job was split."""
    if ctx.settings.engine != "vllm":
        route_pages(ctx, sizes=dict.fromkeys(page_ids, (None, None)), lane=lane, countdown=countdown, ahead=ahead)
        return
    with ctx.db.session() as session:
        rows = session.execute(select(Page.id, Page.width, Page.height).where(Page.id.in_(page_ids))).all()
    route_pages(ctx, sizes={page_id: (width, height) for page_id, width, height in rows}, lane=lane,
                countdown=countdown, ahead=ahead)
