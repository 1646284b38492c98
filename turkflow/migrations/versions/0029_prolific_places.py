"""Prolific session places (issue 39): a participant's place in a study may last a session, one submission in
which they write turn after turn, paid once with the study's reward

prolificplace holds each such submission; an assignment written in one names it (place_id).

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28 20:45:00
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'prolificplace',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('study_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('submission_id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('status', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('ends_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('ended_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column('end_reason', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('reviewed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_prolificplace_batch_id', 'prolificplace', ['batch_id'])
    op.create_index('ix_prolificplace_worker_id', 'prolificplace', ['worker_id'])
    op.create_index('ix_prolificplace_status', 'prolificplace', ['status'])
    op.create_index('ix_prolificplace_submission_id', 'prolificplace', ['submission_id'], unique=True)
    with op.batch_alter_table('assignment') as assignment:
        assignment.add_column(sa.Column('place_id', sa.Integer(), nullable=True))
        assignment.create_index('ix_assignment_place_id', ['place_id'])
        assignment.create_foreign_key('fk_assignment_place_id', 'prolificplace', ['place_id'], ['id'])


def downgrade() -> None:
    with op.batch_alter_table('assignment') as assignment:
        assignment.drop_constraint('fk_assignment_place_id', type_='foreignkey')
        assignment.drop_index('ix_assignment_place_id')
        assignment.drop_column('place_id')
    op.drop_index('ix_prolificplace_submission_id', table_name='prolificplace')
    op.drop_index('ix_prolificplace_status', table_name='prolificplace')
    op.drop_index('ix_prolificplace_worker_id', table_name='prolificplace')
    op.drop_index('ix_prolificplace_batch_id', table_name='prolificplace')
    op.drop_table('prolificplace')
