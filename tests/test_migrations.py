"""The Alembic migrations build exactly the schema the models describe, on both backends."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlmodel import SQLModel

import turkflow.models  # noqa: F401
from turkflow.db import alembic_config, get_engine, head_revision, schema_current


def test_migrations_have_one_head_the_newest_numbered_file():
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    assert heads == [head_revision()]  # what every command compares the database with, without Alembic


def test_a_migrated_database_is_current(database_url):
    assert schema_current(database_url)


def test_migrated_schema_matches_the_models(database_url):
    with get_engine(database_url).connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), SQLModel.metadata)
    assert diff == []
