"""Capacity: how much crowd one machine takes with the next turn open within 250 ms, SQLite and PostgreSQL.

An open-loop crowd, as people arrive: turns are started as a Poisson process at a set rate, whatever the
server's speed, and each simulated worker thinks between requests. A worker arrives at the queue page they
already have (the join's, or the one their last submit answered with), reads it (``--read`` seconds, drawn
uniformly from half to one and a half times the mean), takes the first turn nobody in the crowd took yet
(the take answers with the turn page), writes (``--write`` seconds, likewise) and submits; then they are
idle until an arrival picks them again. Every write goes through the pages; the launch and the invites are
the requester's, as in ``bench.e2e``.

After a warm-up at the first rate (``--warm-up`` seconds, not measured: the Celery worker loads spaCy at
its first review), the rate is stepped up (``--rates``), each step ``--seconds`` long, on one stack per
backend (gunicorn 3 x 4 threads, Celery 2 processes, its own Redis on a free port, no gunicorn control
socket; one backend after the other; PostgreSQL flushes every commit to disk as a lab's server does, SQLite
runs as turkflow always runs it, WAL with synchronous=NORMAL). The crowd shares the 2 cores with the stack it measures, at a lower
priority (``--crowd-nice``), as a crowd on its own machines would leave the server's cores to the server;
each step prints the CPU per turn of every part, the crowd's included. After each step the bench waits until every turn the step stored has its next turn open and its
review done, or ``--settle`` seconds. A step passes when the submit-to-next-turn-open p99 is within the
target, nothing is lost (a turn without its next turn or its review after the settle, an HTTP error or a
dropped connection) and at least 95% of the workers who arrived submitted a turn; the knee is the last
rate that passed. Next turn open: from the moment the worker sent the submit to the moment the conversation's
next HIT was published (its ``hit_published`` event; the same clock, one machine), so it holds the submit's
own time in the web server as well as the Celery queue and the opening.

    python -m bench capacity                                      # both backends, 10 to 80 turns a second
    python -m bench capacity --backends sqlite --rates 10,20 --seconds 20
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import os
import random
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional

from bench._cpu import cpu_seconds, load
from bench.e2e import OUT
from bench._data import SGD_DEV

TARGET_P99_MS = 250
MIN_ACHIEVED = 0.95  # of the workers who arrived submitted a turn: fewer, and the crowd was turned away


def _percentile(values: list[float], pct: float) -> Optional[float]:
    """Nearest rank."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


