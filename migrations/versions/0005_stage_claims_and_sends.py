"""stage claims and sends: every stage leased and reconciled

Ingest and assembly are claimed on the job row (``runner``/``heartbeat_at``, as an embedded run
already is); ``sent_at``/``sends`` on jobs and ``sent_at`` on batches let the sweeper resend work no
message will move, throttled; a batch counts the deaths of the processes that held it
(``holder_deaths``; ``solo_deaths`` while it ran alone) apart from the errors it raised
(``failures``), so that only a batch that kills its workers is failed as poison.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('sends', sa.Integer(), nullable=False, server_default='0'))
    with op.batch_alter_table('batches') as batch:
        batch.add_column(sa.Column('failures', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('holder_deaths', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('solo_deaths', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('batches') as batch:
        batch.drop_column('sent_at')
        batch.drop_column('solo_deaths')
        batch.drop_column('holder_deaths')
        batch.drop_column('failures')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('sends')
        batch.drop_column('sent_at')
