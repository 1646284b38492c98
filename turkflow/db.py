"""Engines, sessions and schema migrations (Alembic) for SQLite and PostgreSQL alike.

Alembic is imported only when a migration runs (``alembic_config``, ``upgrade``): a process that finds its
database current (``schema_current``: one query against the newest migration's number) never loads it.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from importlib.resources import files
from typing import TYPE_CHECKING, Iterator, Optional

from sqlalchemy import event, inspect, make_url, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, create_engine

from turkflow.config import private_folder
from turkflow.errors import ServiceUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

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


BUSY_TIMEOUT_SECONDS = 30
# The connections a process keeps, all of them kept once opened: the agents worker's threads (16 to 64) store
# answers in bursts, and a pool that closed what it opened past its size on return opened them again for the next
# burst (on PostgreSQL a server process forked and authenticated each time: in bench agents, 39 sessions started
# beside 100 agent turns where people's 14). Threads past it wait for a connection, as they did past 10 + 20.
POOL_SIZE = 30


def _private_database_file(database_url: str) -> None:
    """A SQLite database file about to be created is created readable by its owner only (with its folder):
    SQLite gives its journal and shared-memory files the database file's permissions. A file that exists is
    left as its owner set it."""
    url = make_url(database_url)
    path = url.database or ""
    if not path or path == ":memory:" or path.startswith("file:") or url.query.get("uri"):
        return
    file = Path(path)
    if not file.exists():
        private_folder(file.parent)
        os.close(os.open(file, os.O_CREAT | os.O_WRONLY, 0o600))


def _create(database_url: str) -> Engine:
    """SQLite gets WAL, a busy timeout and queued writers (``WriterConnection``) so the web server and Celery
    workers can share the file."""
    if database_url.startswith("sqlite"):
        _private_database_file(database_url)
        in_memory = make_url(database_url).database in (None, "", ":memory:") or "mode=memory" in database_url
        kept = {} if in_memory else {"pool_size": POOL_SIZE, "max_overflow": 0}  # in memory: one per thread
        engine = create_engine(database_url, **kept, connect_args={
            "check_same_thread": False, "timeout": BUSY_TIMEOUT_SECONDS, "factory": WriterConnection})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # noqa: ANN001
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    # a lock another program holds (a migration, a person's transaction) is waited for as long as SQLite's
    # busy timeout, then refused (``refuses_writes``), never waited for without end
    return create_engine(database_url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=0,
                         connect_args={"options": f"-c lock_timeout={BUSY_TIMEOUT_SECONDS * 1000}"})


class WriterLock:
    """One write transaction at a time on a database file, the writers queued and woken as soon as the one
    before ends: the threads of a process on a lock, the processes on ``flock`` of a file beside the
    database (released by the kernel when a process dies).

    SQLite lets one writer in at a time too, but a writer that finds the file locked sleeps on the busy
    handler's back-off (1, 2, 5, 10 ... 100 ms between tries) however soon the lock is free, and whoever tries
    at the right moment goes first: in ``bench capacity`` at 25 to 30 turns a second the writers waited 4.4
    s for each second the lock was held, a turn's submit up to 1.4 s (its p99; bench/RESULTS.md). SQLite's
    lock still decides who writes; this one only queues them.

    A writer waits here as long as the transaction before it lasts: one that never ends (a process stopped
    in a write) holds the other processes' writers back where SQLite's busy timeout made them fail after
    ``BUSY_TIMEOUT_SECONDS``. Threads give up their wait for this process's lock after that timeout and
    leave it to SQLite's."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._threads = threading.Lock()
        self._holder: Optional[int] = None
        self._file: Optional[int] = None
        self._no_file = False

    def acquire(self) -> bool:
        """Wait for the writers before; False if this thread writes already (a second session of its own:
        SQLite refuses it after its busy timeout, as before) or waited the busy timeout here."""
        if self._holder == threading.get_ident() or not self._threads.acquire(timeout=BUSY_TIMEOUT_SECONDS):
            return False
        self._holder = threading.get_ident()
        try:
            if self._file is None and not self._no_file:
                try:
                    self._file = os.open(f"{self.path}-writers", os.O_RDONLY | os.O_CREAT, 0o600)
                except OSError:  # a directory that takes no new file: processes queue on SQLite's lock alone
                    self._no_file = True
            if self._file is not None:
                fcntl.flock(self._file, fcntl.LOCK_EX)
        except BaseException:
            self._holder = None
            self._threads.release()
            raise
        return True

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
        self._holder = None
        self._threads.release()


_writer_locks: dict[str, WriterLock] = {}
_writer_locks_pid = os.getpid()
_writer_locks_guard = threading.Lock()


