"""leases (worker heartbeats with the pages they hold, the scheduler's lease) and pages.claimed_by.

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=200), primary_key=True),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("pages", sa.JSON(), nullable=True),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.add_column("pages", sa.Column("claimed_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "claimed_by")
    op.drop_table("leases")
