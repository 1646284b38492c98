"""Who wrote in which batch (issue 35): a requester's workers read from a row per worker and batch

turkflow.access showed a requester the workers who wrote a turn in their batches by reading those workers'
turns: a requester whose batches are small among a long history waited a second for the workers page at 100k
turns (python -m bench dashboard). batchworker holds a row per batch and worker, written with the turn; this
fills it from the turns there are.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 18:30:00
"""

import sqlalchemy as sa
from alembic import op


revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'batchworker',
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('batch_id', 'worker_id'),
    )
    op.create_index('ix_batchworker_worker_id', 'batchworker', ['worker_id'])
    op.execute("INSERT INTO batchworker (batch_id, worker_id) SELECT DISTINCT c.batch_id, t.worker_id "
               "FROM turn t JOIN conversation c ON c.id = t.conversation_id WHERE t.worker_id IS NOT NULL")


def downgrade() -> None:
    op.drop_index('ix_batchworker_worker_id', table_name='batchworker')
    op.drop_table('batchworker')