class Scheduler:
    """Timed actions run on a thread pool: an action does one request and schedules what the worker does
    next, so a slow server delays only that worker, never the arrivals."""

    def __init__(self, threads: int):
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="crowd")
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="crowd-clock", daemon=True)
        self._thread.start()

    def at(self, when: float, action: Callable[[], None]) -> None:
        with self._wake:
            heapq.heappush(self._heap, (when, next(self._seq), action))
            self._wake.notify()

    def _loop(self) -> None:
        with self._wake:
            while not self._stopped:
                if not self._heap:
                    self._wake.wait()
                    continue
                when, _, action = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                heapq.heappop(self._heap)
                self.pool.submit(action)

    @property
    def pending(self) -> int:
        with self._wake:
            return len(self._heap)

    def close(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        self._thread.join()
        self.pool.shutdown(wait=True)


class Crowd:
    """The simulated workers of one batch, idle or working a turn, and what they sent and when."""

    def __init__(self, clients: dict[str, Any], roles: dict[str, str], positions: dict[int, int],
                 crowd: dict[str, Any], scripts: list[Any], seed: int, read: float, write: float, max_turns: int):
        self.clients, self.roles, self.positions = clients, roles, positions
        self.crowd, self.scripts, self.seed = crowd, scripts, seed
        self.read, self.write = read, write
        self.idle = {role: sorted(name for name, r in roles.items() if r == role) for role in set(roles.values())}
        self.taken: set[int] = set()  # HITs any worker took: nobody in the crowd picks them again
        # Conversations whose next turn is (or is about to be) open for each role, by position, and the
        # workers on their way to take one: an arrival is of a role with a turn to take, as the crowd sees it.
        self.ready = {role: set() for role in self.idle}
        self.ready["student"] = set(range(len(scripts)))
        self.coming = Counter()
        self.max_turns = max_turns
        self.lock = threading.Lock()
        self.rng = random.Random(f"{seed}:capacity")
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        self.sent: dict[int, float] = {}  # turn id -> wall clock when its submit was sent
        self.counts: Counter[str] = Counter()

    def arrive(self, scheduler: Scheduler) -> None:
        """A worker of a role drawn at random, idle until now, opens the queue page they have."""
        with self.lock:
            self.counts["arrived"] += 1
            roles = sorted(self.idle)
            weights = [max(0, len(self.ready[role]) - self.coming[role]) for role in roles]
            if not any(weights):
                self.counts["no turn open"] += 1
                return
            role = self.rng.choices(roles, weights)[0]
            if not self.idle[role]:
                self.counts["no idle worker"] += 1
                return
            name = self.idle[role].pop(self.rng.randrange(len(self.idle[role])))
            self.coming[role] += 1
            self.in_flight += 1
            reading = self.rng.uniform(0.5, 1.5) * self.read
        scheduler.at(time.monotonic() + reading, lambda: self._take(scheduler, name))

    def _arrived(self, name: str, conversation_id: Optional[int]) -> None:
        """The worker took the turn of that conversation (None: took nothing and left)."""
        with self.lock:
            role = self.roles[name]
            self.coming[role] -= 1
            if conversation_id is not None:
                self.ready[role].discard(self.positions[conversation_id])

    def _done(self, name: str, position: Optional[int] = None, index: int = 0) -> None:
        """The worker is idle again; a turn they stored makes its conversation ready for the other role,
        unless it was the last."""
        with self.lock:
            role = self.roles[name]
            self.idle[role].append(name)
            self.in_flight -= 1
            if position is not None and index + 1 < min(self.scripts[position].length, self.max_turns):
                self.ready[next(r for r in self.ready if r != role)].add(position)

    def _pick(self, listing: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        with self.lock:
            for entry in (listing or {}).get("open", []):
                if entry["hit_id"] not in self.taken:
                    self.taken.add(entry["hit_id"])
                    return entry
        return None

    def _take(self, scheduler: Scheduler, name: str) -> None:
        from turkflow.simulator.driver import SimulationError, TurnRefused

        client = self.clients[name]
        try:
            for attempt in range(3):
                entry = self._pick(client.listing) if attempt == 0 else None
                if entry is None:  # everything on the page was taken meanwhile: reload it
                    self._count("queue reloads")
                    entry = self._pick(client.queue())
                if entry is None:
                    break
                try:
                    assignment_id, view = client.take(entry["hit_id"])
                    break
                except TurnRefused as refusal:
                    if refusal.status != 409:
                        raise
                    self._count("take conflicts")
                    entry = None
        except (TurnRefused, SimulationError):
            self._count("refused")
            entry = None
        if entry is None:
            self._count("nothing taken")
            self._arrived(name, None)
            self._done(name)
            return
        self._arrived(name, view["conversation_id"])
        writing = self.rng.uniform(0.5, 1.5) * self.write
        scheduler.at(time.monotonic() + writing, lambda: self._submit(name, entry, assignment_id, view))

    def _submit(self, name: str, entry: dict[str, Any], assignment_id: str, view: dict[str, Any]) -> None:
        from turkflow.simulator.crowd import write_turn
        from turkflow.simulator.driver import SimulationError, TurnRefused

        client = self.clients[name]
        position = self.positions[view["conversation_id"]]
        written = write_turn(self.crowd[name], self.seed, position, self.scripts[position], view, True)
        sent = time.time()
        try:
            confirmed = client.submit(assignment_id, written.form)
        except (TurnRefused, SimulationError):
            self._count("refused")
            self._done(name)
            return
        with self.lock:
            self.sent[confirmed["turn_id"]] = sent
            self.counts["submitted"] += 1
        self._done(name, position, view["turn_index"])

    def _count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1


def run_step(scheduler: Scheduler, crowd: Crowd, rate: float, seconds: float, seed: int) -> None:
    """Arrivals at ``rate`` a second for ``seconds``, then until every worker who arrived has submitted."""
    arrivals = random.Random(f"{seed}:arrivals:{rate}")
    start = time.monotonic()
    moment = start
    while True:
        moment += arrivals.expovariate(rate)
        if moment - start >= seconds:
            break
        scheduler.at(moment, lambda: crowd.arrive(scheduler))
    time.sleep(max(0.0, start + seconds - time.monotonic()))
    while crowd.in_flight or scheduler.pending:
        time.sleep(0.05)


def next_turn_open(settings: Any, batch_id: int, sent: dict[int, float]) -> list[float]:
    """Seconds from each submit sent to the conversation's next HIT published (its event), for the turns
    followed by another."""
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import Event, Turn
    from turkflow.simulator.driver import as_utc

    with session_scope(settings.database_url) as session:
        ids = list(sent)
        rows = session.exec(select(Turn.id, Turn.conversation_id, Turn.index).where(col(Turn.id).in_(ids))).all()
        following = {}
        for turn_id, conversation_id, index in rows:
            following[(conversation_id, index + 1)] = turn_id
        nexts = session.exec(select(Turn.id, Turn.conversation_id, Turn.index).where(
            col(Turn.conversation_id).in_({c for c, _ in following}))).all()
        next_of = {following[(c, i)]: turn_id for turn_id, c, i in nexts if (c, i) in following}
        published = dict(session.exec(select(Event.turn_id, Event.at).where(
            Event.batch_id == batch_id, Event.kind == "hit_published",
            col(Event.turn_id).in_(list(next_of.values())))).all())
    return [max(0.0, as_utc(published[next_of[t]]).timestamp() - sent[t]) for t in sent
            if t in next_of and next_of[t] in published]


def settle(settings: Any, batch_id: int, turn_ids: list[int], timeout: float) -> dict[str, int]:
    """Wait until the pipeline owes nothing for these turns, or ``timeout``; what it still owes."""
    from turkflow.db import session_scope
    from turkflow.simulator.driver import pipeline_backlog

    deadline = time.monotonic() + timeout
    while True:
        waiting = {}
        for chunk in range(0, len(turn_ids), 500):
            with session_scope(settings.database_url) as session:
                for what, n in pipeline_backlog(session, batch_id, turn_ids[chunk:chunk + 500]).items():
                    waiting[what] = waiting.get(what, 0) + n
        if not any(waiting.values()) or time.monotonic() > deadline:
            return {what: n for what, n in waiting.items() if n}
        time.sleep(0.25)


def measure(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """One stack on a fresh database of ``backend``; every rate until one fails."""
    from turkflow.config import Settings, default
    from turkflow.quality.monitor import Policy
    from turkflow.simulator.crowd import build_crowd
    from turkflow.simulator.driver import HttpLog, WorkerClient, launch
    from turkflow.simulator.stack import PostgresCluster, Stack
    from turkflow.simulator.utterances import read_dialogs, write_scripts

    people = build_crowd(args.workers // 2, args.workers - args.workers // 2, {}, args.seed)  # all honest
    scripts = write_scripts(read_dialogs(SGD_DEV), args.conversations, args.seed, args.mean_turns)
    policy = Policy.parse("none", bonus_above=default("bonus_above"), bonus_cents=default("bonus_cents"))
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"turkflow-bench-capacity-{backend}-") as scratch:
        work = Path(scratch)
        cluster = None
        if backend == "postgresql":
            cluster = PostgresCluster(durable=not args.pg_fast)
            cluster.start()
            url = cluster.create_database("capacity")
        else:
            url = f"sqlite:///{work / 'turkflow.db'}"
        try:
            with Stack(Settings(data_dir=work, database_url=url), work / "logs", web_workers=args.web_workers,
                       web_threads=args.web_threads, celery_concurrency=args.celery_concurrency) as stack:
                settings = stack.settings
                crowd_priority = _lower_priority(args.crowd_nice)  # before the crowd's threads: they inherit it
                batch_id, join_urls, _, conversation_ids = launch(
                    settings, stack.url, people, scripts, max_turns=2 * args.mean_turns, policy=policy,
                    reward_cents=default("reward_cents"), seed=args.seed, onboarded=True)  # turns, not the quiz
                http = HttpLog()
                clients = {name: WorkerClient(stack.url, join, http) for name, join in join_urls.items()}
                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda client: client.join(), clients.values()))
                crowd = Crowd(clients, {w.name: w.role for w in people},
                              {cid: n for n, cid in enumerate(conversation_ids)}, {w.name: w for w in people},
                              scripts, args.seed, args.read, args.write, 2 * args.mean_turns)
                scheduler = Scheduler(args.threads)
                try:
                    # not measured: the Celery worker loads spaCy at its first review, and caches fill
                    run_step(scheduler, crowd, args.rates[0], args.warm_up, args.seed)
                    settle(settings, batch_id, list(crowd.sent), args.settle)
                    for rate in args.rates:
                        crowd.reset()
                        http.durations.clear()
                        http.errors.clear()
                        http.statuses.clear()
                        before = _cpu(stack, cluster)
                        run_step(scheduler, crowd, rate, args.seconds, args.seed)
                        used = _cpu(stack, cluster)
                        owed = settle(settings, batch_id, list(crowd.sent), args.settle)
                        waits = next_turn_open(settings, batch_id, crowd.sent)
                        submitted = crowd.counts["submitted"]
                        step = {
                            "rate": rate, "submitted": submitted, "achieved": round(submitted / args.seconds, 2),
                            "p50_ms": _ms(_percentile(waits, 50)), "p95_ms": _ms(_percentile(waits, 95)),
                            "p99_ms": _ms(_percentile(waits, 99)), "max_ms": _ms(_percentile(waits, 100)),
                            "lost": owed, "http_errors": dict(http.errors), "crowd": dict(crowd.counts),
                            "requests": {route: {"n": len(d), "p99_ms": _ms(_percentile(d, 99))}
                                         for route, d in sorted(http.durations.items())},
                            "cpu_ms_per_turn": {name: round(1000 * (used[name] - before[name]) / max(1, submitted),
                                                            1) for name in used},
                            "load": load(),
                        }
                        step["passed"] = (step["p99_ms"] is not None and step["p99_ms"] <= args.target_ms
                                          and not owed and not http.errors
                                          and submitted >= MIN_ACHIEVED * crowd.counts["arrived"])
                        steps.append(step)
                        print(f"  {backend:10} | {rate:5.0f} | {step['achieved']:6.1f} | {submitted:5} | "
                              f"{step['p50_ms']} / {step['p95_ms']} / {step['p99_ms']} / {step['max_ms']} | "
                              f"{sum(owed.values())} | {sum(http.errors.values())} | "
                              f"{'pass' if step['passed'] else 'FAIL'} | "
                              f"{' '.join(f'{k} {v}' for k, v in step['cpu_ms_per_turn'].items())} | "
                              f"{step['load']}", flush=True)
                        if not step["passed"]:
                            break
                finally:
                    scheduler.close()
                    _restore_priority(crowd_priority)
        finally:
            if cluster is not None:
                cluster.stop()
    return {"backend": backend, "steps": steps}


def _lower_priority(nice: int) -> int:
    """Run the crowd (this thread and the threads it starts) at ``nice`` above the stack, which was started
    before at the machine's normal priority: a real crowd sits on its own machines, so here it should take
    the cores only when the stack leaves them idle. Its CPU is still counted and printed. Returns the old
    niceness."""
    old = os.getpriority(os.PRIO_PROCESS, 0)
    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, min(19, old + nice))  # on Linux: this thread and those it starts
    return old


