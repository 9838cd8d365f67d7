"""pages.confidence: the page's confidence (0-1) from the engine, for low_confidence_pages; batches.output_formats:
the formats written beside a batch's output.

Revision ID: 0013
Revises: 0012_lists_events_erase
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012_lists_events_erase"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pages", sa.Column("confidence", sa.Float(), nullable=True))
    op.add_column("batches", sa.Column("output_formats", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("batches", "output_formats")
    op.drop_column("pages", "confidence")
