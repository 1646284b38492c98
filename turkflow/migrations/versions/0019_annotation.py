"""Annotation (issue 26, item 1): a person's final labels of an annotated turn, and whether it is gold

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26 02:10:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'adjudication',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('task_id', sa.Integer(), nullable=False),
        sa.Column('labels', sa.JSON(), nullable=False),
        sa.Column('gold', sa.Boolean(), nullable=False),
        sa.Column('decided_by', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('decided_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['task_id'], ['task.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('task_id', name='uq_adjudication_task'),
    )


def downgrade() -> None:
    op.drop_table('adjudication')
