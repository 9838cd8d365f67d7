"""pages.engine_url: which engine server read the page, so a lane's pages can be traced to its engines.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("engine_url", sa.String(length=512), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "engine_url")
