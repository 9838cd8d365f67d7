"""pages.text_layer: line boxes for a searchable PDF when the engine gives text without positions (vLLM).

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("text_layer", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "text_layer")
