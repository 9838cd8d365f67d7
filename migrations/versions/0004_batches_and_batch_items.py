"""batches, batch items, and the source profile of s3 jobs

Revision ID: 0004
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0004'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('batches',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('input_bucket', sa.String(length=255), nullable=False),
    sa.Column('input_prefix', sa.Text(), nullable=False),
    sa.Column('output_bucket', sa.String(length=255), nullable=False),
    sa.Column('output_prefix', sa.Text(), nullable=False),
    sa.Column('include', sa.JSON(), nullable=True),
    sa.Column('exclude', sa.JSON(), nullable=True),
    sa.Column('output', sa.String(length=16), nullable=False),
    sa.Column('priority', sa.String(length=16), nullable=False),
    sa.Column('webhook_url', sa.Text(), nullable=True),
    sa.Column('metadata', sa.JSON(), nullable=True),
    sa.Column('source_profile', sa.String(length=64), nullable=True),
    sa.Column('retry_failed', sa.Boolean(), nullable=False),
    sa.Column('options_digest', sa.String(length=64), nullable=False),
    sa.Column('list_token', sa.Text(), nullable=True),
    sa.Column('list_pages', sa.Integer(), nullable=False),
    sa.Column('listing_done', sa.Boolean(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('manifest_key', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('listed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('progress_sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_batches'))
    )
    op.create_index('ix_batches_status', 'batches', ['status'], unique=False)
    op.create_index('ix_batches_tenant_created', 'batches', ['tenant_id', 'created_at'], unique=False)
    op.create_table('batch_items',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('batch_id', sa.String(length=32), nullable=False),
    sa.Column('key', sa.Text(), nullable=False),
    sa.Column('etag', sa.String(length=128), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('fingerprint', sa.String(length=64), nullable=True),
    sa.Column('job_id', sa.String(length=32), nullable=True),
    sa.Column('result_key', sa.Text(), nullable=True),
    sa.Column('pages', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['batch_id'], ['batches.id'], name=op.f('fk_batch_items_batch_id_batches'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_batch_items')),
    sa.UniqueConstraint('batch_id', 'key', name=op.f('uq_batch_items_batch_id'))
    )
    op.create_index('ix_batch_items_batch_status', 'batch_items', ['batch_id', 'status'], unique=False)
    op.create_index('ix_batch_items_fingerprint', 'batch_items', ['fingerprint'], unique=False)
    op.create_index(op.f('ix_batch_items_job_id'), 'batch_items', ['job_id'], unique=False)
    with op.batch_alter_table('jobs') as batch_op:
        batch_op.add_column(sa.Column('source_profile', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch_op:
        batch_op.drop_column('source_profile')
    op.drop_index(op.f('ix_batch_items_job_id'), table_name='batch_items')
    op.drop_index('ix_batch_items_fingerprint', table_name='batch_items')
    op.drop_index('ix_batch_items_batch_status', table_name='batch_items')
    op.drop_table('batch_items')
    op.drop_index('ix_batches_tenant_created', table_name='batches')
    op.drop_index('ix_batches_status', table_name='batches')
    op.drop_table('batches')
