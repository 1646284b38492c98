"""prolific: a study per batch role, the bonus claim Prolific's non-idempotent pay needs, and the
platform fee a batch's budget counts

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 19:10:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'prolificstudy',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('study_id', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('ended_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('batch_id', 'role', name='uq_prolificstudy_batch_role'),
        sa.UniqueConstraint('study_id'),
    )
    with op.batch_alter_table('bonus') as batch:
        batch.add_column(sa.Column('pay_claimed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch.add_column(sa.Column('external_id', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    with op.batch_alter_table('batch') as batch:
        batch.add_column(sa.Column('fee_percent', sa.Float(), nullable=False, server_default=sa.text('0')))
    with op.batch_alter_table('batch') as batch:
        batch.alter_column('fee_percent', server_default=None)


def downgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('fee_percent')
    with op.batch_alter_table('bonus') as batch:
        batch.drop_column('external_id')
        batch.drop_column('pay_claimed_at')
    op.drop_table('prolificstudy')
