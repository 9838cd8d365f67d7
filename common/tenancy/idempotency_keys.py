"""Idempotency keys: one row per (tenant, key), inserted before the work it guards."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from common.orm import Base, new_id, utcnow


class IdempotencyKey(Base):
    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("tenant_id", "key"), Index("ix_idempotency_keys_created", "created_at"))

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(255))
    fingerprint: Mapped[str] = mapped_column(String(64))
    # Who is running the request now; a request whose API died is taken over once locked_at is old.
    lock_token: Mapped[str] = mapped_column(String(32))
    locked_at: Mapped[datetime] = mapped_column(default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer)
    response: Mapped[dict | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
