"""Job and batch lists, live events and erasure: keyset indexes for the tenant's lists, each job's event counter
(pages take their number from it as they end), and the time a job or batch was erased.

Revision ID: 0012_lists_events_erase
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_lists_events_erase"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("event_seq", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("jobs", sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("jobs", sa.Column("erase_pending", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("pages", sa.Column("event_seq", sa.Integer(), nullable=True))
    op.add_column("batches", sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
    # Newest first by (created_at, id): the list's order and its cursor, with or without a status filter.
    op.drop_index("ix_jobs_tenant_created", table_name="jobs")
    op.create_index("ix_jobs_tenant_created", "jobs", ["tenant_id", "created_at", "id"])
    op.create_index("ix_jobs_tenant_status_created", "jobs", ["tenant_id", "status", "created_at", "id"])
    op.drop_index("ix_batches_tenant_created", table_name="batches")
    op.create_index("ix_batches_tenant_created", "batches", ["tenant_id", "created_at", "id"])
    # Erasures that met a storage outage, found by the retention sweep.
    op.create_index("ix_jobs_erased_at", "jobs", ["erased_at"])


def downgrade() -> None:
    op.drop_index("ix_jobs_erased_at", table_name="jobs")
    op.drop_index("ix_batches_tenant_created", table_name="batches")
    op.create_index("ix_batches_tenant_created", "batches", ["tenant_id", "created_at"])
    op.drop_index("ix_jobs_tenant_status_created", table_name="jobs")
    op.drop_index("ix_jobs_tenant_created", table_name="jobs")
    op.create_index("ix_jobs_tenant_created", "jobs", ["tenant_id", "created_at"])
    op.drop_column("batches", "erased_at")
    op.drop_column("pages", "event_seq")
    op.drop_column("jobs", "erase_pending")
    op.drop_column("jobs", "erased_at")
    op.drop_column("jobs", "event_seq")
