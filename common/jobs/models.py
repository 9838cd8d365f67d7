"""Jobs and their pages: each page is a unit of work with its own state."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column, relationship

from common.orm import Base, new_id, utcnow


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_tenant_created", "tenant_id", "created_at", "id"),
                      Index("ix_jobs_status", "status"),
                      Index("ix_jobs_tenant_status_created", "tenant_id", "status", "created_at", "id"),
                      Index("ix_jobs_finished_at", "finished_at"), Index("ix_jobs_erased_at", "erased_at"))

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    source_kind: Mapped[str] = mapped_column(String(8))
    source_uri: Mapped[str] = mapped_column(Text)
    source_key: Mapped[str | None] = mapped_column(Text)
    filename: Mapped[str | None] = mapped_column(String(512))
    doc_kind: Mapped[str | None] = mapped_column(String(16))
    size_bytes: Mapped[int | None] = mapped_column(Integer)
    pages_spec: Mapped[str | None] = mapped_column(String(256))
    pages_total: Mapped[int] = mapped_column(Integer, default=0)
    pages_done: Mapped[int] = mapped_column(Integer, default=0)
    pages_failed: Mapped[int] = mapped_column(Integer, default=0)
    output: Mapped[str] = mapped_column(String(16), default="markdown")
    ocr: Mapped[str] = mapped_column(String(8), default="auto", server_default="auto")
    priority: Mapped[str] = mapped_column(String(16), default="bulk")
    webhook_url: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[dict | None] = mapped_column("metadata", default=None)
    error: Mapped[str | None] = mapped_column(Text)
    result_key: Mapped[str | None] = mapped_column(Text)
    # Retention: when the stored upload was deleted, and when the result (objects and page text) was.
    source_expired_at: Mapped[datetime | None]
    expired_at: Mapped[datetime | None]
    batch_id: Mapped[str | None] = mapped_column(String(32), index=True)
    # The named S3 source profile (settings) whose credentials read an s3 source; None: the service's own.
    source_profile: Mapped[str | None] = mapped_column(String(64))
    # Live events (common.events): the last number given to a page event of this job.
    event_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # When the tenant asked for the job to be erased; the row stays as a tombstone (common.jobs.erase).
    erased_at: Mapped[datetime | None]
    erase_pending: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    enqueued_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    pages: Mapped[list[Page]] = relationship(back_populates="job", order_by="Page.index", lazy="raise")


class Page(Base):
    __tablename__ = "pages"
    __table_args__ = (UniqueConstraint("job_id", "index"), Index("ix_pages_status_enqueued", "status", "enqueued_at"),
                      Index("ix_pages_finished_at", "finished_at"))

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    text: Mapped[str | None] = mapped_column(Text)
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    engine: Mapped[str | None] = mapped_column(String(32))
    # Where the page's text came from: "text_layer" (the PDF's own text), "ocr", or "mixed" (its own text and
    # its pictures' text read by OCR).
    source: Mapped[str | None] = mapped_column(String(16))
    # The engine server that read the page (vLLM engines only).
    engine_url: Mapped[str | None] = mapped_column(String(512))
    model: Mapped[str | None] = mapped_column(String(256))
    seconds: Mapped[float | None]
    # Degrees the engine turned the page counter-clockwise to read it, and its blocks in reading order with
    # boxes in that upright image (worker.engines.base.PageText); None from an engine without boxes (vLLM).
    rotation: Mapped[int | None] = mapped_column(Integer)
    blocks: Mapped[list | None] = mapped_column(JSON)
    # The page's confidence (0-1): from the tokens' log-probabilities (vLLM) or the lines' scores (CPU).
    confidence: Mapped[float | None]
    error: Mapped[str | None] = mapped_column(Text)
    # Lines placed for the searchable PDF when the engine read text without positions (vLLM, output=pdf):
    # {"rotation": 0, "lines": [{"text", "box"}]}, boxes in the rendered image's pixels.
    text_layer: Mapped[dict | None]
    enqueued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # The number of its page.done or page.failed event in the job's stream (common.events).
    event_seq: Mapped[int | None] = mapped_column(Integer)
    # The lease ("worker:<id>") of the worker that claimed the page last; its heartbeat says whether it lives.
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    # The message (task id) whose delivery claimed it: a broker redelivers the same message after a pool child
    # dies, while a copy published by a sweeper has an id of its own.
    claim_delivery: Mapped[str | None] = mapped_column(String(200))

    job: Mapped[Job] = relationship(back_populates="pages")


def page_rows(job_id: str, indices: list[int], sizes: tuple[tuple[int, int], ...]) -> list[dict]:
    """The page rows of a job split into these pages, with ids made from the job's, so splitting twice adds none;
    each with its expected rendered size, by which GPU pages are routed (rendering overwrites it)."""
    now = utcnow()  # the stale-work sweeper's clock starts here, should the split's publish never happen
    return [{"id": f"{job_id[:16]}{i:016x}", "job_id": job_id, "index": i, "width": sizes[i][0],
             "height": sizes[i][1], "enqueued_at": now} for i in indices]
