"""Prolific launch: a batch's currency (the workspace's on Prolific), so its money is shown as money

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25 21:00:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.add_column(sa.Column('currency', sa.String(), nullable=False, server_default='USD'))


def downgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('currency')
