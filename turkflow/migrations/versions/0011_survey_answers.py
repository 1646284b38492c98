"""End-of-dialog surveys: surveyanswer

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24 12:10:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'surveyanswer',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('question', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('text', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('answer', sa.JSON(), nullable=False),
        sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('conversation_id', 'worker_id', 'question', name='uq_survey_answer'),
    )
    with op.batch_alter_table('surveyanswer') as batch:
        batch.create_index(batch.f('ix_surveyanswer_conversation_id'), ['conversation_id'], unique=False)
        batch.create_index(batch.f('ix_surveyanswer_worker_id'), ['worker_id'], unique=False)


def downgrade() -> None:
    op.drop_table('surveyanswer')
