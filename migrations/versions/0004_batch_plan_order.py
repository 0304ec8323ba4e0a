"""batch plan order: the oldest book of the plan a batch came from

A streaming GPU worker takes queued batches by priority, then plan by plan (oldest book first),
then longest first within a plan (storage/repo.next_queued_batch), so that books read at
different times each finish, and are assembled, while the next is spoken. Batches queued before
this revision get 0 and run first.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 11:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.add_column(sa.Column('first_job_id', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.drop_column('first_job_id')
