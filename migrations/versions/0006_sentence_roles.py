"""sentence roles: who reads a sentence

A job with a dialogue voice reads quoted speech with it and the rest with the narrator's voice;
each sentence records which (``narrator`` or ``dialogue``). Rows before this are the narrator's.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('sentences') as batch:
        batch.add_column(sa.Column('role', sa.String(length=16), nullable=False, server_default='narrator'))


def downgrade() -> None:
    with op.batch_alter_table('sentences') as batch:
        batch.drop_column('role')
