"""Per-tenant webhook signing secrets: created on first use, rotated with an overlap."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.orm import utcnow
from common.sql import insert_ignoring_conflicts
from common.webhooks.models import WebhookSecret
from common.webhooks.signing import new_secret


def get_or_create(session: Session, *, tenant_id: str) -> WebhookSecret:
    """The tenant's secrets, creating the first one if there is none yet."""
    query = select(WebhookSecret).where(WebhookSecret.tenant_id == tenant_id).execution_options(
        populate_existing=True)
    row = session.scalars(query).one_or_none()
    if row is None:
        # Two first uses at once both insert; the loser's row is ignored and both read the winner's.
        insert_ignoring_conflicts(
            session, WebhookSecret, [{"tenant_id": tenant_id, "current": new_secret(), "created_at": utcnow()}],
            keys=["tenant_id"],
        )
        row = session.scalars(query).one()
    return row


def rotate(session: Session, *, tenant_id: str, overlap_s: int) -> WebhookSecret:
    """Make a new current secret; the old one keeps signing beside it for overlap_s seconds."""
    get_or_create(session, tenant_id=tenant_id)
    now = utcnow()
    session.execute(
        update(WebhookSecret)
        .where(WebhookSecret.tenant_id == tenant_id)
        .values(previous=WebhookSecret.current, current=new_secret(),
                previous_until=now + timedelta(seconds=overlap_s), rotated_at=now)
    )
    return get_or_create(session, tenant_id=tenant_id)


def live(secret: WebhookSecret, *, now: datetime) -> list[str]:
    """The secrets to sign with now: the current one, and the previous one while its overlap lasts."""
    if secret.previous and secret.previous_until and secret.previous_until > now:
        return [secret.current, secret.previous]
    return [secret.current]
