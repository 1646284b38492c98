"""Per-turn pairwise (issue 38): a batch whose agents' turns are each answered by two agents, the candidates,
and the pick the person who continues the dialog makes between them

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28 16:30:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None

AutoString = sqlmodel.sql.sqltypes.AutoString
Time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table('batch') as table:
        table.add_column(sa.Column('pairwise', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_table(
        'candidate',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=False),
        sa.Column('agent_id', sa.Integer(), nullable=False),
        sa.Column('text', AutoString(), nullable=False),
        sa.Column('label', AutoString(), nullable=True),
        sa.Column('answers', sa.JSON(), nullable=False),
        sa.Column('prompt_tokens', sa.Integer(), nullable=True),
        sa.Column('completion_tokens', sa.Integer(), nullable=True),
        sa.Column('latency_ms', sa.Integer(), nullable=False),
        sa.Column('created_at', Time(), nullable=False),
        sa.ForeignKeyConstraint(['agent_id'], ['agent.id']),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('turn_id', 'agent_id', name='uq_candidate_turn_agent'),
    )
    op.create_index('ix_candidate_turn_id', 'candidate', ['turn_id'])
    op.create_table(
        'pick',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=False),
        sa.Column('chosen_id', sa.Integer(), nullable=False),
        sa.Column('rejected_id', sa.Integer(), nullable=False),
        sa.Column('first_id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('picker_turn_id', sa.Integer(), nullable=False),
        sa.Column('reason', AutoString(), nullable=False),
        sa.Column('at', Time(), nullable=False),
        sa.ForeignKeyConstraint(['chosen_id'], ['candidate.id']),
        sa.ForeignKeyConstraint(['rejected_id'], ['candidate.id']),
        sa.ForeignKeyConstraint(['first_id'], ['candidate.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id']),
        sa.ForeignKeyConstraint(['picker_turn_id'], ['turn.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('turn_id'),
        sa.UniqueConstraint('picker_turn_id'),
    )
    op.create_index('ix_pick_worker_id', 'pick', ['worker_id'])


def downgrade() -> None:
    op.drop_table('pick')
    op.drop_table('candidate')
    with op.batch_alter_table('batch') as table:
        table.drop_column('pairwise')
