"""Gold turns rated at onboarding count in a rater's record, and the sequential block rule's error rates
(issue 25)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26 06:00:00
"""

from alembic import op
import sqlalchemy as sa


revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('raterreliability') as table:
        table.add_column(sa.Column('gold', sa.Integer(), nullable=False, server_default='0'))
    with op.batch_alter_table('batch') as table:
        table.add_column(sa.Column('sprt_alpha', sa.Float(), nullable=False, server_default='0'))
        table.add_column(sa.Column('sprt_beta', sa.Float(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('batch') as table:
        table.drop_column('sprt_beta')
        table.drop_column('sprt_alpha')
    with op.batch_alter_table('raterreliability') as table:
        table.drop_column('gold')
