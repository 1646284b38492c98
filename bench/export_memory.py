"""Export memory stays flat as the dataset grows.

Fills a SQLite database with N synthetic submitted turns (30 per conversation, every turn rated by the
next one) using bulk inserts, then runs ``export_dataset`` on it in a fresh process and reads that
process's peak RSS; a second fresh process repeats the export under tracemalloc for the peak Python heap.
Done at each size, the peaks should not grow with N.

    python -m bench.export_memory                      # 10,000 and 1,000,000 turns
    python -m bench.export_memory --turns 10000,200000 # other sizes
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

from turkflow.dataset.export import CHECK_EVERY

TURNS_PER_CONVERSATION = 30
WORKERS_PER_ROLE = 200
CHUNK = 20_000

STUDENT_LINES = [
    ("request_items", "Hi! What do I need for this one?"),
    ("request_step", "Done with that. What should I do next?"),
    ("question_step", "How long should I let it rest before step {n}?"),
    ("question_items", "Can I use olive oil instead of butter in step {n}?"),
]
TEACHER_LINES = [
    ("return_items", "You will need flour, two eggs, milk and a pinch of salt."),
    ("return_step", "Step {n}: heat the pan over medium heat and brush it with a little butter."),
    ("answer_document", "About {n} minutes; the batter should thicken slightly."),
    ("answer_external", "Yes, olive oil works, but the taste is stronger; use a light one."),
]


def populate(database_url: str, turns: int, seed: int = 7) -> dict[str, Any]:
    """Bulk-insert a finished batch with ``turns`` submitted, rated turns; returns what was written."""
    from sqlalchemy import insert
    from sqlmodel import select

    from turkflow.db import get_engine, session_scope, upgrade
    from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
    from turkflow.models import Batch, Conversation, Rating, Task, Turn, Worker

    started = time.perf_counter()
    upgrade(database_url)
    with session_scope(database_url) as session:
        load_documents(session, read_documents(sample_tasks_path()))
        task_ids = list(session.exec(select(Task.id).order_by(Task.id)))
        batch = Batch(name="bench", status="completed")
        session.add(batch)
        session.flush()
        batch_id = batch.id
    rng = random.Random(seed)
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    engine = get_engine(database_url)
    with engine.begin() as conn:
        conn.execute(insert(Worker.__table__), [
            {"id": i + 1, "external_id": f"A{i + 1:013d}", "role": "student" if i < WORKERS_PER_ROLE else "teacher",
             "status": "active", "onboarded": True, "window_after_rating_id": 0, "created_at": t0}
            for i in range(2 * WORKERS_PER_ROLE)
        ])
    conversations = -(-turns // TURNS_PER_CONVERSATION)
    for chunk in _chunks(_rows(turns, conversations, batch_id, task_ids, rng, t0), CHUNK):
        with engine.begin() as conn:
            for table, rows in ((Conversation, chunk["conversation"]), (Turn, chunk["turn"]),
                                (Rating, chunk["rating"])):
                if rows:
                    conn.execute(insert(table.__table__), rows)
    return {"turns": turns, "conversations": conversations, "seconds": time.perf_counter() - started}


def _rows(turns: int, conversations: int, batch_id: int, task_ids: list[int], rng: random.Random,
          t0: datetime) -> Iterator[tuple[str, dict[str, Any]]]:
    turn_id = rating_id = 0
    for c in range(1, conversations + 1):
        length = min(TURNS_PER_CONVERSATION, turns - (c - 1) * TURNS_PER_CONVERSATION)
        at = t0 + timedelta(minutes=c)
        yield "conversation", {"id": c, "batch_id": batch_id, "task_id": task_ids[c % len(task_ids)],
                               "status": "completed", "end_reason": "max_turns", "turn_count": length,
                               "created_at": at, "updated_at": at, "completed_at": at}
        authors = []
        for index in range(length):
            turn_id += 1
            student = index % 2 == 0
            label, line = rng.choice(STUDENT_LINES if student else TEACHER_LINES)
            text = line.format(n=rng.randint(1, 9))
            author = rng.randint(1, WORKERS_PER_ROLE) + (0 if student else WORKERS_PER_ROLE)
            authors.append(author)
            ratings = {} if index == 0 else {"relevant": True, "useful": rng.random() > 0.1}
            answers = (
                {**ratings, "intent": label, "response": text, **({"danger": [], "real_life": "I get the pan."}
                                                                   if index else {})}
                if student else
                {**ratings, "action": label, "urls": [], "shared": ["step-1"] if label == "return_step" else [],
                 "response": text}
            )
            yield "turn", {"id": turn_id, "conversation_id": c, "index": index, "role": "student" if student
                           else "teacher", "status": "submitted", "worker_id": author, "text": text, "label": label,
                           "answers": answers, "flags": [], "signals": {}, "opened_at": at, "submitted_at": at}
            if index:
                rating_id += 1
                yield "rating", {"id": rating_id, "rated_turn_id": turn_id - 1, "rater_turn_id": turn_id,
                                 "author_id": authors[index - 1], "rater_id": author, "relevant": True,
                                 "useful": answers["useful"], "created_at": at}


def _chunks(rows: Iterator[tuple[str, dict[str, Any]]], size: int) -> Iterator[dict[str, list]]:
    chunk: dict[str, list] = {"conversation": [], "turn": [], "rating": []}
    for table, row in rows:
        chunk[table].append(row)
        if table == "turn" and len(chunk["turn"]) >= size:
            yield chunk
            chunk = {"conversation": [], "turn": [], "rating": []}
    yield chunk


def _memory_mib(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process. Not getrusage's ru_maxrss: a child inherits its
    parent's peak at fork, and the parent has just bulk-inserted a million rows."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}; this benchmark needs Linux")


def measure(database_url: str, out_dir: Path, trace: bool, check_every: int) -> dict[str, Any]:
    """Runs in a fresh process: export once and report time and memory."""
    from turkflow.db import session_scope
    from turkflow.dataset.export import iter_conversations, write_export

    gc.collect()
    rss_before = _memory_mib("VmRSS")
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    with session_scope(database_url) as session:
        summary = write_export(iter_conversations(session, "bench-key"), out_dir, check_every=check_every)
    seconds = time.perf_counter() - started
    result = {"conversations": summary.conversations, "turns": summary.turns, "seconds": seconds,
              "rss_before_mib": rss_before, "rss_peak_mib": _memory_mib("VmHWM")}
    if trace:
        result["heap_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
    return result


def _child(database_url: str, out_dir: Path, trace: bool = False, check_every: int = CHECK_EVERY) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench.export_memory", "--child", database_url, str(out_dir),
            "--check-every", str(check_every)]
    done = subprocess.run(args + (["--trace"] if trace else []), capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    shutil.rmtree(out_dir)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.export_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="10000,1000000", help="comma-separated dataset sizes in turns")
    parser.add_argument("--child", nargs=2, metavar=("DATABASE_URL", "OUT_DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check-every", type=int, default=CHECK_EVERY, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], Path(args.child[1]), args.trace, args.check_every)))
        return

    print("export memory: turns | generate s | export s | turns/s | RSS before -> peak MiB | peak heap MiB")
    rows = []
    sizes = [int(n) for n in args.turns.split(",")]
    for turns in sizes:
        work = Path(tempfile.mkdtemp(prefix="turkflow-bench-export-"))
        try:
            url = f"sqlite:///{work / 'bench.db'}"
            generated = populate(url, turns)
            plain = _child(url, work / "export")
            traced = _child(url, work / "export", trace=True)
            every = _child(url, work / "export", check_every=1) if turns == sizes[0] else None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        assert plain["turns"] == turns, plain
        rows.append({"turns": turns, "generate_seconds": generated["seconds"], **plain,
                     "heap_peak_mib": traced["heap_peak_mib"]})
        print(f"  {turns:>9,} | {generated['seconds']:8.1f} | {plain['seconds']:8.1f} | "
              f"{turns / plain['seconds']:7,.0f} | {plain['rss_before_mib']:6.1f} -> {plain['rss_peak_mib']:6.1f} | "
              f"{traced['heap_peak_mib']:6.1f}", flush=True)
        if every is not None:
            print(f"  {turns:>9,} turns with every document validated against the schema: {every['seconds']:.1f}s "
                  f"({every['seconds'] / plain['seconds']:.1f}x the time of one in {CHECK_EVERY})", flush=True)
            rows[-1]["seconds_validating_every_document"] = every["seconds"]
    growth = rows[-1]["rss_peak_mib"] - rows[0]["rss_peak_mib"]
    print(f"peak RSS grows {growth:+.1f} MiB from {rows[0]['turns']:,} to {rows[-1]['turns']:,} turns "
          f"({rows[-1]['turns'] // rows[0]['turns']}x the data)")
    print(json.dumps({"bench": "export_memory", "results": rows}))


if __name__ == "__main__":
    main()
