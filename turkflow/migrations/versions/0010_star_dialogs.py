"""STAR dialogs: task.protocol and task.star (a STAR task's schema), conversation.scenario, dialogevent

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 11:05:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('task') as batch:
        batch.add_column(sa.Column('protocol', sqlmodel.sql.sqltypes.AutoString(), nullable=False,
                                   server_default='wizard_of_tasks'))
        batch.add_column(sa.Column('star', sa.JSON(), nullable=False, server_default='{}'))
        batch.create_index(batch.f('ix_task_protocol'), ['protocol'], unique=False)
    with op.batch_alter_table('conversation') as batch:
        batch.add_column(sa.Column('scenario', sa.JSON(), nullable=False, server_default='{}'))
    op.create_table(
        'dialogevent',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=True),
        sa.Column('turn_index', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=True),
        sa.Column('agent', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('action', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('data', sa.JSON(), nullable=False),
        sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('dialogevent') as batch:
        batch.create_index('ix_dialogevent_conversation', ['conversation_id', 'id'], unique=False)
        batch.create_index(batch.f('ix_dialogevent_turn_id'), ['turn_id'], unique=False)
        batch.create_index(batch.f('ix_dialogevent_worker_id'), ['worker_id'], unique=False)


def downgrade() -> None:
    op.drop_table('dialogevent')
    with op.batch_alter_table('conversation') as batch:
        batch.drop_column('scenario')
    with op.batch_alter_table('task') as batch:
        batch.drop_index(batch.f('ix_task_protocol'))
        batch.drop_column('star')
        batch.drop_column('protocol')
