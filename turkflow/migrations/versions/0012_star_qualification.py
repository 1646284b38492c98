"""STAR's staged qualification: worker.stage, stageattempt, stagehint

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24 14:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('worker') as batch:
        batch.add_column(sa.Column('stage', sa.Integer(), nullable=False, server_default='0'))
    op.create_table(
        'stageattempt',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('stage', sa.Integer(), nullable=False),
        sa.Column('provider', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('answers', sa.JSON(), nullable=False),
        sa.Column('hints_used', sa.Integer(), nullable=True),
        sa.Column('passed', sa.Boolean(), nullable=True),
        sa.Column('reasons', sa.JSON(), nullable=False),
        sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('graded_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('stageattempt') as batch:
        batch.create_index(batch.f('ix_stageattempt_worker_id'), ['worker_id'], unique=False)
        batch.create_index('uq_stageattempt_open', ['worker_id', 'stage'], unique=True,
                           sqlite_where=sa.text('graded_at IS NULL'),
                           postgresql_where=sa.text('graded_at IS NULL'))
    op.create_table(
        'stagehint',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('attempt_id', sa.Integer(), nullable=False),
        sa.Column('question', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['attempt_id'], ['stageattempt.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('attempt_id', 'question', name='uq_stagehint_question'),
    )
    with op.batch_alter_table('stagehint') as batch:
        batch.create_index(batch.f('ix_stagehint_attempt_id'), ['attempt_id'], unique=False)


def downgrade() -> None:
    op.drop_table('stagehint')
    op.drop_table('stageattempt')
    with op.batch_alter_table('worker') as batch:
        batch.drop_column('stage')
