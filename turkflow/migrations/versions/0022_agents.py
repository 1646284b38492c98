"""Agents in the loop (issue 37): declared agents, the worker kind, a batch's roles played by agents, each
conversation's agent of a role, an agent's turns and every call made for them

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 14:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None

AutoString = sqlmodel.sql.sqltypes.AutoString
Time = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    with op.batch_alter_table('worker') as table:
        table.add_column(sa.Column('kind', AutoString(), nullable=False, server_default='person'))
    with op.batch_alter_table('batch') as table:
        table.add_column(sa.Column('agents', sa.JSON(), nullable=False, server_default='{}'))
        table.add_column(sa.Column('on_agent_failure', AutoString(), nullable=False, server_default='end'))
    op.create_table(
        'agent',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', AutoString(), nullable=False),
        sa.Column('kind', AutoString(), nullable=False),
        sa.Column('endpoint', AutoString(), nullable=True),
        sa.Column('model', AutoString(), nullable=True),
        sa.Column('target', AutoString(), nullable=True),
        sa.Column('api_key_env', AutoString(), nullable=True),
        sa.Column('timeout_seconds', sa.Float(), nullable=False),
        sa.Column('temperature', sa.Float(), nullable=True),
        sa.Column('max_tokens', sa.Integer(), nullable=True),
        sa.Column('structured', AutoString(), nullable=True),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('created_at', Time(), nullable=False),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('worker_id'),
    )
    op.create_index('ix_agent_name', 'agent', ['name'], unique=True)
    op.create_table(
        'conversationagent',
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('role', AutoString(), nullable=False),
        sa.Column('agent_id', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['agent_id'], ['agent.id']),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.PrimaryKeyConstraint('conversation_id', 'role'),
    )
    op.create_index('ix_conversationagent_agent_id', 'conversationagent', ['agent_id'])
    op.create_table(
        'agentturn',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('agent_id', sa.Integer(), nullable=False),
        sa.Column('hit_id', sa.Integer(), nullable=False),
        sa.Column('status', AutoString(), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('due_at', Time(), nullable=False),
        sa.Column('claimed_until', Time(), nullable=True),
        sa.Column('reason', AutoString(), nullable=True),
        sa.Column('prompt_tokens', sa.Integer(), nullable=False),
        sa.Column('completion_tokens', sa.Integer(), nullable=False),
        sa.Column('latency_ms', sa.Integer(), nullable=False),
        sa.Column('created_at', Time(), nullable=False),
        sa.Column('ended_at', Time(), nullable=True),
        sa.ForeignKeyConstraint(['agent_id'], ['agent.id']),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.ForeignKeyConstraint(['hit_id'], ['hit.id']),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('turn_id'),
    )
    op.create_index('ix_agentturn_conversation_id', 'agentturn', ['conversation_id'])
    op.create_index('ix_agentturn_agent_id', 'agentturn', ['agent_id'])
    op.create_index('ix_agentturn_due', 'agentturn', ['status', 'due_at'])
    op.create_table(
        'agentcall',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=False),
        sa.Column('agent_id', sa.Integer(), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('outcome', AutoString(), nullable=False),
        sa.Column('detail', AutoString(), nullable=False),
        sa.Column('structured', AutoString(), nullable=True),
        sa.Column('prompt_tokens', sa.Integer(), nullable=True),
        sa.Column('completion_tokens', sa.Integer(), nullable=True),
        sa.Column('latency_ms', sa.Integer(), nullable=False),
        sa.Column('started_at', Time(), nullable=False),
        sa.ForeignKeyConstraint(['agent_id'], ['agent.id']),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_agentcall_turn_id', 'agentcall', ['turn_id'])
    op.create_index('ix_agentcall_agent', 'agentcall', ['agent_id', 'id'])


def downgrade() -> None:
    op.drop_table('agentcall')
    op.drop_table('agentturn')
    op.drop_table('conversationagent')
    op.drop_index('ix_agent_name', table_name='agent')
    op.drop_table('agent')
    with op.batch_alter_table('batch') as table:
        table.drop_column('on_agent_failure')
        table.drop_column('agents')
    with op.batch_alter_table('worker') as table:
        table.drop_column('kind')
