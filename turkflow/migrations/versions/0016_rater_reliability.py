"""Rater reliability: each rater's record in the monitor's trust model, and a batch's rule on machine-written
turns

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 21:10:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'raterreliability',
        sa.Column('rater_id', sa.Integer(), nullable=False),
        sa.Column('ratings', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('careless', sa.Float(), nullable=False, server_default='0'),
        sa.Column('harsh', sa.Float(), nullable=False, server_default='0'),
        sa.Column('answers_yy', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('answers_yn', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('answers_ny', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('answers_nn', sa.Integer(), nullable=False, server_default='0'),
        sa.Column('verdict', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('identified_after', sa.Integer(), nullable=True),
        sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['rater_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('rater_id'),
    )
    op.create_index('ix_raterreliability_verdict', 'raterreliability', ['verdict'])
    with op.batch_alter_table('batch') as batch:
        batch.add_column(sa.Column('typed_block', sa.Integer(), nullable=False, server_default='0'))
        batch.add_column(sa.Column('typed_window', sa.Integer(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('typed_window')
        batch.drop_column('typed_block')
    op.drop_index('ix_raterreliability_verdict', table_name='raterreliability')
    op.drop_table('raterreliability')
