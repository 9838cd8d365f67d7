"""Indexes on jobs.finished_at and pages.finished_at, for the retention sweep and /metrics' pages/s.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_finished_at", "jobs", ["finished_at"])
    op.create_index("ix_pages_finished_at", "pages", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_pages_finished_at", table_name="pages")
    op.drop_index("ix_jobs_finished_at", table_name="jobs")
