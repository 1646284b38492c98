"""Per-submission cost stays flat as the stored history grows (target: 1M turns within 1.3x of 1k).

For each size, builds a database holding that many turns of history (``bench._history``: turns, ratings,
HITs, assignments, quality decisions, events), launches a fresh batch on top and has the history's own
veteran workers (thousands of turns each at 1M; 10 per role, each with a full quality window after the
warm-up at every size, so both sizes do the same work) work it, timing each submission's parts as the system
runs them: ``take_turn`` (one transaction, the queue's Take button), ``submit_turn`` (one transaction,
the turn page's submit) and ``after_submission`` (the Celery tasks: open the next turn, judge the rating,
check the content). The databases are worked in alternating chunks, so a busy moment on this shared
machine hits every size alike; the first submissions warm caches and the spaCy model and are not counted.

    python -m bench.submission_cost                                 # 1k and 1M turns, SQLite and PostgreSQL
    python -m bench.submission_cost --turns 1000,100000 --backends sqlite
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

from bench._cpu import load
from bench._history import build, fresh_database, veteran_workers

WARMUP = 100
CONVERSATIONS = 40
TIMED_WORKERS = 10  # per role: after the warm-up each has a full quality window at every size
CHUNKS = 8
TARGET = 1.3

STUDENT = {"relevant": "yes", "useful": "yes", "real_life": "I would get the pan out.", "intent": "request_step"}
TEACHER = {"relevant": "yes", "useful": "yes", "action": "return_step"}
LINES = ("What should I do after the batter has rested for a while?",
         "Heat the pan over medium heat and brush it with a little butter first.",
         "How will I know when the pancakes are ready to flip over?",
         "Wait until bubbles pop on the surface, then flip them carefully.")


class Workload:
    """A fresh batch on top of whatever the database holds, worked one submission at a time."""

    def __init__(self, database_url: str, seed: int = 3):
        from sqlmodel import select

        from turkflow.config import Settings
        from turkflow.db import session_scope
        from turkflow.hits import lifecycle, registry
        from turkflow.models import Task

        self.database_url = database_url
        self.work = Path(tempfile.mkdtemp(prefix="turkflow-bench-submit-"))
        self.settings = Settings(data_dir=self.work, database_url=database_url, secret_key="bench",
                                 worker_hash_key="bench")
        self.providers = registry.providers(self.settings)
        with session_scope(database_url) as session:
            tasks = list(session.exec(select(Task).order_by(Task.id)))
            _, hits = lifecycle.launch_batch(session, tasks, CONVERSATIONS, name="timed", max_turns=10_000)
            for hit in hits:
                lifecycle.publish_hit(session, self.providers.get("local"), hit.id)
            self.open_hits = [hit.id for hit in hits]
        self.rng = random.Random(seed)
        self.times: dict[str, list[float]] = {"take": [], "submit": [], "after": []}

    def run(self, submissions: int, count: bool = True) -> None:
        for _ in range(submissions):
            self._submission(self.open_hits.pop(0), count)

    def _submission(self, hit_id: int, count: bool) -> None:
        from turkflow import pipeline
        from turkflow.db import session_scope
        from turkflow.hits import lifecycle
        from turkflow.models import Hit, HitStatus, Worker, WorkerStatus

        def timed(part: str, call: Callable[[], Any]) -> Any:
            started = time.perf_counter()
            result = call()
            if count:
                self.times[part].append(time.perf_counter() - started)
            return result

        with session_scope(self.database_url) as session:
            hit = session.get(Hit, hit_id)
            active = [w for w in veteran_workers(hit.role)[:TIMED_WORKERS]
                      if session.get(Worker, w).status == WorkerStatus.active]
            worker = session.get(Worker, self.rng.choice(active))
        with session_scope(self.database_url) as session:
            assignment = timed("take", lambda: lifecycle.take_turn(session, worker, hit_id, 900))
        answers = dict(STUDENT if worker.role == "student" else TEACHER, response=self.rng.choice(LINES))
        with session_scope(self.database_url) as session:
            turn_id = timed("submit", lambda: lifecycle.submit_turn(
                session, assignment.external_id, worker, answers)).turn.id
        opened = timed("after", lambda: pipeline.after_submission(self.settings, self.providers, turn_id))
        with session_scope(self.database_url) as session:
            assert session.get(Hit, opened.opened_hit_id).status == HitStatus.open
        self.open_hits.append(opened.opened_hit_id)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def summary(times: dict[str, list[float]]) -> dict[str, float]:
    total = [sum(parts) for parts in zip(*times.values())]
    row = {f"{part}_ms": statistics.median(values) * 1000 for part, values in times.items()}
    row["total_ms"] = statistics.median(total) * 1000
    row["total_p95_ms"] = sorted(total)[int(0.95 * len(total))] * 1000
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.submission_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1000,1000000", help="comma-separated history sizes in turns")
    parser.add_argument("--backends", default="sqlite,postgresql", help="sqlite, postgresql or both")
    parser.add_argument("--submissions", type=int, default=400, help="timed submissions per size")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.turns.split(",")]
    print(f"submission cost: median ms per part of a submission, {args.submissions} timed per size; {load()}")
    print("  backend    | history turns | build s | take | submit | after_submission | total median | total p95")
    for backend in args.backends.split(","):
        with ExitStack() as stack:
            workloads, built = {}, {}
            for turns in sizes:
                url = stack.enter_context(fresh_database(backend))
                built[turns] = build(url, turns)
                workloads[turns] = Workload(url)
                stack.callback(workloads[turns].close)
            for workload in workloads.values():
                workload.run(WARMUP, count=False)
            for _ in range(CHUNKS):
                for workload in workloads.values():
                    workload.run(args.submissions // CHUNKS)
            rows = {turns: summary(workload.times) for turns, workload in workloads.items()}
        for turns, row in rows.items():
            print(f"  {backend:10} | {turns:>13,} | {built[turns]['seconds']:7.1f} | {row['take_ms']:4.1f} | "
                  f"{row['submit_ms']:6.1f} | {row['after_ms']:16.1f} | {row['total_ms']:12.1f} | "
                  f"{row['total_p95_ms']:9.1f}", flush=True)
        ratio = rows[sizes[-1]]["total_ms"] / rows[sizes[0]]["total_ms"]
        print(f"  {backend}: per-submission cost at {sizes[-1]:,} / at {sizes[0]:,} turns = {ratio:.2f}x "
              f"(target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'}); {load()}", flush=True)


if __name__ == "__main__":
    main()
