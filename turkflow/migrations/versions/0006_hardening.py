"""hardening: review sweep column, turn writing signals, server-side login sessions, sign-in failures,
stalled batch roles

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 18:40:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('turn') as batch:
        batch.add_column(sa.Column('reviewed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        batch.add_column(sa.Column('signals', sa.JSON(), nullable=False, server_default=sa.text("'{}'")))
    with op.batch_alter_table('turn') as batch:
        batch.alter_column('signals', server_default=None)
    # Turns submitted before this migration were reviewed by the message that followed them.
    op.execute("UPDATE turn SET reviewed_at = submitted_at WHERE status = 'submitted'")
    op.create_index(
        'ix_turn_unreviewed', 'turn', ['submitted_at'],
        sqlite_where=sa.text("status = 'submitted' AND reviewed_at IS NULL"),
        postgresql_where=sa.text("status = 'submitted' AND reviewed_at IS NULL"),
    )
    op.create_table(
        'loginsession',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('requester_id', sa.Integer(), nullable=False),
        sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('revoked_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['requester_id'], ['requester.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_loginsession_requester_id', 'loginsession', ['requester_id'])
    op.create_table(
        'signinfailure',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('username', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('client', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_signinfailure_username_at', 'signinfailure', ['username', 'at'])
    op.create_index('ix_signinfailure_client_at', 'signinfailure', ['client', 'at'])


    op.create_table(
        'rolestall',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('workers', sa.Integer(), nullable=False),
        sa.Column('waiting', sa.Integer(), nullable=False),
        sa.Column('noticed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column('stalled_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column('cleared_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_rolestall_batch_id', 'rolestall', ['batch_id'])
    op.create_index('uq_rolestall_open', 'rolestall', ['batch_id', 'role'], unique=True,
                    sqlite_where=sa.text('cleared_at IS NULL'), postgresql_where=sa.text('cleared_at IS NULL'))


def downgrade() -> None:
    op.drop_table('rolestall')
    op.drop_table('signinfailure')
    op.drop_table('loginsession')
    op.drop_index('ix_turn_unreviewed', table_name='turn')
    with op.batch_alter_table('turn') as batch:
        batch.drop_column('signals')
        batch.drop_column('reviewed_at')
