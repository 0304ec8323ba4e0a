"""batch run order: priority and longest sentence

A GPU worker streams queued batches through its decode slots and takes the next one by these
(jobs/batches/stream.py): higher priority first, then the longest sentences first, so that books
planned at different times still run longest first overall.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 18:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.add_column(sa.Column('priority', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('longest_positions', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.drop_column('longest_positions')
        batch.drop_column('priority')
