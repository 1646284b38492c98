"""batch block policy: pooled rule and probation

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 14:10:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

# Existing batches keep the paper's rule: either mean below p blocks, no probation.
COLUMNS = (
    ('block_rule', sqlmodel.sql.sqltypes.AutoString(), "'either'"),
    ('probation_rated_turns', sa.Integer(), '0'),
    ('settled_window', sa.Integer(), '0'),
    ('settled_block_below', sa.Float(), '0'),
)


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        for name, type_, default in COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=False, server_default=sa.text(default)))
    with op.batch_alter_table('batch') as batch:
        for name, _, _ in COLUMNS:
            batch.alter_column(name, server_default=None)


def downgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        for name, _, _ in reversed(COLUMNS):
            batch.drop_column(name)
