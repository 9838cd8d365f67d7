"""jobs.ocr (auto, always, never: whether a PDF page may be read from its own text) and pages.source (text_layer
or ocr: where the page's text came from).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("ocr", sa.String(8), nullable=False, server_default="auto"))
    op.add_column("pages", sa.Column("source", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("pages", "source")
    op.drop_column("jobs", "ocr")
