"""Affinity: a batch's window in which a conversation's next turn of a role is kept for the worker who wrote
that role's last turn, and each HIT's reservation (its worker and when it ends)

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25 21:20:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:  # existing batches had no affinity
        batch.add_column(sa.Column('affinity_seconds', sa.Integer(), nullable=False, server_default='0'))
    with op.batch_alter_table('hit') as hit:
        hit.add_column(sa.Column('reserved_for_id', sa.Integer(),
                                 sa.ForeignKey('worker.id', name='fk_hit_reserved_for_id_worker'), nullable=True))
        hit.add_column(sa.Column('reserved_until', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('hit') as hit:
        hit.drop_column('reserved_until')
        hit.drop_column('reserved_for_id')
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('affinity_seconds')