def _restore_priority(old: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, 0, old)
    except PermissionError:  # only root may lower a niceness again; the run is over anyway
        pass


def _cpu(stack: Any, cluster: Any) -> dict[str, float]:
    """CPU seconds of every part on the machine during a step: the stack's services, PostgreSQL's server
    processes, and the crowd itself (this process), which shares the 2 cores with the stack it measures."""
    used = cpu_seconds(stack.processes)
    if cluster is not None:
        used["postgresql"] = cpu_seconds({"postgresql": _Pid(cluster.pid())})["postgresql"]
    own = os.times()
    used["crowd"] = own.user + own.system
    return used


class _Pid:
    """What ``cpu_seconds`` needs of a process it did not start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


def _ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(1000 * seconds, 1)


def knee(result: dict[str, Any]) -> str:
    """``capacity sqlite 41 turns/s (p99 212 ms at 41, 390 ms at 46)``: the last rate that passed and the
    first that did not."""
    steps = result["steps"]
    passed = [s for s in steps if s["passed"]]
    failed = next((s for s in steps if not s["passed"]), None)
    best = passed[-1] if passed else None
    text = f"capacity {result['backend']} {best['rate']:.0f} turns/s" if best else \
        f"capacity {result['backend']} below {steps[0]['rate']:.0f} turns/s"
    parts = [f"p99 {best['p99_ms']:.0f} ms at {best['rate']:.0f}"] if best else []
    if failed is not None:
        why = []
        if failed["lost"]:
            why.append(f"lost {failed['lost']}")
        if failed["http_errors"]:
            why.append(f"HTTP errors {failed['http_errors']}")
        if failed["submitted"] < MIN_ACHIEVED * failed["crowd"].get("arrived", 0):
            why.append(f"{failed['submitted']} of {failed['crowd']['arrived']} arrivals submitted")
        p99 = "no next turn" if failed["p99_ms"] is None else f"{failed['p99_ms']:.0f} ms"
        parts.append(f"{p99} at {failed['rate']:.0f}" + (f", {'; '.join(why)}" if why else ""))
    else:
        parts.append("the highest rate tried")
    return f"{text} ({', '.join(parts)})"


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench capacity", description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--rates", default="10,15,20,25,30,35,40,45,50,60,70,80",
                        type=lambda text: [float(r) for r in text.split(",")],
                        help="turns a second offered, step by step, until one fails")
    parser.add_argument("--seconds", type=float, default=30, help="arrivals per step")
    parser.add_argument("--warm-up", type=float, default=20,
                        help="seconds of arrivals at the first rate before the first step, not measured")
    parser.add_argument("--read", type=float, default=2.0, help="mean seconds on the queue page before taking")
    parser.add_argument("--write", type=float, default=6.0, help="mean seconds on the turn page before submitting")
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=800, help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--web-threads", type=int, default=4)
    parser.add_argument("--celery-concurrency", type=int, default=2)
    parser.add_argument("--threads", type=int, default=64, help="crowd threads making requests at once")
    parser.add_argument("--crowd-nice", type=int, default=10,
                        help="niceness the crowd runs at above the stack (0: the same priority)")
    parser.add_argument("--settle", type=float, default=60, help="seconds after a step for the pipeline to catch up")
    parser.add_argument("--target-ms", type=float, default=TARGET_P99_MS)
    parser.add_argument("--pg-fast", action="store_true",
                        help="PostgreSQL without fsync (as the tests run it); by default every commit is flushed "
                             "to disk, as on a lab's server")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    OUT.mkdir(exist_ok=True)
    print(f"capacity: open-loop crowd, {args.workers} workers on {args.conversations} conversations; read "
          f"{args.read} s, write {args.write} s (means); {args.seconds:.0f} s a step; gunicorn {args.web_workers} "
          f"x {args.web_threads} threads, Celery {args.celery_concurrency}; {load()}", flush=True)
    print("  backend    | rate  | turns/s | turns | next turn open p50 / p95 / p99 / max ms | lost | HTTP errors "
          "| step | CPU ms per turn | load", flush=True)
    results = []
    for backend in args.backends.split(","):
        result = measure(backend, args)
        results.append(result)
        (OUT / f"capacity-{backend}.json").write_text(json.dumps(result, indent=2))
    for result in results:
        print(knee(result), flush=True)
    best = {r["backend"]: max((s["rate"] for s in r["steps"] if s["passed"]), default=0) for r in results}
    if len(best) == 2 and best.get("sqlite"):
        print(f"postgresql / sqlite knee: {best['postgresql'] / best['sqlite']:.2f}x; {load()}")


if __name__ == "__main__":
    main()
