"""Prolific, round three (issue 34): what a batch publishes is stored with it, an onboarding study keeps what
it was published with and can be replaced, turkflow resumes only a study it paused, and a bonus whose pay call
Prolific accepted says so on its own

Batches and onboarding studies made before keep empty terms: the first process that publishes for them
records its own, once. Each role and stage has one current onboarding study (a partial unique index in
place of the unique pair), so a replaced one stays on record.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28 15:00:00
"""

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('batch') as batch:
        batch.add_column(sa.Column('platform_terms', sa.JSON(), nullable=False, server_default='{}'))
    with op.batch_alter_table('prolificstudy') as study:
        study.add_column(sa.Column('seen_status', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        study.add_column(sa.Column('paused_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    with op.batch_alter_table('prolificonboarding') as onboarding:
        onboarding.add_column(sa.Column('terms', sa.JSON(), nullable=False, server_default='{}'))
        onboarding.add_column(sa.Column('published_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        onboarding.add_column(sa.Column('replaced_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
        onboarding.drop_constraint('uq_prolificonboarding_role_stage', type_='unique')
        onboarding.create_index('uq_prolificonboarding_current', ['role', 'stage'], unique=True,
                                sqlite_where=sa.text('replaced_at IS NULL'),
                                postgresql_where=sa.text('replaced_at IS NULL'))
    with op.batch_alter_table('bonus') as bonus:
        bonus.add_column(sa.Column('pay_accepted_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    # A study already published counts as published: its onboarding study was made before drafts were told apart.
    op.execute("UPDATE prolificonboarding SET published_at = created_at WHERE study_id IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table('bonus') as bonus:
        bonus.drop_column('pay_accepted_at')
    with op.batch_alter_table('prolificonboarding') as onboarding:
        onboarding.drop_index('uq_prolificonboarding_current')
        onboarding.create_unique_constraint('uq_prolificonboarding_role_stage', ['role', 'stage'])
        onboarding.drop_column('replaced_at')
        onboarding.drop_column('published_at')
        onboarding.drop_column('terms')
    with op.batch_alter_table('prolificstudy') as study:
        study.drop_column('paused_at')
        study.drop_column('seen_status')
    with op.batch_alter_table('batch') as batch:
        batch.drop_column('platform_terms')
