"""pages.claim_delivery: the broker message (task id) whose delivery claimed the page last, so a second copy of
the page's message reaching the same live worker does not claim it again while the first is being read.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("claim_delivery", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "claim_delivery")
