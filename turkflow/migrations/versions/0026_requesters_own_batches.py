"""Requesters own their batches (issue 35): a batch's requester, admins, disabled accounts, grants

A lab's researchers share one turkflow: a requester sees and changes their own batches and those an admin
granted them; an admin sees every batch and manages requesters (turkflow.access). Every requester there is
before this migration becomes an admin, so nobody loses sight of a batch on upgrade; batches launched before it
belong to nobody (the operator's), which admins see.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 18:00:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None

AutoString = sqlmodel.sql.sqltypes.AutoString
Time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table('requester') as table:
        table.add_column(sa.Column('admin', sa.Boolean(), nullable=False, server_default=sa.false()))
        table.add_column(sa.Column('disabled_at', Time(), nullable=True))
    requester = sa.table('requester', sa.column('admin', sa.Boolean()))
    op.execute(requester.update().values(admin=True))  # those there before: nobody loses access
    with op.batch_alter_table('batch') as table:
        table.add_column(sa.Column('requester_id', sa.Integer(),
                                   sa.ForeignKey('requester.id', name='fk_batch_requester_id_requester'),
                                   nullable=True))
        table.create_index('ix_batch_requester_id', ['requester_id'])
    op.create_table(
        'batchgrant',
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('requester_id', sa.Integer(), nullable=False),
        sa.Column('granted_by', AutoString(), nullable=False),
        sa.Column('created_at', Time(), nullable=False),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id']),
        sa.ForeignKeyConstraint(['requester_id'], ['requester.id']),
        sa.PrimaryKeyConstraint('batch_id', 'requester_id'),
    )
    op.create_index('ix_batchgrant_requester_id', 'batchgrant', ['requester_id'])


def downgrade() -> None:
    op.drop_index('ix_batchgrant_requester_id', table_name='batchgrant')
    op.drop_table('batchgrant')
    with op.batch_alter_table('batch') as table:
        table.drop_index('ix_batch_requester_id')
        table.drop_constraint('fk_batch_requester_id_requester', type_='foreignkey')
        table.drop_column('requester_id')
    with op.batch_alter_table('requester') as table:
        table.drop_column('disabled_at')
        table.drop_column('admin')
