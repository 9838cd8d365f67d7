"""One line of history again after leases (recovery) and page layout and text layers were added side by side.

Revision ID: 0011
Revises: 0009, 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

revision = "0011"
down_revision = ("0009", "0010")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
