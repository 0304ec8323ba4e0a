"""embedded jobs: who runs a job, and its heartbeat

A job made by `tts-jobs run` is moved by that one process, not by workers: ``mode`` says which,
``runner`` names the process (host:pid) and ``heartbeat_at`` shows it alive, so that a job whose
process died without a word is recognised as interrupted instead of looking as if it still ran.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('mode', sa.String(length=16), nullable=False, server_default='cluster'))
        batch.add_column(sa.Column('runner', sa.String(length=255), nullable=True))
        batch.add_column(sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('heartbeat_at')
        batch.drop_column('runner')
        batch.drop_column('mode')
