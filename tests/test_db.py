"""Transactions mean the same on SQLite and PostgreSQL: what a savepoint writes is part of the outer
transaction, invisible to others until it commits, and gone with it if it rolls back."""

import stat
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import event, func
from sqlmodel import Session, select

from turkflow.config import Settings
from turkflow.db import get_engine, savepoint, session_scope, upgrade
from turkflow.models import Event


def _events(database_url: str) -> int:
    with session_scope(database_url) as other:
        return other.exec(select(func.count()).select_from(Event)).one()


def test_a_savepoint_before_any_write_commits_only_with_its_transaction(database_url):
    with Session(get_engine(database_url)) as session:
        session.exec(select(Event)).all()  # reads only: pysqlite has no transaction open yet
        with savepoint(session):
            session.add(Event(kind="decided", actor="system"))
            session.flush()
        assert _events(database_url) == 0  # another connection cannot see it yet
        session.add(Event(kind="blocked", actor="system"))
        session.commit()
    assert _events(database_url) == 2


def test_a_crash_after_a_savepoint_leaves_nothing_of_the_transaction(database_url):
    with pytest.raises(RuntimeError):
        with session_scope(database_url) as session:
            with savepoint(session):
                session.add(Event(kind="decided", actor="system"))
                session.flush()
            raise RuntimeError("the process died before the block was stored")
    assert _events(database_url) == 0


def test_the_data_directory_and_the_database_files_are_created_readable_by_their_owner_only(tmp_path):
    """The secrets in the data directory were 0600 but the database beside them, every turn and worker id in
    it, was 0644 (issue 35): the directory is made 0700 and the database, its journal and its lock 0600."""
    data_dir = tmp_path / "var"
    settings = Settings(data_dir=data_dir)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    upgrade(settings.database_url)
    with session_scope(settings.database_url) as s:
        s.add(Event(kind="written", actor="test", data={}))
    files = [p for p in data_dir.iterdir() if p.name.startswith("turkflow.db")]
    assert {p.name for p in files} >= {"turkflow.db", "turkflow.db-wal"}
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o600 for p in files}
    elsewhere = tmp_path / "deeper" / "still" / "turkflow.db"  # a database URL whose folders do not exist yet
    upgrade(f"sqlite:///{elsewhere}")
    assert stat.S_IMODE(elsewhere.parent.stat().st_mode) == 0o700 and stat.S_IMODE(elsewhere.stat().st_mode) == 0o600


def test_a_burst_of_threads_reuses_the_connections_the_last_burst_opened(database_url):
    """The agents worker's threads store answers in bursts: a connection opened for one burst is kept for the
    next, not closed on return and opened again (on PostgreSQL each a new server process)."""
    threads = 24
    opened = []
    event.listen(get_engine(database_url), "connect", lambda *_: opened.append(1))

    def burst() -> int:
        before = len(opened)
        together = threading.Barrier(threads, timeout=60)

        def read() -> None:
            with session_scope(database_url) as session:
                session.exec(select(func.count()).select_from(Event)).one()  # holds its connection
                together.wait()

        with ThreadPoolExecutor(threads) as pool:
            for done in [pool.submit(read) for _ in range(threads)]:
                done.result()
        return len(opened) - before

    burst()
    assert burst() == 0
