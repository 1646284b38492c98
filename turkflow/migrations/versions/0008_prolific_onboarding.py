"""prolific: an onboarding study per role, whose passing code adds a participant to the role's group

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 10:40:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'prolificonboarding',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('group_id', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('study_id', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('role'),
        sa.UniqueConstraint('study_id'),
    )


def downgrade() -> None:
    op.drop_table('prolificonboarding')