def writer_lock(path: str) -> WriterLock:
    """This process's lock of a database file. A forked child makes its own: one held at the fork would
    never be released in the child, and the parent's open file shares its ``flock`` with the parent."""
    global _writer_locks_pid
    with _writer_locks_guard:
        if _writer_locks_pid != os.getpid():
            _writer_locks.clear()
            _writer_locks_pid = os.getpid()
        if path not in _writer_locks:
            _writer_locks[path] = WriterLock(path)
        return _writer_locks[path]


_BEGINS_WRITING = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN")


class WriterCursor(sqlite3.Cursor):
    """Tells its connection before and after each statement (``WriterConnection``)."""

    def execute(self, sql: str, *parameters):  # noqa: ANN002, ANN201
        return self._told(super().execute, sql, parameters)

    def executemany(self, sql: str, *parameters):  # noqa: ANN002, ANN201
        return self._told(super().executemany, sql, parameters)

    def _told(self, run, sql: str, parameters: tuple):  # noqa: ANN001, ANN202
        self.connection.before(sql, self)
        try:
            return run(sql, *parameters)
        finally:
            self.connection.after()


class WriterConnection(sqlite3.Connection):
    """A pysqlite connection whose write transactions wait their turn on the file's ``WriterLock`` and hold
    it until they end. The transaction begins IMMEDIATE once the lock is had: pysqlite begins it DEFERRED at
    the first write, which takes SQLite's lock only then."""

    _path: Optional[str] = None
    _holding: Optional[WriterLock] = None

    def cursor(self, factory=WriterCursor):  # noqa: ANN001, ANN201
        return super().cursor(factory)

    def before(self, sql: str, cursor: sqlite3.Cursor) -> None:
        if (self.in_transaction or self._holding or self.isolation_level is None  # autocommit: no transaction
                or not sql.lstrip()[:7].upper().startswith(_BEGINS_WRITING)):
            return
        if self._path is None:  # the file's own path, whatever URI opened it (read-only ones too)
            self._path = next(row[2] for row in super().execute("PRAGMA database_list") if row[1] == "main")
        if not self._path:
            return  # an in-memory database: only this connection writes it
        lock = writer_lock(self._path)  # looked up each time: a connection may outlive a fork
        if not lock.acquire():
            return
        self._holding = lock
        if not sql.lstrip()[:5].upper() == "BEGIN":
            try:
                sqlite3.Cursor.execute(cursor, "BEGIN IMMEDIATE")
            except BaseException:
                self.after()
                raise

    def after(self) -> None:
        """Once the transaction ended (a commit, a rollback, or SQLite's own rollback after an error) the
        next writer goes."""
        if self._holding is not None and not self.in_transaction:
            self._holding, lock = None, self._holding
            lock.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.after()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.after()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._holding is not None:
                self._holding, lock = None, self._holding
                lock.release()


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
# SQLite's primary result codes SQLITE_READONLY, SQLITE_FULL (a full disk, or ``max_page_count``) and
# SQLITE_BUSY (another program held the write lock past the busy timeout: "database is locked"), and
# PostgreSQL's SQLSTATEs read_only_sql_transaction (a read-only database or standby), disk_full ("could not
# extend file") and lock_not_available (a lock held past ``lock_timeout``).
_SQLITE_NO_WRITES = {sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_BUSY}
_POSTGRES_NO_WRITES = {"25006", "53100", "55P03"}


def refuses_writes(error: DBAPIError) -> bool:
    """Whether the database refused a write because it cannot take any now (read-only, full, or locked by
    another program for longer than we wait), rather than refusing this one."""
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


MIGRATIONS = files("turkflow") / "migrations"


def head_revision() -> str:
    """The newest migration's revision: migrations are numbered (``versions/NNNN_*.py``, the revision the
    number), one after another, so the head is the highest number (tests/test_migrations.py checks that
    Alembic finds this one head)."""
    return max(path.name[:4] for path in (MIGRATIONS / "versions").iterdir()
               if path.name[:4].isdigit() and path.name.endswith(".py"))


def schema_revisions(database_url: str) -> set[str]:
    """The revisions the database is at, as Alembic records them (empty for a new database)."""
    with get_engine(database_url).connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return set()
        return set(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())


def schema_current(database_url: str) -> bool:
    """Whether the database is at the newest migration, asked without loading Alembic."""
    return schema_revisions(database_url) == {head_revision()}


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to the newest migration; safe to run on every start."""
    from alembic import command

    if database_url.startswith("sqlite"):
        _private_database_file(database_url)
    command.upgrade(alembic_config(database_url), revision)
