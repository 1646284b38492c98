"""worker.platform_status: a block reaches the crowd platform after its decision commits, swept until it has

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 11:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('worker') as batch:
        batch.add_column(sa.Column('platform_status', sqlmodel.sql.sqltypes.AutoString(), nullable=False,
                                   server_default='active'))
    # Until now every block was carried out in its decision's transaction: the platforms reflect the status.
    op.execute("UPDATE worker SET platform_status = status")


def downgrade() -> None:
    with op.batch_alter_table('worker') as batch:
        batch.drop_column('platform_status')
