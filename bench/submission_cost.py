"""Per-submission cost stays flat as the stored history grows (target: 1M turns within 1.3x of 1k).

For each size, builds a database holding that many turns of history (``bench._history``: turns, ratings,
HITs, assignments, quality decisions, events), launches a fresh batch on top and has the history's own
veteran workers (thousands of turns each at 1M) work it, timing each submission's three parts as the
system runs them: ``take_turn`` (one transaction, the queue's Take button), ``submit_turn`` (one
transaction, the turn page's submit) and ``after_submission`` (the Celery task: open the next turn, judge
the rating, check the content). The first submissions warm caches and the spaCy model and are not counted.

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
from pathlib import Path
from typing import Any, Callable

from bench._history import build, fresh_database, veteran_workers

WARMUP = 40
CONVERSATIONS = 40
TARGET = 1.3

STUDENT = {"relevant": "yes", "useful": "yes", "real_life": "I would get the pan out.", "intent": "request_step"}
TEACHER = {"relevant": "yes", "useful": "yes", "action": "return_step"}
LINES = ("What should I do after the batter has rested for a while?",
         "Heat the pan over medium heat and brush it with a little butter first.",
         "How will I know when the pancakes are ready to flip over?",
         "Wait until bubbles pop on the surface, then flip them carefully.")


def measure(database_url: str, submissions: int, seed: int = 3) -> dict[str, list[float]]:
    """Work a fresh batch on top of whatever the database holds; seconds per part of each submission."""
    from sqlmodel import select

    from turkflow import pipeline
    from turkflow.config import Settings
    from turkflow.db import session_scope
    from turkflow.hits import lifecycle
    from turkflow.hits.provider import Providers
    from turkflow.models import Hit, HitStatus, Task, Turn, Worker, WorkerStatus

    work = Path(tempfile.mkdtemp(prefix="turkflow-bench-submit-"))
    settings = Settings(data_dir=work, database_url=database_url, secret_key="bench", worker_hash_key="bench")
    providers = Providers(settings)
    with session_scope(database_url) as session:
        tasks = list(session.exec(select(Task).order_by(Task.id)))
        _, hits = lifecycle.launch_batch(session, tasks, CONVERSATIONS, name="timed", max_turns=10_000)
        for hit in hits:
            lifecycle.publish_hit(session, providers.get("local"), hit.id)
        open_hits = [hit.id for hit in hits]
    rng = random.Random(seed)
    times: dict[str, list[float]] = {"take": [], "submit": [], "after": []}

    def timed(part: str, call: Callable[[], Any], count: bool) -> Any:
        started = time.perf_counter()
        result = call()
        if count:
            times[part].append(time.perf_counter() - started)
        return result

    done = 0
    while done < submissions + WARMUP:
        next_hits = []
        for hit_id in open_hits:
            count = done >= WARMUP
            with session_scope(database_url) as session:
                hit = session.get(Hit, hit_id)
                active = [w for w in veteran_workers(hit.role)
                          if session.get(Worker, w).status == WorkerStatus.active]
                worker = session.get(Worker, rng.choice(active))
            with session_scope(database_url) as session:
                assignment = timed("take", lambda: lifecycle.take_turn(session, worker, hit_id, 900), count)
            answers = dict(STUDENT if worker.role == "student" else TEACHER, response=rng.choice(LINES))
            with session_scope(database_url) as session:
                turn_id = timed("submit", lambda: lifecycle.submit_turn(
                    session, assignment.external_id, worker, answers), count).turn.id
            opened = timed("after", lambda: pipeline.after_submission(settings, providers, turn_id), count)
            next_hits.append(opened.opened_hit_id)
            done += 1
        open_hits = [h for h in next_hits if h is not None]
        with session_scope(database_url) as session:
            assert all(session.get(Hit, h).status == HitStatus.open for h in open_hits)
            assert session.get(Turn, turn_id).status == "submitted"
    shutil.rmtree(work, ignore_errors=True)
    return times


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
    print("submission cost: backend | history turns | build s | take | submit | after_submission | "
          "total median | total p95  (ms)")
    for backend in args.backends.split(","):
        rows = []
        for turns in sizes:
            with fresh_database(backend) as url:
                built = build(url, turns)
                row = summary(measure(url, args.submissions))
            rows.append(row)
            print(f"  {backend:10} | {turns:>9,} | {built['seconds']:7.1f} | {row['take_ms']:5.1f} | "
                  f"{row['submit_ms']:6.1f} | {row['after_ms']:16.1f} | {row['total_ms']:12.1f} | "
                  f"{row['total_p95_ms']:9.1f}", flush=True)
        ratio = rows[-1]["total_ms"] / rows[0]["total_ms"]
        print(f"  {backend}: per-submission cost at {sizes[-1]:,} / at {sizes[0]:,} turns = {ratio:.2f}x "
              f"(target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'})", flush=True)


if __name__ == "__main__":
    main()
