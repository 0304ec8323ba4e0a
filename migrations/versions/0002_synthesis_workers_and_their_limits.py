"""synthesis workers and their limits

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 07:33:10.796160
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('workers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('device', sa.String(length=64), nullable=False),
    sa.Column('precision', sa.String(length=16), nullable=False),
    sa.Column('model_dir', sa.Text(), nullable=False),
    sa.Column('memory_cap_bytes', sa.BigInteger(), nullable=True),
    sa.Column('fixed_bytes', sa.BigInteger(), nullable=False),
    sa.Column('bytes_per_row_position', sa.BigInteger(), nullable=False),
    sa.Column('max_rows', sa.Integer(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workers')),
    sa.UniqueConstraint('name', name=op.f('uq_workers_name'))
    )


def downgrade() -> None:
    op.drop_table('workers')
