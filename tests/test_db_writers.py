"""Many writers on one database, as the web server's threads and processes and the Celery workers are: each
one's transaction is stored once, none is refused for a busy database, and a write the database refuses,
or one that fails half-way, holds no later writer back."""

import fcntl
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlmodel import select

from turkflow.db import dispose_engine, session_scope
from turkflow.errors import ServiceUnavailable
from turkflow.models import Event

ROOT = Path(__file__).resolve().parents[1]
THREADS, TRANSACTIONS = 6, 15

# One writer process: THREADS threads, each TRANSACTIONS transactions that read, then insert and update an
# event, as a submit reads the turn before storing it. Prints what failed, one line each.
WRITER = """
import sys, threading
from sqlmodel import func, select
from turkflow.db import session_scope
from turkflow.models import Event

url, name, threads, transactions = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def write(thread):
    for n in range(transactions):
        try:
            with session_scope(url) as session:
                session.exec(select(func.count()).select_from(Event)).one()
                event = Event(kind="stored", actor=f"{name}-{thread}-{n}", data={})
                session.add(event)
                session.flush()
                event.data = {"seen": True}
                session.add(event)
        except Exception as error:
            print(f"{name}-{thread}-{n}: {type(error).__name__}: {error}", flush=True)

workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
"""


def _writer(database_url: str, name: str) -> subprocess.Popen:
    command = [sys.executable, "-c", WRITER, database_url, name, str(THREADS), str(TRANSACTIONS)]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stored(database_url: str) -> list[tuple[str, dict]]:
    with session_scope(database_url) as session:
        return [(e.actor, e.data) for e in session.exec(select(Event).where(Event.kind == "stored")).all()]


@pytest.mark.both_backends
def test_writers_in_threads_of_several_processes_each_store_their_transaction_once(database_url):
    writers = [_writer(database_url, name) for name in ("web-1", "web-2", "celery")]
    failures = [line for writer in writers for line in writer.communicate(timeout=600)[0].splitlines()]
    assert failures == []  # none refused ("database is locked") nor failed otherwise
    stored = _stored(database_url)
    expected = {f"{name}-{t}-{n}" for name in ("web-1", "web-2", "celery") for t in range(THREADS)
                for n in range(TRANSACTIONS)}
    assert sorted(actor for actor, _ in stored) == sorted(expected)  # each once
    assert all(data == {"seen": True} for _, data in stored)  # and whole


def _other_process_can_write(database_url: str) -> bool:
    """Whether a writer of another process would go at once: no writer of this one holds the database."""
    path = make_url(database_url).database
    with open(f"{path}-writers", "a") as queue:
        try:
            fcntl.flock(queue, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(queue, fcntl.LOCK_UN)
        return True


def test_a_writer_holds_the_others_back_only_until_its_transaction_ends(sqlite_url):
    database_url = sqlite_url
    with session_scope(database_url) as session:
        session.add(Event(kind="stored", actor="first", data={}))
        session.flush()
        assert not _other_process_can_write(database_url)  # the others wait for this one
    assert _other_process_can_write(database_url)

    with pytest.raises(RuntimeError):
        with session_scope(database_url) as session:
            session.add(Event(kind="stored", actor="failed half-way", data={}))
            session.flush()
            raise RuntimeError("the request failed after its first write")
    assert _other_process_can_write(database_url)
    assert [actor for actor, _ in _stored(database_url)] == ["first"]


def test_a_write_a_read_only_database_refuses_holds_no_writer_back(sqlite_url):
    database_url = sqlite_url
    read_only = f"sqlite:///file:{make_url(database_url).database}?mode=ro&uri=true"
    try:
        for _ in range(2):
            with pytest.raises(ServiceUnavailable):
                with session_scope(read_only) as session:
                    session.add(Event(kind="stored", actor="refused", data={}))
            assert _other_process_can_write(database_url)
    finally:
        dispose_engine(read_only)
    done = []
    writer = threading.Thread(target=lambda: done.append(_store(database_url, "after")))
    writer.start()
    writer.join()
    assert done == ["after"] and [actor for actor, _ in _stored(database_url)] == ["after"]


def _store(database_url: str, actor: str) -> str:
    with session_scope(database_url) as session:
        session.add(Event(kind="stored", actor=actor, data={}))
    return actor
