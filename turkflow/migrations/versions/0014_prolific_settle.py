"""Prolific settlement: a bonus has a kind (quality, or a kept turn's reward paid as a bonus), one of each
per turn

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 20:30:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

# 0001 made bonus.turn_id unique without naming the constraint: PostgreSQL named it, SQLite did not, so
# batch mode names it through this convention to drop it (as 0013 does for prolificonboarding.role).
TURN_UNIQUE = {"postgresql": "bonus_turn_id_key"}
CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table('bonus', naming_convention=CONVENTION) as batch:
        batch.add_column(sa.Column('kind', sa.String(), nullable=False, server_default='quality'))
        batch.drop_constraint(TURN_UNIQUE.get(dialect, 'uq_bonus_turn_id'), type_='unique')
        batch.create_unique_constraint('uq_bonus_turn_kind', ['turn_id', 'kind'])


def downgrade() -> None:
    op.execute("DELETE FROM bonus WHERE kind <> 'quality'")
    with op.batch_alter_table('bonus') as batch:
        batch.drop_constraint('uq_bonus_turn_kind', type_='unique')
        batch.drop_column('kind')
        batch.create_unique_constraint('uq_bonus_turn_id', ['turn_id'])
