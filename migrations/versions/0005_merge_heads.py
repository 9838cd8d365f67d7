"""One line of history again after webhooks, tenancy and batches were added side by side.

Revision ID: 0005
Revises: 0002, 0003, 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

revision = "0005"
down_revision = ("0002", "0003", "0004")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
