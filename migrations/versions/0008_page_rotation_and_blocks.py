"""pages.rotation and pages.blocks: how the CPU engine turned a page to read it, and its blocks with boxes.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("rotation", sa.Integer(), nullable=True))
    op.add_column("pages", sa.Column("blocks", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "blocks")
    op.drop_column("pages", "rotation")
