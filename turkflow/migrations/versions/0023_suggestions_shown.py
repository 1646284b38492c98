"""A STAR batch says how many suggested replies its wizard's page shows (issue 39)

STAR's wizards saw three suggestions in 80% of their picks; the page showed six. The number is a batch's
decision (every process that renders the page reads it from the batch), three unless the batch asks otherwise.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 14:30:00
"""

import sqlalchemy as sa
from alembic import op


revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.add_column(sa.Column('suggestions_shown', sa.Integer(), nullable=False, server_default='3'))


def downgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('suggestions_shown')
