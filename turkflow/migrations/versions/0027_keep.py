"""Keeping people (issue 39): a batch says whom a conversation's next turn of a role goes to (any worker, the
role's last writer while present, or for a window), and until when a worker counts as present

A batch with an affinity window keeps it as a window of the same seconds; the others took any worker.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-30 10:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.add_column(sa.Column('keep', sqlmodel.sql.sqltypes.AutoString(), nullable=False,
                                   server_default='any'))
        batch.alter_column('affinity_seconds', new_column_name='keep_seconds')
    op.execute("UPDATE batch SET keep = 'window' WHERE keep_seconds > 0")
    with op.batch_alter_table('worker') as worker:
        worker.add_column(sa.Column('present_until', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('worker') as worker:
        worker.drop_column('present_until')
    op.execute("UPDATE batch SET keep_seconds = 0 WHERE keep != 'window'")
    with op.batch_alter_table('batch') as batch:
        batch.alter_column('keep_seconds', new_column_name='affinity_seconds')
        batch.drop_column('keep')
