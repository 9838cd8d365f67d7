"""idempotency keys, and retention marks on jobs

Revision ID: 0003
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0003'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('idempotency_keys',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('lock_token', sa.String(length=32), nullable=False),
    sa.Column('locked_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('response', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_idempotency_keys')),
    sa.UniqueConstraint('tenant_id', 'key', name=op.f('uq_idempotency_keys_tenant_id'))
    )
    op.create_index('ix_idempotency_keys_created', 'idempotency_keys', ['created_at'], unique=False)
    op.add_column('jobs', sa.Column('source_expired_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('jobs', sa.Column('expired_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('expired_at')
        batch.drop_column('source_expired_at')
    op.drop_index('ix_idempotency_keys_created', table_name='idempotency_keys')
    op.drop_table('idempotency_keys')
