"""Batches ingest every object under an S3 prefix; each listed object is one batch item."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from common.orm import Base, new_id, utcnow

# SQLite only auto-increments a column typed exactly INTEGER.
ItemId = BigInteger().with_variant(Integer(), "sqlite")


class Batch(Base):
    __tablename__ = "batches"
    __table_args__ = (
        Index("ix_batches_tenant_created", "tenant_id", "created_at", "id"),
        Index("ix_batches_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(String(64))
    # listing -> running -> completed | failed; canceled at any point before the end.
    status: Mapped[str] = mapped_column(String(16), default="listing")
    input_bucket: Mapped[str] = mapped_column(String(255))
    input_prefix: Mapped[str] = mapped_column(Text)
    output_bucket: Mapped[str] = mapped_column(String(255))
    output_prefix: Mapped[str] = mapped_column(Text)
    include: Mapped[list | None] = mapped_column(JSON)
    exclude: Mapped[list | None] = mapped_column(JSON)
    output: Mapped[str] = mapped_column(String(16), default="markdown")
    # More formats written beside `output` for each object (docs/api/formats.md).
    output_formats: Mapped[list | None] = mapped_column(JSON)
    priority: Mapped[str] = mapped_column(String(16), default="bulk")
    webhook_url: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[dict | None] = mapped_column("metadata", default=None)
    source_profile: Mapped[str | None] = mapped_column(String(64))
    retry_failed: Mapped[bool] = mapped_column(Boolean, default=False)
    # Hash of what shapes a result (format, output place, engine); with key and ETag it names a result.
    options_digest: Mapped[str] = mapped_column(String(64))
    # The listing's position: the token of the next page, and how many pages are recorded.
    list_token: Mapped[str | None] = mapped_column(Text)
    list_pages: Mapped[int] = mapped_column(Integer, default=0)
    listing_done: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    manifest_key: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    listed_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    progress_sent_at: Mapped[datetime | None]
    erased_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class BatchItem(Base):
    __tablename__ = "batch_items"
    # Unique per batch and key, so a page recorded twice (a crash, a redelivery) cannot add an object twice.
    __table_args__ = (
        UniqueConstraint("batch_id", "key"),
        Index("ix_batch_items_batch_status", "batch_id", "status"),
        Index("ix_batch_items_fingerprint", "fingerprint"),
    )

    id: Mapped[int] = mapped_column(ItemId, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(Text)
    etag: Mapped[str | None] = mapped_column(String(128))
    size: Mapped[int | None] = mapped_column(BigInteger)
    # queued (its job is queued or running) | succeeded | failed | canceled | skipped | skipped_existing
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    job_id: Mapped[str | None] = mapped_column(String(32), index=True)
    result_key: Mapped[str | None] = mapped_column(Text)
    pages: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None]
