"""Scale-out: the simulated crowd at three times the Wizard of Tasks size through two web processes and two
Celery workers per queue, each a process of its own as separate machines would run it; then the same with
one of the two turns workers killed halfway and never restarted.

The layout: two gunicorn servers on their own ports (the crowd spread over both, each simulated worker on
one, as a load balancer with sticky sessions would), two Celery workers for each queue of the Procfile
(turns, reviews, platform with sweeps), each with its own hostname, one beat and a second beat started by
mistake (the beat lock lets one send: the reconciler's count shows the periodic work is not doubled),
Redis and PostgreSQL. The batch runs with the policy ``none``, as in ``bench.e2e``.

Run A has no fault. Run B kills ``celery-turns-2`` with SIGKILL (its pool with it, as a lost machine) once
half the planned turns are written: ``celery-turns-1`` must carry the queue alone. A task is acknowledged
after it ran (``acks_late``), so the message the dead worker held stays unacknowledged in Redis until the
visibility timeout (600 s) puts it back; long before that the reconciler (every 10 s) opens a conversation
whose submitted turn has waited 15 s for its next turn, and reviews a turn unreviewed after 60 s. Measured,
not tuned: the defaults run here. After the crowd is done, run B's stack stays up until Redis has
redelivered those messages and the survivor has run them again (``--redelivery-wait``), and only then are
doubles counted. The simulator plans a round only once the previous round's turns are all reviewed (it
keeps runs reproducible), so a lost review holds the whole crowd for about a minute in run B, where real
workers would only miss that one conversation: run B's wall time shows the simulator's wait, its next-turn
percentiles what workers see.

Per run: turns stored, lost and doubled (the simulator's report and one row per turn in HITs, reviews,
quality decisions and bonus payments), wall time, turns per second, submit-to-next-turn-open p50/p95/p99
(worker side), requests each web process served (its access log), tasks each Celery worker ran, CPU
seconds per process; for run B what the dead worker held and how long those turns waited.

    python -m bench scale                                    # 1647 conversations, 1200 workers, PostgreSQL
    python -m bench scale --conversations 60 --workers 60    # a quick check
    python -m bench scale --backend sqlite --conversations 20 --workers 20 --mean-turns 10
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from bench._cpu import cpu_seconds, load
from bench.chaos import duplicates
from bench.e2e import OUT
from bench._data import SGD_DEV

WOT_CONVERSATIONS, WOT_WORKERS = 549, 400  # the Wizard of Tasks size (bench.e2e)
QUEUES = ("turns", "reviews", "platform,sweeps")  # a worker's queues, as the Procfile runs them
VICTIM = "celery-turns-2"
ORPHAN_LOOK_SECONDS = 5  # after the kill, a turns message still unacknowledged from before it is the victim's
OPENING = "workers.tasks.turn_submitted"  # the task that opens a conversation's next turn
REQUEST = re.compile(rb'"(GET|POST|PUT|DELETE|HEAD) ')
REPAIRED = re.compile(r"(conversations_advanced|turns_reviewed)=\[([^\]]*)\]")


def _percentile(values: list[float], pct: float) -> Optional[float]:
    """Nearest rank, in milliseconds."""
    if not values:
        return None
    ordered = sorted(values)
    return round(1000 * ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)], 1)


def _summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": _percentile(values, 50), "p95": _percentile(values, 95),
            "p99": _percentile(values, 99), "max": _percentile(values, 100)}


class Crowd:
    """Watches the collection: notes when each round ends (the simulator's progress callback) and, in run B,
    kills the victim from a thread of its own once half the planned turns are stored, wherever the crowd is
    in its round, so the worker dies holding whatever it holds at that moment."""

    def __init__(self, stack: Any, kill_at: Optional[int]):
        from celery import Celery

        self.stack, self.kill_at = stack, kill_at
        self.probe = Celery(broker=stack.settings.redis_url, set_as_current=False)
        self.rounds: list[float] = []  # when each round ended
        self.killed: Optional[dict[str, Any]] = None
        self._done = threading.Event()
        self._watch = threading.Thread(target=self._kill_halfway, name="scale-kill")
        if kill_at is not None:
            self._watch.start()

    def __call__(self, written: int, planned: int) -> None:
        self.rounds.append(time.time())

    def _kill_halfway(self) -> None:
        while not self._done.wait(0.25):
            stored = turns_stored(self.stack.settings)
            if stored >= self.kill_at:
                break
        else:
            return
        turns_workers = [name for name in self.stack.processes if name.startswith("celery-turns")]
        taken = tasks_taken(self.probe, turns_workers)
        cpu = cpu_seconds({VICTIM: self.stack.processes[VICTIM]})[VICTIM]
        self.stack.kill(VICTIM)  # SIGKILL to its process group; never revived
        at = time.time()
        self.killed = {"worker": VICTIM, "at": at, "turns_stored": stored, "cpu_seconds": cpu,
                       "turn_openings_before": {name: taken.get(name, {}).get(OPENING, 0)
                                                for name in turns_workers}}
        time.sleep(ORPHAN_LOOK_SECONDS)  # the survivor acknowledges what it held by then
        self.killed["held"] = [turn for turn, delivered in unacknowledged(self.stack.settings.redis_url)
                               if delivered <= at]

    def close(self) -> None:
        self._done.set()
        if self._watch.is_alive():
            self._watch.join()
        self.probe.close()


def turns_stored(settings: Any) -> int:
    from sqlalchemy import func
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import Turn

    with session_scope(settings.database_url) as session:
        return session.exec(select(func.count()).select_from(Turn)
                            .where(col(Turn.submitted_at).is_not(None))).one()


def tasks_taken(probe: Any, workers: Optional[list[str]] = None) -> dict[str, dict[str, int]]:
    """Tasks each Celery worker has run since it started, by task name (``celery inspect stats``)."""
    host = socket.gethostname()
    destination = [f"{name}@{host}" for name in workers] if workers else None
    replies = probe.control.inspect(timeout=5, destination=destination,
                                    limit=len(destination) if destination else None).stats() or {}
    return {name.split("@")[0]: reply.get("total", {}) for name, reply in replies.items()}


def unacknowledged(redis_url: str) -> list[tuple[int, float]]:
    """(turn id, delivered at) of every ``turn_submitted`` message a worker holds unacknowledged in Redis
    (kombu's ``unacked`` hash and its ``unacked_index`` of delivery times)."""
    from redis import Redis

    broker = Redis.from_url(redis_url)
    try:
        delivered = dict(broker.zrange("unacked_index", 0, -1, withscores=True))
        held = []
        for tag, raw in broker.hgetall("unacked").items():
            message = json.loads(raw)[0]
            if message["headers"].get("task") == OPENING:
                held.append((ast.literal_eval(message["headers"]["argsrepr"])[0], delivered.get(tag, 0.0)))
        return held
    finally:
        broker.close()


def opening_waits(settings: Any, batch_id: int) -> dict[int, tuple[float, float]]:
    """Per submitted turn followed by another: (submitted at, seconds until that next turn's HIT opened),
    from the event log (``turn_submitted``, ``hit_published``), on the server's clock."""
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import Conversation, Event, Turn
    from turkflow.simulator.driver import as_utc

    with session_scope(settings.database_url) as session:
        at: dict[str, dict[int, float]] = {"turn_submitted": {}, "hit_published": {}}
        for kind, turn_id, moment in session.exec(
                select(Event.kind, Event.turn_id, Event.at).where(Event.batch_id == batch_id,
                                                                  col(Event.kind).in_(list(at)))):
            at[kind][turn_id] = as_utc(moment).timestamp()
        position = {(cid, index): turn_id for turn_id, cid, index in session.exec(
            select(Turn.id, Turn.conversation_id, Turn.index)
            .join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.batch_id == batch_id))}
    waits = {}
    for (cid, index), turn_id in position.items():
        following = position.get((cid, index + 1))
        if turn_id in at["turn_submitted"] and following in at["hit_published"]:
            submitted = at["turn_submitted"][turn_id]
            waits[turn_id] = (submitted, at["hit_published"][following] - submitted)
    return waits


def reviewed_after(settings: Any, turn_ids: list[int]) -> dict[int, Optional[float]]:
    """Seconds from each turn's submission to its review (monitor and content checks)."""
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import Turn

    with session_scope(settings.database_url) as session:
        return {turn_id: None if reviewed is None else round((reviewed - submitted).total_seconds(), 1)
                for turn_id, submitted, reviewed in session.exec(
                    select(Turn.id, Turn.submitted_at, Turn.reviewed_at).where(col(Turn.id).in_(turn_ids)))}


def requests_served(log_dir: Path, names: list[str]) -> dict[str, int]:
    """Requests in each web process's access log."""
    return {name: len(REQUEST.findall((log_dir / f"{name}.log").read_bytes())) for name in names}


def beat_lock(log_dir: Path) -> dict[str, str]:
    """What each beat said about the beat lock (workers/beat.py): it took it, it stood by, or both."""
    said = {}
    for log in sorted(log_dir.glob("beat*.log")):
        text = log.read_text(errors="replace")
        took, stood = "holds the beat lock: it sends" in text, " stands by: " in text
        said[log.stem] = ("stood by, then took the lock" if took and stood else "took the lock" if took
                          else "stands by" if stood else "said nothing")
    return said


def reconciler_repairs(log_dir: Path) -> dict[str, list[int]]:
    """Conversations the reconciler opened a lost next turn for and turns it reviewed (its log lines)."""
    repaired: dict[str, list[int]] = {"conversations_advanced": [], "turns_reviewed": []}
    for log in sorted(log_dir.glob("celery-platform-sweeps*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "reconciler repaired" in line:
                for what, ids in REPAIRED.findall(line):
                    repaired[what] += [int(i) for i in ids.split(",") if i.strip()]
    return repaired


def await_redelivery(redis_url: str, held: list[int], killed_at: float, timeout: float) -> Optional[float]:
    """Seconds from the kill until the messages the dead worker held were back in their queue (Redis puts an
    unacknowledged message back after the visibility timeout) and a live worker had run them: none of them
    unacknowledged any more, the turns queue empty. None: not within ``timeout`` seconds of the kill."""
    from redis import Redis

    broker = Redis.from_url(redis_url)
    try:
        while time.time() - killed_at < timeout:
            pending = {turn for turn, _ in unacknowledged(redis_url)} & set(held)
            if not pending and broker.llen("turns") == 0:
                return round(time.time() - killed_at, 1)
            time.sleep(1)
        return None
    finally:
        broker.close()


def collect(settings: Any, log_dir: Path, config: Any, *, kill: bool, web_workers: int = 2,
            web_threads: int = 4, celery_concurrency: int = 1, beats: int = 2,
            postgres_pid: Optional[int] = None, redelivery_wait: float = 0) -> dict[str, Any]:
    """One run of the scaled-out layout on ``settings``' (fresh) database; with ``kill``, run B. With a
    ``redelivery_wait``, run B's stack stays up after the crowd is done until the dead worker's messages
    were redelivered and run (at most that many seconds after the kill), and only then counts doubles."""
    from turkflow.simulator.run import plan, run_on
    from turkflow.simulator.stack import Stack
    from bench.chaos import submitted_turns

    layout = {queues: celery_concurrency for queues in QUEUES}
    planned = sum(script.turns(config.max_turns) for script in plan(config).scripts)
    with Stack(settings, log_dir, web_workers=web_workers, web_threads=web_threads, queue_workers=layout,
               web_processes=2, workers_per_queue=2, beats=beats, access_log=True) as stack:
        started = time.time()
        crowd = Crowd(stack, planned // 2 if kill else None)
        measured = dict(stack.processes)
        if postgres_pid is not None:
            measured["postgres"] = SimpleNamespace(pid=postgres_pid)
        before = cpu_seconds(measured)
        try:
            report = run_on(stack.settings, stack.url, config, progress=crowd, web_urls=stack.urls)
        finally:
            crowd.close()
        after = cpu_seconds({name: process for name, process in measured.items() if name in stack.processes
                             or name == "postgres"})
        still_held = {turn for turn, _ in unacknowledged(stack.settings.redis_url)}
        redelivered = None
        if crowd.killed is not None and redelivery_wait and still_held & set(crowd.killed.get("held", [])):
            redelivered = await_redelivery(stack.settings.redis_url, crowd.killed["held"], crowd.killed["at"],
                                           redelivery_wait)
        taken = tasks_taken(crowd.probe)
        elapsed = time.time() - started
        batch_id, _ = submitted_turns(stack.settings)
        doubled = duplicates(stack.settings, batch_id)
        waits = opening_waits(stack.settings, batch_id)
        web = list(stack.web_urls)
        died = {name: process.returncode for name, process in stack.processes.items()
                if process.poll() is not None}
        result: dict[str, Any] = {
            "report": report, "doubled": doubled, "died_on_their_own": died,
            "requests_served": requests_served(log_dir, web),
            "tasks_taken": taken,
            "beats": beat_lock(log_dir),
            "reconciler": {"sweeps": sum(t.get("workers.tasks.reconcile", 0) for t in taken.values()),
                           "expected_one_beat": round(elapsed / stack.settings.reconcile_seconds),
                           "repairs": reconciler_repairs(log_dir)},
            "cpu_seconds": {name: round(seconds - before[name], 2) for name, seconds in after.items()},
        }
    if crowd.killed is not None:
        killed = crowd.killed
        result["cpu_seconds"][VICTIM] = round(killed.pop("cpu_seconds") - before[VICTIM], 2)
        held = killed.get("held", [])
        reviewed = reviewed_after(settings, held)
        killed["held"] = [{"turn": turn,
                           "next_turn_open_after_s": round(waits[turn][1], 1) if turn in waits else None,
                           "reviewed_after_s": reviewed.get(turn),
                           "still_unacknowledged_at_end": turn in still_held} for turn in held]
        killed["redelivered_and_run_s_after_kill"] = redelivered  # None: not awaited, or not in time
        at = killed["at"]
        before_kill = [wait for submitted, wait in waits.values() if submitted < at]
        after_kill = [wait for submitted, wait in waits.values() if submitted >= at]
        killed["next_turn_open_server_ms"] = {"before": _summary(before_kill), "after": _summary(after_kill)}
        ends = [started, *crowd.rounds]
        gaps = [b - a for a, b in zip(ends, ends[1:])]
        # the round the kill fell in and the next two (a round ends when its turns are submitted; the driver
        # then waits for their next turns and reviews before it plans the next round)
        first = next((n for n, (a, b) in enumerate(zip(ends, ends[1:])) if a < at <= b), len(gaps))
        killed["rounds_from_the_kill_s"] = [round(gap, 1) for gap in gaps[first:first + 3]]
        killed["median_round_s"] = round(statistics.median(gaps), 1) if gaps else None
        killed["turns_planned"] = planned
        killed["turn_openings_after"] = {  # by the survivors, after the kill
            name: count.get(OPENING, 0) - killed["turn_openings_before"].get(name, 0)
            for name, count in taken.items() if name.startswith("celery-turns")}
        killed["seconds_into_run"] = round(at - started, 1)
        result["kill"] = killed
    return result


def _line(label: str, result: dict[str, Any]) -> str:
    turns, measured = result["report"]["reproducible"]["turns"], result["report"]["measured"]
    latency = measured["submit_to_next_hit_open_ms"]["worker"]
    doubled = turns["unexpected"] + sum(n for what, n in result["doubled"].items()
                                        if what != "unreviewed_turns")
    served = " / ".join(str(n) for n in result["requests_served"].values())
    openings = " / ".join(str(count.get(OPENING, 0)) for name, count in sorted(result["tasks_taken"].items())
                          if name.startswith("celery-turns"))
    if "kill" in result:
        kill = result["kill"]
        openings = (" / ".join(str(n) for n in kill["turn_openings_before"].values())
                    + f" (then {' / '.join(str(n) for n in kill['turn_openings_after'].values())} alone)")
    return (f"  {label:18} | {turns['stored']:5} of {turns['planned']:5} | {turns['lost']:4} | {doubled:7} | "
            f"{measured['wall_seconds']:6.0f} | {measured['turns_per_second']:7.1f} | "
            f"{latency['p50']:>6} / {latency['p95']:>6} / {latency['p99']:>6} | {served} | {openings}")


def _details(result: dict[str, Any]) -> list[str]:
    turns, measured = result["report"]["reproducible"]["turns"], result["report"]["measured"]
    reconciler = result["reconciler"]
    lines = [f"    doubled rows: {result['doubled']}; repeated submits {turns['repeated_submits']}; "
             f"HTTP errors: {measured['http']['errors'] or 'none'}; processes that died on their own: "
             f"{result['died_on_their_own'] or 'none'}",
             f"    beats: {result['beats']}; reconciler sweeps {reconciler['sweeps']} (one beat: about "
             f"{reconciler['expected_one_beat']}); it opened lost next turns of "
             f"{len(reconciler['repairs']['conversations_advanced'])} conversations and reviewed "
             f"{len(reconciler['repairs']['turns_reviewed'])} turns",
             "    CPU s: " + ", ".join(f"{name} {seconds:.0f}"
                                     for name, seconds in result["cpu_seconds"].items())]
    kill = result.get("kill")
    if kill:
        held = "; ".join(f"turn {h['turn']}: next turn open after {h['next_turn_open_after_s']} s, reviewed "
                         f"after {h['reviewed_after_s']} s, still unacknowledged at the end: "
                         f"{h['still_unacknowledged_at_end']}" for h in kill["held"]) or "nothing"
        server = kill["next_turn_open_server_ms"]
        again = kill["redelivered_and_run_s_after_kill"]
        redelivery = "" if not kill["held"] else (
            f"; redelivered by Redis and run again {again} s after the kill" if again is not None
            else "; not redelivered while awaited")
        lines += [f"    kill: {kill['worker']} SIGKILL at {kill['turns_stored']} of {kill['turns_planned']} "
                  f"turns ({kill['seconds_into_run']:.0f} s in), not restarted; it held unacknowledged: "
                  f"{held}{redelivery}",
                  f"    rounds from the kill on took {kill['rounds_from_the_kill_s']} s (median "
                  f"{kill['median_round_s']} s); next turn open (server) p50/p99/max before the kill "
                  f"{server['before']['p50']} / {server['before']['p99']} / {server['before']['max']} ms, "
                  f"after {server['after']['p50']} / {server['after']['p99']} / {server['after']['max']} ms"]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--conversations", type=int, default=3 * WOT_CONVERSATIONS)
    parser.add_argument("--workers", type=int, default=3 * WOT_WORKERS,
                        help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=33)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16,
                        help="simulated workers making requests at once")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers in each web process")
    parser.add_argument("--web-threads", type=int, default=4, help="threads per gunicorn worker (gthread)")
    parser.add_argument("--celery-concurrency", type=int, default=1,
                        help="pool processes of each Celery worker")
    parser.add_argument("--beats", type=int, default=2, help="beats started (one sends; the others stand by)")
    parser.add_argument("--runs", default="A,B", help="A: no fault; B: a turns worker killed halfway")
    parser.add_argument("--redelivery-wait", type=float, default=720,
                        help="run B: seconds after the kill to keep the stack up for Redis to redeliver the "
                             "dead worker's messages (visibility timeout 600 s); 0: do not wait")
    args = parser.parse_args(argv)

    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig
    from turkflow.simulator.stack import PostgresCluster

    config = SimulationConfig(dialogs=SGD_DEV, students=args.workers // 2, teachers=args.workers - args.workers // 2,
                              conversations=args.conversations, max_turns=2 * args.mean_turns,
                              mean_turns=args.mean_turns, seed=args.seed, policy="none",
                              concurrency=args.concurrency, settle_timeout=300)
    OUT.mkdir(exist_ok=True)
    print(f"scale: {args.conversations} conversations, {args.workers} workers, mean {args.mean_turns} turns, "
          f"{args.backend}; 2 web processes x {args.web_workers} gunicorn workers x {args.web_threads} "
          f"threads, "
          f"2 Celery workers per queue ({', '.join(QUEUES)}) x {args.celery_concurrency} processes, "
          f"{args.beats} beats; {load()}", flush=True)
    print("  run                | stored of plan | lost | doubled | wall s | turns/s | next turn open "
          "p50 / p95 / p99 ms | requests web 1 / 2 | turn openings turns 1 / 2", flush=True)
    labels = {"A": "A no fault", "B": "B turns-2 killed"}
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-scale-") as scratch:
        work = Path(scratch)
        cluster = PostgresCluster() if args.backend == "postgresql" else None
        if cluster is not None:
            cluster.start()
        try:
            for run in args.runs.split(","):
                if cluster is not None:
                    url = cluster.create_database(f"scale_{run.lower()}")
                    pid = cluster.pid()
                else:
                    url, pid = f"sqlite:///{work / f'{run}.db'}", None
                (work / run).mkdir()
                settings = Settings(data_dir=work / run, database_url=url)
                result = collect(settings, work / run / "logs", config, kill=run == "B",
                                 web_workers=args.web_workers, web_threads=args.web_threads,
                                 celery_concurrency=args.celery_concurrency, beats=args.beats,
                                 postgres_pid=pid, redelivery_wait=args.redelivery_wait)
                result["load"] = load()
                (OUT / f"scale-{run}.json").write_text(json.dumps(result, indent=2, default=str))
                print(_line(labels[run], result), flush=True)
                for line in _details(result):
                    print(line, flush=True)
        finally:
            if cluster is not None:
                cluster.stop()
    print(f"  reports: {OUT}/scale-<run>.json; {load()}")


if __name__ == "__main__":
    main()
