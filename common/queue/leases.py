"""Leases in the database: each worker's heartbeat with the pages it holds, and the one scheduler."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, String
from sqlalchemy.orm import Mapped, mapped_column

from common.orm import Base


class Lease(Base):
    __tablename__ = "leases"

    # "worker:<instance id>" for a worker's heartbeat, "scheduler" for the sweepers' schedule.
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    # A worker's heartbeat: the page ids it has received (running or prefetched) at beat_at.
    pages: Mapped[list | None] = mapped_column(JSON)
    beat_at: Mapped[datetime]
    expires_at: Mapped[datetime]
