"""Engines, sessions and schema migrations (Alembic) for SQLite and PostgreSQL alike."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from importlib.resources import files
from typing import Iterator

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, create_engine

from turkflow.errors import ServiceUnavailable


_engines: dict[str, Engine] = {}


def get_engine(database_url: str) -> Engine:
    """One engine per URL per process."""
    if database_url not in _engines:
        _engines[database_url] = _create(database_url)
    return _engines[database_url]


def dispose_engine(database_url: str) -> None:
    """Close the pooled connections of a URL's engine (tests drop their databases afterwards)."""
    engine = _engines.pop(database_url, None)
    if engine is not None:
        engine.dispose()


def _create(database_url: str) -> Engine:
    """SQLite gets WAL and a busy timeout so the web server and Celery workers can share the file."""
    if database_url.startswith("sqlite"):
        engine = create_engine(database_url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # noqa: ANN001
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(database_url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@contextmanager
def session_scope(database_url: str) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error. A database that takes no writes
    for now (a full disk, a read-only file or server) raises ``ServiceUnavailable``: the transaction
    rolled back whole, so the same request later stores it once."""
    with Session(get_engine(database_url), expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except DBAPIError as error:
            session.rollback()
            if refuses_writes(error):
                raise ServiceUnavailable(NO_WRITES) from error
            raise
        except BaseException:
            session.rollback()
            raise


NO_WRITES = "the server cannot store anything right now and nothing of this was saved; try again in a minute"
# SQLite's primary result codes SQLITE_READONLY and SQLITE_FULL (a full disk, or ``max_page_count``), and
# PostgreSQL's SQLSTATEs read_only_sql_transaction (a read-only database or standby) and disk_full ("could
# not extend file").
_SQLITE_NO_WRITES = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL}
_POSTGRES_NO_WRITES = {"25006", "53100"}


def refuses_writes(error: DBAPIError) -> bool:
    """Whether the database refused a write because it cannot take any now, rather than refusing this one."""
    code = getattr(error.orig, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _SQLITE_NO_WRITES  # the extended code's low byte is the primary one
    return getattr(error.orig, "sqlstate", None) in _POSTGRES_NO_WRITES


@contextmanager
def savepoint(session: Session) -> Iterator[None]:
    """``session.begin_nested()`` that stays inside the session's transaction on SQLite too.

    pysqlite opens its transaction only at the first INSERT, UPDATE or DELETE. A SAVEPOINT issued before
    any write therefore opens a transaction of its own, and releasing it commits at once: a quality
    decision became visible (and durable) before the block it causes, and a crash between the two left a
    decision whose block never happened. So on SQLite a write transaction is begun first (IMMEDIATE: the
    session is about to write, and taking the lock now waits on the busy timeout instead of failing later
    on a stale read snapshot).
    """
    if session.get_bind().dialect.name == "sqlite":
        connection = session.connection()
        if not connection.connection.dbapi_connection.in_transaction:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    with session.begin_nested():
        yield


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("turkflow") / "migrations"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to the newest migration; safe to run on every start."""
    if database_url.startswith("sqlite:///"):
        from pathlib import Path

        Path(database_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(database_url), revision)
