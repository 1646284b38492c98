"""Judged signals: per-writer judgements that are not peer ratings (STAR's surveys and knowledge-base
agreement, an annotation's agreement), and each batch's rule for them (m of the last n not ok)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26 02:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:  # existing batches judged nothing this way
        batch.add_column(sa.Column('judged_block', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('judged_window', sa.Integer(), nullable=False, server_default='0'))
    op.create_table(
        'judgedsignal',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=False),
        sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('ok', sa.Boolean(), nullable=False),
        sa.Column('evidence', sa.JSON(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('turn_id', 'kind', name='uq_judgedsignal_turn_kind'),
    )
    op.create_index('ix_judgedsignal_worker_kind_recent', 'judgedsignal', ['worker_id', 'kind', 'id'])


def downgrade() -> None:
    op.drop_index('ix_judgedsignal_worker_kind_recent', table_name='judgedsignal')
    op.drop_table('judgedsignal')
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('judged_window')
        batch.drop_column('judged_block')
