"""The local queue's indexes: open HITs of a role in id order, and the HITs kept for a worker (issue 27)

The queue lists the oldest open turns of a worker's role and those kept for the worker. Read along
(status, role, id), the database stops after the page's turns instead of joining and sorting every open
HIT of the role on every queue read.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26 13:00:00
"""

from alembic import op


revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_hit_queue', 'hit', ['status', 'role', 'id'])
    op.create_index('ix_hit_reserved_for_id', 'hit', ['reserved_for_id'])


def downgrade() -> None:
    op.drop_index('ix_hit_reserved_for_id', table_name='hit')
    op.drop_index('ix_hit_queue', table_name='hit')
