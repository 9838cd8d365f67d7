"""Republishing webhook deliveries that are due but have no live message.

Three ways a due delivery can be left without one: its retry wait was too long for a countdown
message, its message was lost (broker restart, failed publish), or the worker sending it died
(its lease expired). Claims are compare-and-set, so a spare message costs one no-op task.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import and_, or_, select, update

from common.orm import utcnow
from common.queue.publish import publish_deliveries
from common.webhooks.models import WebhookDelivery
from worker.context import WorkerContext

log = logging.getLogger("ocrq.sweeper")
BATCH = 1000


def republish_due(ctx: WorkerContext) -> int:
    """Publish due deliveries whose lease expired, or whose last message is missing or stale; returns how many."""
    now = utcnow()
    stale = now - timedelta(seconds=ctx.settings.stale_requeue_after_s)
    d = WebhookDelivery
    lease_free = or_(d.lease_until.is_(None), d.lease_until < now)
    with ctx.db.session() as session:
        ids = list(session.scalars(
            select(d.id)
            .where(d.status == "pending", d.next_attempt_at <= now,
                   or_(d.lease_until < now,
                       and_(d.lease_until.is_(None), or_(d.published_at.is_(None), d.published_at < stale))))
            .order_by(d.next_attempt_at)
            .limit(BATCH)
        ))
        if not ids:
            return 0
        # Marked as published, so the next sweep leaves them alone for stale_requeue_after_s.
        session.execute(update(d).where(d.id.in_(ids), d.status == "pending", lease_free).values(
            published_at=now, lease_token=None, lease_until=None))
    publish_deliveries(ctx.app, delivery_ids=ids)
    log.warning("republished webhook deliveries", extra={"deliveries": len(ids)})
    return len(ids)
