"""A database with a long history, built fast, for benchmarks that must show costs do not grow with it.

``bench.export_memory.populate`` bulk-inserts a finished batch (conversations, submitted turns and their
ratings, 400 workers); this adds, with ``INSERT ... SELECT`` on the database itself, everything else a
real history holds for those turns: one submitted HIT and its assignment per turn, one quality decision
per rating, who wrote in the batch, and the event log (opened, published, taken, submitted, judged). Works
on SQLite and PostgreSQL.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.export_memory import WORKERS_PER_ROLE, populate

EVENTS = (
    ("turn_opened", "'system'", "t.opened_at"),
    ("hit_published", "'provider'", "t.opened_at"),
    ("turn_taken", "'worker:' || t.worker_id", "t.opened_at"),
    ("turn_submitted", "'worker:' || t.worker_id", "t.submitted_at"),
)

FILL = [
    "INSERT INTO hit (id, turn_id, attempt, provider, external_id, role, status, created_at) "
    "SELECT id, id, 1, 'local', 'local-' || id, role, 'submitted', opened_at FROM turn",
    "INSERT INTO assignment (id, hit_id, worker_id, external_id, status, accepted_at, submitted_at) "
    "SELECT id, id, worker_id, 'Lhistory' || id, 'submitted', opened_at, submitted_at FROM turn",
    "INSERT INTO qualitydecision (id, worker_id, rating_id, outcome, mean_relevance, mean_usefulness, \"window\", "
    "created_at) SELECT id, author_id, id, 'none', 1.0, 0.8, '[]', created_at FROM rating",
    *(f"INSERT INTO event (at, kind, actor, batch_id, conversation_id, turn_id, worker_id, data) "
      f"SELECT {at}, '{kind}', {actor}, c.batch_id, t.conversation_id, t.id, t.worker_id, '{{}}' "
      f"FROM turn t JOIN conversation c ON c.id = t.conversation_id" for kind, actor, at in EVENTS),
    "INSERT INTO batchworker (batch_id, worker_id) SELECT DISTINCT c.batch_id, t.worker_id "
    "FROM turn t JOIN conversation c ON c.id = t.conversation_id WHERE t.worker_id IS NOT NULL",
    "INSERT INTO event (at, kind, actor, batch_id, conversation_id, turn_id, worker_id, data) "
    "SELECT r.created_at, 'quality_decision', 'system', c.batch_id, t.conversation_id, t.id, r.author_id, '{}' "
    "FROM rating r JOIN turn t ON t.id = r.rated_turn_id JOIN conversation c ON c.id = t.conversation_id",
]

TABLES = ("worker", "conversation", "turn", "rating", "hit", "assignment", "qualitydecision", "event")


def build(database_url: str, turns: int) -> dict[str, Any]:
    """Migrate and fill ``database_url`` with ``turns`` turns of history; returns row counts and seconds."""
    from turkflow.db import get_engine

    started = time.perf_counter()
    populate(database_url, turns)
    engine = get_engine(database_url)
    with engine.begin() as conn:
        for statement in FILL:
            conn.execute(text(statement))
        if engine.dialect.name == "postgresql":
            for table in TABLES:  # explicit ids were inserted: move each sequence past them
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT COALESCE(MAX(id), 0) + 1 FROM {table}), false)"))
            conn.execute(text("ANALYZE"))
        else:
            conn.execute(text("ANALYZE"))
    with engine.connect() as conn:
        counts = {table: conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one() for table in TABLES}
    return {"rows": counts, "seconds": round(time.perf_counter() - started, 1)}


def veteran_workers(role: str) -> range:
    """Ids of the history's workers of a role (200 each), who carry thousands of turns each at 1M."""
    return range(1, WORKERS_PER_ROLE + 1) if role == "student" else range(WORKERS_PER_ROLE + 1, 2 * WORKERS_PER_ROLE + 1)


class fresh_database:
    """A fresh database of one backend, removed afterwards (PostgreSQL: a throwaway cluster)."""

    def __init__(self, backend: str):
        if backend not in ("sqlite", "postgresql"):
            raise SystemExit(f"error: unknown backend {backend!r}; use sqlite or postgresql")
        self.backend = backend

    def __enter__(self) -> str:
        from turkflow.simulator.stack import PostgresCluster

        self.work = Path(tempfile.mkdtemp(prefix="turkflow-bench-"))
        self.cluster = None
        if self.backend == "sqlite":
            self.url = f"sqlite:///{self.work / 'bench.db'}"
            return self.url
        self.cluster = PostgresCluster()
        self.cluster.start()
        self.url = self.cluster.create_database("bench")
        return self.url

    def __exit__(self, *exc: object) -> None:
        from turkflow.db import dispose_engine

        dispose_engine(self.url)
        if self.cluster is not None:
            self.cluster.stop()
        shutil.rmtree(self.work, ignore_errors=True)
