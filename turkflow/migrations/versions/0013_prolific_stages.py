"""STAR on Prolific: an onboarding study per role and stage, and the stage a stalled role's turns need

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 09:00:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

# 0008 made prolificonboarding.role unique without naming the constraint: PostgreSQL named it, SQLite did
# not, so batch mode names it through this convention to drop it.
ROLE_UNIQUE = {"postgresql": "prolificonboarding_role_key"}
CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table('prolificonboarding', naming_convention=CONVENTION) as batch:
        batch.add_column(sa.Column('stage', sa.Integer(), nullable=False, server_default='1'))
        batch.drop_constraint(ROLE_UNIQUE.get(dialect, 'uq_prolificonboarding_role'), type_='unique')
        batch.create_unique_constraint('uq_prolificonboarding_role_stage', ['role', 'stage'])
    with op.batch_alter_table('rolestall') as batch:
        batch.add_column(sa.Column('stage', sa.Integer(), nullable=False, server_default='1'))


def downgrade() -> None:
    with op.batch_alter_table('rolestall') as batch:
        batch.drop_column('stage')
    op.execute("DELETE FROM prolificonboarding WHERE stage <> 1")
    with op.batch_alter_table('prolificonboarding') as batch:
        batch.drop_constraint('uq_prolificonboarding_role_stage', type_='unique')
        batch.drop_column('stage')
        batch.create_unique_constraint('uq_prolificonboarding_role', ['role'])
