"""Where the Celery worker's CPU per turn goes: its own machinery, the opening, the review, the logging.

Submitted turns are made in this process (``take_turn`` and ``submit_turn``, as the web's take and submit do,
by a few veteran workers of a small history, at ``--rate`` turns a second, each followed by the
``turn_submitted`` message the submit queues) against a real Celery worker in its own process (every queue,
no beat), on its own redis-server; the batch judges with the ``none`` policy and the default bonus, as
``bench capacity`` does. The worker runs with this module as its app (``celery -A bench.celery_cost``: the
project's app, plus signal handlers that add up each task's CPU in the process that runs it), so each phase
splits the worker's CPU per turn into:

- outside the task bodies: Celery's and kombu's own work (the main process's consumer, the prefork pool's
  messages to and from its children, the acknowledgements, Celery's log lines; in brackets, the main
  process's share), and a few tens of microseconds a task of this bench's own bookkeeping;
- the opening: ``pipeline.open_after`` inside the turns task, and the rest of that task (queueing the review,
  its log line);
- the review: ``pipeline.review_waiting`` inside the review task, and the rest of that task; how many turns
  a review took, and how many times a turn's content was checked (more than once if two reviews took the
  same waiting turns);
- the other tasks (bonus payments through a platform: none for the local crowd).

Each phase starts a worker afresh, as ``--variants`` says (its log level and pool), after a warm-up that
fills the crowd's quality windows; phases alternate ``--repeat`` times, so a variant's cost is a difference
within one run. The load average is printed beside every phase.

    python -m bench celery_cost
    python -m bench celery_cost --backend postgresql --turns 600 --variants INFO:prefork,WARNING:prefork --repeat 2
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

from bench._cpu import load
from bench._data import SGD_DEV

# ---- inside the worker: the app, and each task's CPU added up by its child process -------------------------

_SPLIT_DIR = "BENCH_CELERY_COST_DIR"
_PROFILE = "BENCH_CELERY_COST_PROFILE"


def _install_split(out: Path) -> None:
    """Signal handlers and wrappers that add up, in each child, the CPU of every task body and of the pipeline
    functions inside them; written after every task to ``out/<pid>.json`` (a few tens of microseconds)."""
    from celery.signals import task_postrun, task_prerun

    from turkflow import pipeline
    from turkflow.quality import checks

    totals: dict[str, list[float]] = {}
    started: dict[str, float] = {}
    profiles: dict[str, cProfile.Profile] = {}

    def add(name: str, seconds: float) -> None:
        entry = totals.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        profile = cProfile.Profile(time.thread_time) if os.environ.get(_PROFILE) else None
        if profile is not None:
            profiles[name] = profile

        def run(*args: Any, **kwargs: Any) -> Any:
            begun = time.thread_time()
            result = None
            try:
                result = profile.runcall(function, *args, **kwargs) if profile else function(*args, **kwargs)
                return result
            finally:
                add(name, time.thread_time() - begun)
                if hasattr(result, "turns"):  # a review: how many turns it reviewed (claimed)
                    add("turns reviewed", len(result.turns))
        return run

    for name in ("open_after", "review_waiting"):
        if hasattr(pipeline, name):
            setattr(pipeline, name, timed(f"pipeline.{name}", getattr(pipeline, name)))
    if hasattr(checks, "turn_flags"):  # how many turns the reviews checked: more than they reviewed when two
        checked = checks.turn_flags     # reviews took the same waiting turns at once

        def counted(*args: Any, **kwargs: Any) -> Any:
            add("turns checked", 0.0)
            return checked(*args, **kwargs)
        checks.turn_flags = counted

    @task_prerun.connect(weak=False)
    def _begin(task_id: str, **_: Any) -> None:
        started[task_id] = time.thread_time()

    @task_postrun.connect(weak=False)
    def _end(task_id: str, task: Any, **_: Any) -> None:
        begun = started.pop(task_id, None)
        if begun is not None:
            add(task.name, time.thread_time() - begun)
        (out / f"{os.getpid()}.json").write_text(json.dumps(totals))
        for name, profile in profiles.items():
            profile.dump_stats(out / f"{os.getpid()}-{name}.prof")


if os.environ.get(_SPLIT_DIR):
    from turkflow.workers.app import celery_app  # noqa: F401 - ``celery -A bench.celery_cost`` finds it here

    _install_split(Path(os.environ[_SPLIT_DIR]))


# ---- the driver ---------------------------------------------------------------------------------------------

WORKERS_PER_ROLE = 20
STUDENT = {"relevant": "yes", "useful": "yes", "real_life": "I would get the pan out.", "intent": "request_step"}
TEACHER = {"relevant": "yes", "useful": "yes", "action": "return_step"}


class Crowd:
    """Submits turns in this process as the web does: a veteran worker of the role takes an open HIT and
    submits it; the ``turn_submitted`` message follows the commit."""

    def __init__(self, settings: Any, conversations: int, seed: int) -> None:
        from sqlalchemy import update
        from sqlmodel import col, select

        from bench._history import veteran_workers
        from turkflow.db import session_scope
        from turkflow.hits import lifecycle, registry
        from turkflow.models import Task, Turn
        from turkflow.quality.monitor import Policy
        from turkflow.simulator.utterances import read_dialogs
        from turkflow.config import default

        self.settings = settings
        providers = registry.providers(settings)
        policy = Policy.parse("none", bonus_above=default("bonus_above"), bonus_cents=default("bonus_cents"))
        with session_scope(settings.database_url) as session:
            # the history's turns were reviewed long ago: only this crowd's turns wait for a review
            session.execute(update(Turn).where(col(Turn.reviewed_at).is_(None))
                            .values(reviewed_at=Turn.submitted_at))
            tasks = list(session.exec(select(Task).order_by(Task.id)))
            batch, hits = lifecycle.launch_batch(session, tasks, conversations, name="celery-cost", max_turns=10_000,
                                                 quality=policy.batch_fields())
            for hit in hits:
                lifecycle.publish_hit(session, providers.get("local"), hit.id)
            self.batch_id = batch.id
        dialogs = read_dialogs(SGD_DEV)
        self.lines = {"student": [u for d in dialogs for u in d.user][:2000],
                      "teacher": [u for d in dialogs for u in d.system][:2000]}
        self.rng = random.Random(seed)
        self.taken: set[int] = set()
        self.turn_ids: list[int] = []
        # a few workers, so their quality windows fill soon: after the warm-up every rating is judged on a
        # full window, and the share of turns earning a bonus (a third of a review's work) no longer moves
        self._workers = {role: itertools.cycle(veteran_workers(role)[:WORKERS_PER_ROLE])
                         for role in ("student", "teacher")}

    def open_hits(self) -> list[tuple[int, str]]:
        from sqlmodel import select

        from turkflow.db import session_scope
        from turkflow.models import Conversation, Hit, HitStatus, Turn

        with session_scope(self.settings.database_url) as session:
            rows = session.exec(select(Hit.id, Hit.role).join(Turn, Turn.id == Hit.turn_id)
                                .join(Conversation, Conversation.id == Turn.conversation_id)
                                .where(Conversation.batch_id == self.batch_id, Hit.status == HitStatus.open)
                                .order_by(Hit.id)).all()
        return [(hit_id, role) for hit_id, role in rows if hit_id not in self.taken]

    def submit(self, hit_id: int, role: str, send: Callable[[int], None]) -> None:
        from turkflow.db import session_scope
        from turkflow.hits import lifecycle
        from turkflow.models import Worker, WorkerStatus

        self.taken.add(hit_id)
        with session_scope(self.settings.database_url) as session:
            for _ in range(200):
                worker = session.get(Worker, next(self._workers[role]))
                if worker.status == WorkerStatus.active:
                    break
            assignment = lifecycle.take_turn(session, worker, hit_id, 900)
        answers = dict(STUDENT if role == "student" else TEACHER, response=self.rng.choice(self.lines[role]))
        with session_scope(self.settings.database_url) as session:
            turn_id = lifecycle.submit_turn(session, assignment.external_id, worker, answers).turn.id
        self.turn_ids.append(turn_id)
        send(turn_id)

    def run(self, turns: int, rate: float, send: Callable[[int], None]) -> float:
        """``turns`` submissions at ``rate`` a second (as long as open HITs last); the seconds it took."""
        started = time.monotonic()
        done = 0
        while done < turns:
            hits = self.open_hits()
            if not hits:
                time.sleep(0.01)
                continue
            for hit_id, role in hits[:turns - done]:
                due = started + done / rate
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                self.submit(hit_id, role, send)
                done += 1
        return time.monotonic() - started

    def settled(self, turn_ids: list[int]) -> bool:
        """Every turn has its next turn open and its review done."""
        from sqlalchemy import func
        from sqlmodel import col, select

        from turkflow.db import session_scope
        from turkflow.models import Turn

        with session_scope(self.settings.database_url) as session:
            unreviewed = session.exec(select(func.count()).select_from(Turn).where(
                col(Turn.id).in_(turn_ids), col(Turn.reviewed_at).is_(None))).one()
            conversations = session.exec(select(Turn.conversation_id).where(col(Turn.id).in_(turn_ids))).all()
            open_after = session.exec(select(func.count(func.distinct(Turn.conversation_id))).where(
                col(Turn.conversation_id).in_(set(conversations)), Turn.status == "open")).one()
        return unreviewed == 0 and open_after == len(set(conversations))


def _tree_cpu(pid: int) -> tuple[float, float]:
    """(main process, its children) CPU seconds, user + system."""
    import psutil

    main = psutil.Process(pid)
    own = main.cpu_times()
    children = 0.0
    for child in main.children(recursive=True):
        try:
            times = child.cpu_times()
            children += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return own.user + own.system, children + own.children_user + own.children_system


def _split_totals(split: Path) -> dict[str, list[float]]:
    """Each task's (and pipeline function's) runs and CPU seconds so far, over every child."""
    totals: dict[str, list[float]] = {}
    for path in split.glob("*.json"):
        for name, (count, cpu) in json.loads(path.read_text()).items():
            entry = totals.setdefault(name, [0, 0.0])
            entry[0] += count
            entry[1] += cpu
    return totals


def phase(settings: Any, crowd: Crowd, variant: str, concurrency: int, turns: int, rate: float,
          work: Path, settle: float, profile: bool = False) -> dict[str, Any]:
    """One worker started afresh as ``variant`` says (``INFO:prefork``: its log level and pool); ``turns``
    submissions; its CPU per turn, split."""
    loglevel, pool = variant.split(":")
    from celery import Celery

    from turkflow.simulator.stack import settings_env, wait_for
    from turkflow.workers.app import configure
    from turkflow.workers.tasks import turn_submitted

    split = work / f"split-{loglevel}-{pool}-{time.monotonic_ns()}"
    split.mkdir()
    env = dict(settings_env(settings), **{_SPLIT_DIR: str(split)}, **({_PROFILE: "1"} if profile else {}))
    log = open(work / f"celery-{loglevel}-{pool}.log", "ab")  # noqa: SIM115 - closed below
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "bench.celery_cost", "worker", "--pool",
                               pool, "--concurrency", str(concurrency), "--loglevel", loglevel,
                               "--without-gossip", "--without-mingle"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        probe = Celery(broker=settings.redis_url)
        wait_for(lambda: bool(probe.control.ping(timeout=0.5)), "the Celery worker", 60, worker)
        configure(settings)
        # warm-up: the first review loads nothing (spaCy is loaded as the child starts) but fills caches
        warm = len(crowd.turn_ids)
        crowd.run(min(40, turns), rate, turn_submitted.delay)
        deadline = time.monotonic() + settle
        while not crowd.settled(crowd.turn_ids[warm:]) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)
        split_before = _split_totals(split)
        main_before, children_before = _tree_cpu(worker.pid)
        first = len(crowd.turn_ids)
        seconds = crowd.run(turns, rate, turn_submitted.delay)
        deadline = time.monotonic() + settle
        while not crowd.settled(crowd.turn_ids[first:]) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.5)  # the last review's task ends after its commit
        main_after, children_after = _tree_cpu(worker.pid)
        lost = not crowd.settled(crowd.turn_ids[first:])
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        log.close()
    totals = _split_totals(split)
    for name, (count, cpu) in split_before.items():
        totals[name][0] -= count
        totals[name][1] -= cpu
    n = turns
    per = {name: round(1000 * cpu / n, 2) for name, (count, cpu) in totals.items()}
    counts = {name: int(count) for name, (count, cpu) in totals.items()}
    bodies = sum(cpu for name, (count, cpu) in totals.items() if name.startswith("workers."))
    children = children_after - children_before
    return {
        "variant": variant, "turns": n, "seconds": round(seconds, 1), "lost": lost,
        "ms_per_turn": round(1000 * (main_after - main_before + children) / n, 2),
        "main_ms": round(1000 * (main_after - main_before) / n, 2),
        "outside_tasks_ms": round(1000 * (main_after - main_before + children - bodies) / n, 2),
        "tasks_ms": per, "tasks_run": counts, "load": load(),
    }


def _print_profiles(work: Path) -> None:
    import pstats

    for name in ("pipeline.open_after", "pipeline.review_waiting"):
        files = [str(path) for path in work.glob(f"split-*/*-{name}.prof")]
        if files:
            print(f"-- {name}, every child, cumulative", flush=True)
            pstats.Stats(*files).sort_stats("cumulative").print_stats(40)
        for path in work.glob(f"split-*/*-{name}.prof"):
            path.unlink()


def show(row: dict[str, Any]) -> None:
    tasks = row["tasks_ms"]
    turns_task = tasks.get("workers.tasks.turn_submitted", 0.0)
    review_task = tasks.get("workers.tasks.review_submission", 0.0)
    opening = tasks.get("pipeline.open_after", 0.0)
    review = tasks.get("pipeline.review_waiting", 0.0)
    others = sum(v for k, v in tasks.items() if k.startswith("workers.")
                 and k not in ("workers.tasks.turn_submitted", "workers.tasks.review_submission"))
    reviews = row["tasks_run"].get("workers.tasks.review_submission", 0)
    checked = row["tasks_run"].get("turns checked", 0)
    print(f"  {row['variant']:15} | {row['turns']:5} | {row['turns'] / max(row['seconds'], 0.1):5.1f} | "
          f"{row['ms_per_turn']:6.2f} | {row['outside_tasks_ms']:5.2f} ({row['main_ms']:5.2f}) | "
          f"{opening:5.2f} + {turns_task - opening:4.2f} | {review:5.2f} + {review_task - review:4.2f} "
          f"({row['turns'] / max(reviews, 1):4.1f} turns a review, {checked / max(row['turns'], 1):4.2f} checks a "
          f"turn) | {others:4.2f} | "
          f"{'LOST' if row['lost'] else 'ok'} | {row['load']}", flush=True)


def arguments(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench celery_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgresql"))
    parser.add_argument("--turns", type=int, default=400, help="submissions measured per phase")
    parser.add_argument("--rate", type=float, default=25, help="submissions a second")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--warm-up", type=int, default=300, help="turns before the first phase, not measured")
    parser.add_argument("--history", type=int, default=2000, help="turns of history stored before the batch")
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's prefork processes")
    parser.add_argument("--variants", default="INFO:prefork,WARNING:prefork",
                        help="the worker's log level and pool, one phase each, alternated")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--settle", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the opening and the review in the worker's children (slower; the profiles "
                             "are printed, the CPU numbers are inflated)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> None:
    from bench._history import build, fresh_database
    from turkflow.config import Settings
    from turkflow.simulator.stack import free_port, wait_for

    args = arguments(argv)
    print(f"celery_cost: {args.backend}, {args.turns} turns a phase at {args.rate:g}/s, {args.conversations} "
          f"conversations, worker prefork x {args.concurrency}, every queue, no beat; {load()}", flush=True)
    with fresh_database(args.backend) as url, tempfile.TemporaryDirectory(prefix="turkflow-bench-celery-") as tmp:
        work = Path(tmp)
        build(url, args.history)
        port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL,
                                 start_new_session=True)
        try:
            from redis import Redis

            redis_url = f"redis://127.0.0.1:{port}/0"
            wait_for(lambda: Redis.from_url(redis_url).ping(), "redis-server", 30, redis)
            settings = Settings(data_dir=work, database_url=url, redis_url=redis_url, secret_key="bench",
                                worker_hash_key="bench")
            crowd = Crowd(settings, args.conversations, args.seed)
            print("  variant         | turns | per s | Celery CPU ms per turn | outside task bodies (main process) | "
                  "opening + rest of its task | review + rest of its task | other tasks | settled | load",
                  flush=True)
            phase(settings, crowd, args.variants.split(",")[0], args.concurrency, args.warm_up, args.rate, work,
                  args.settle)  # not shown: the crowd's quality windows fill
            rows = []
            for _ in range(args.repeat):
                for variant in args.variants.split(","):
                    row = phase(settings, crowd, variant, args.concurrency, args.turns, args.rate, work, args.settle,
                                args.profile)
                    rows.append(row)
                    show(row)
                    if args.profile:
                        _print_profiles(work)
        finally:
            redis.terminate()
            redis.wait()
    from bench.e2e import OUT

    OUT.mkdir(exist_ok=True)
    (OUT / f"celery_cost-{args.backend}.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
