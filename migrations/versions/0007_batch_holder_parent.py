"""batch holder's parent: which deaths are the batch's doing

A batch records the parent process of the worker process that holds it (``holder_parent``, the
Celery worker's main process). When the holder dies and that parent lives on, the pool child alone
died — killed by what it ran; when the parent died too, the whole worker went down (a crashed
host, an operator's kill, a restart), which is not held against the batch.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 18:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.add_column(sa.Column('holder_parent', sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.drop_column('holder_parent')
