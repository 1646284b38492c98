"""Transactions mean the same on SQLite and PostgreSQL: what a savepoint writes is part of the outer
transaction, invisible to others until it commits, and gone with it if it rolls back."""

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from turkflow.db import get_engine, savepoint, session_scope
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
