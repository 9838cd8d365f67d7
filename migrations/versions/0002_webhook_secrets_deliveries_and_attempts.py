"""webhook secrets, deliveries, attempts and disabled endpoints

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('webhook_disabled_endpoints',
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('url_digest', sa.String(length=64), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('disabled_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('tenant_id', 'url_digest', name=op.f('pk_webhook_disabled_endpoints'))
    )
    op.create_table('webhook_secrets',
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('current', sa.Text(), nullable=False),
    sa.Column('previous', sa.Text(), nullable=True),
    sa.Column('previous_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('rotated_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('tenant_id', name=op.f('pk_webhook_secrets'))
    )
    op.create_table('webhook_deliveries',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('event_type', sa.String(length=32), nullable=False),
    sa.Column('event_key', sa.String(length=200), nullable=True),
    sa.Column('job_id', sa.String(length=32), nullable=True),
    sa.Column('batch_id', sa.String(length=32), nullable=True),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('tries', sa.Integer(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_token', sa.String(length=32), nullable=True),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_webhook_deliveries_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
    sa.UniqueConstraint('event_key', name=op.f('uq_webhook_deliveries_event_key'))
    )
    op.create_index(op.f('ix_webhook_deliveries_batch_id'), 'webhook_deliveries', ['batch_id'], unique=False)
    op.create_index(op.f('ix_webhook_deliveries_job_id'), 'webhook_deliveries', ['job_id'], unique=False)
    op.create_index('ix_webhook_deliveries_status_due', 'webhook_deliveries', ['status', 'next_attempt_at'], unique=False)
    op.create_table('webhook_attempts',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('delivery_id', sa.String(length=32), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['delivery_id'], ['webhook_deliveries.id'], name=op.f('fk_webhook_attempts_delivery_id_webhook_deliveries'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts')),
    sa.UniqueConstraint('delivery_id', 'number', name=op.f('uq_webhook_attempts_delivery_id'))
    )


def downgrade() -> None:
    op.drop_table('webhook_attempts')
    op.drop_index('ix_webhook_deliveries_status_due', table_name='webhook_deliveries')
    op.drop_index(op.f('ix_webhook_deliveries_job_id'), table_name='webhook_deliveries')
    op.drop_index(op.f('ix_webhook_deliveries_batch_id'), table_name='webhook_deliveries')
    op.drop_table('webhook_deliveries')
    op.drop_table('webhook_secrets')
    op.drop_table('webhook_disabled_endpoints')
