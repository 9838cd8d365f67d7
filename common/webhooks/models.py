"""Webhook signing secrets, deliveries (one per event, one webhook-id for all its tries) and attempts."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from common.orm import Base, new_id, utcnow


class WebhookSecret(Base):
    """A tenant's signing secrets: `previous` keeps signing until `previous_until`, so rotation drops nothing."""

    __tablename__ = "webhook_secrets"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    current: Mapped[str] = mapped_column(Text)
    previous: Mapped[str | None] = mapped_column(Text)
    previous_until: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    rotated_at: Mapped[datetime | None]


class WebhookDelivery(Base):
    """One event for one URL. `tries` counts this round (a redelivery starts a new one); `attempts` counts all."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_status_due", "status", "next_attempt_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(32))
    # Makes recording an event idempotent, e.g. "job.succeeded:<job id>".
    event_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    batch_id: Mapped[str | None] = mapped_column(String(32), index=True)
    url: Mapped[str] = mapped_column(Text)
    # The exact bytes signed and sent on every try.
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    tries: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    published_at: Mapped[datetime | None]
    lease_token: Mapped[str | None] = mapped_column(String(32))
    lease_until: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]

    @property
    def webhook_id(self) -> str:
        return f"msg_{self.id}"


class WebhookAttempt(Base):
    """One try: written as 'sending' before the request, then given its answer."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (UniqueConstraint("delivery_id", "number"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    delivery_id: Mapped[str] = mapped_column(ForeignKey("webhook_deliveries.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16), default="sending")
    status_code: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)


class DisabledEndpoint(Base):
    """A tenant's URL that answered 410 Gone: nothing more is sent there until a redelivery re-enables it."""

    __tablename__ = "webhook_disabled_endpoints"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # SHA-256 of the URL: URLs are too long for a portable primary key.
    url_digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    disabled_at: Mapped[datetime] = mapped_column(default=utcnow)
