"""batch book place: of books submitted together, the larger is spoken first

A batch records its book's submission (the job's ``created_at``, which the books of one submit
command or bulk run share) and how many GPT steps the whole book may take. The queue hands out
submissions in turn and, within one, the larger book first: a shelf's last seconds then go to its
smallest book, whose last chapters are soon encoded, instead of to its largest, whose unencoded
backlog held the shelf's end.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05 19:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.add_column(sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('book_steps', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.drop_column('book_steps')
        batch.drop_column('submitted_at')
