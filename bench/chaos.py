"""Chaos: the simulated crowd works a batch while Redis and the Celery worker are killed and restarted at random.

The stack runs as in production (redis-server without persistence, gunicorn, a prefork Celery worker with
beat, SQLite) with the default reconciler settings. Every few seconds one fault hits: Redis stopped
(SIGTERM) or killed (SIGKILL), or the Celery worker killed (SIGKILL, beat with it); after a short outage
the service is started again, as a supervisor (``make demo``, systemd, a platform) would. A Redis restart
loses every queued and unacknowledged message, a killed worker the messages it held: the reconciler must
repair all of it from the database.

Recovery time of a fault: from the moment the service is back until every turn submitted so far has its
conversation's next turn open (``opened``) and is reviewed (``reviewed``). Targets: no turn lost or
duplicated, no HIT, bonus or review doubled, and lost openings repaired within 30 s.

    python -m bench.chaos
    python -m bench.chaos --conversations 10 --faults 6 --seed 2
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench._cpu import load
from bench._data import SGD_DEV

OUT = Path(__file__).resolve().parent / "out"
FAULTS = (("redis", signal.SIGTERM), ("redis", signal.SIGKILL), ("celery", signal.SIGKILL))
TARGET_OPEN_SECONDS = 30


def backlog(settings: Any, batch_id: int, turn_ids: list[int]) -> dict[str, int]:
    from turkflow.db import session_scope
    from turkflow.simulator.driver import pipeline_backlog

    with session_scope(settings.database_url) as session:
        return pipeline_backlog(session, batch_id, turn_ids)


def submitted_turns(settings: Any) -> tuple[int, list[int]]:
    """The latest batch and its submitted turns."""
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import Batch, Conversation, Turn, TurnStatus

    with session_scope(settings.database_url) as session:
        batch_id = session.exec(select(Batch.id).order_by(col(Batch.id).desc())).first()
        turns = session.exec(select(Turn.id).join(Conversation, Conversation.id == Turn.conversation_id)
                             .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.submitted)).all()
        return batch_id, list(turns)


def chaos(stack: Any, rng: random.Random, faults: int, done: threading.Event, log: list[dict[str, Any]]) -> None:
    """Inject ``faults`` faults into ``stack`` while the crowd works, measuring each recovery."""
    for _ in range(faults):
        if done.wait(rng.uniform(3, 8)):
            return
        service, how = rng.choice(FAULTS)
        outage = rng.uniform(0.5, 3.0)
        stack.kill(service, how)
        time.sleep(outage)
        stack.revive(service)
        back = time.monotonic()
        batch_id, turns = submitted_turns(stack.settings)
        opened = reviewed = None
        while (opened is None or reviewed is None) and time.monotonic() - back < 300:
            waiting = backlog(stack.settings, batch_id, turns)
            if opened is None and waiting["conversations without an open HIT"] == 0:
                opened = time.monotonic() - back
            if reviewed is None and not any(waiting.values()):
                reviewed = time.monotonic() - back
            time.sleep(0.1)
        log.append({"fault": f"{service} {how.name}", "outage_s": round(outage, 2),
                    "opened_s": None if opened is None else round(opened, 2),
                    "reviewed_s": None if reviewed is None else round(reviewed, 2)})
        print(f"  {service:6} {how.name:7} down {outage:4.1f} s: next turns open after "
              f"{log[-1]['opened_s']} s, all reviewed after {log[-1]['reviewed_s']} s", flush=True)


def duplicates(settings: Any, batch_id: int) -> dict[str, int]:
    """Rows that must be unique per thing and are not: HITs per turn, reviews per turn, decisions per
    rating, payments per bonus; and submitted turns never reviewed."""
    from sqlalchemy import func
    from sqlmodel import col, select

    from turkflow.db import session_scope
    from turkflow.models import Conversation, Event, Hit, QualityDecision, Rating, Turn, TurnStatus

    with session_scope(settings.database_url) as s:
        turns = select(Turn.id).join(Conversation, Conversation.id == Turn.conversation_id).where(
            Conversation.batch_id == batch_id)

        def extra(query: Any) -> int:
            return sum(n - 1 for n in s.exec(query).all() if n > 1)

        return {
            "hits": extra(select(func.count()).select_from(Hit).where(col(Hit.turn_id).in_(turns))
                          .group_by(Hit.turn_id)),
            "reviews": extra(select(func.count()).select_from(Event).where(Event.kind == "turn_reviewed",
                                                                          col(Event.turn_id).in_(turns))
                             .group_by(Event.turn_id)),
            "decisions": extra(select(func.count()).select_from(QualityDecision)
                               .join(Rating, Rating.id == QualityDecision.rating_id)
                               .where(col(Rating.rater_turn_id).in_(turns)).group_by(QualityDecision.rating_id)),
            "bonus_payments": extra(select(func.count()).select_from(Event).where(Event.kind == "bonus_paid",
                                                                                 col(Event.turn_id).in_(turns))
                                    .group_by(Event.turn_id)),
            "unreviewed_turns": s.exec(select(func.count()).select_from(Turn).where(
                col(Turn.id).in_(turns), Turn.status == TurnStatus.submitted, col(Turn.reviewed_at).is_(None))).one(),
        }


def _summary(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    return (f"n={len(ordered)} min {ordered[0]:.1f} s, median {statistics.median(ordered):.1f} s, "
            f"max {ordered[-1]:.1f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--workers", type=int, default=16, help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=14)
    parser.add_argument("--faults", type=int, default=12, help="faults to inject (fewer if the batch ends first)")
    parser.add_argument("--think-time", type=float, default=0.5, help="mean seconds before each submission")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig, run_on
    from turkflow.simulator.stack import Stack

    config = SimulationConfig(dialogs=SGD_DEV, students=args.workers // 2, teachers=args.workers - args.workers // 2,
                              conversations=args.conversations, max_turns=2 * args.mean_turns,
                              mean_turns=args.mean_turns, seed=args.seed, policy="none", think_time=args.think_time,
                              concurrency=8, settle_timeout=300)
    print(f"chaos: {args.conversations} conversations, {args.workers} workers, mean {args.mean_turns} turns, "
          f"{args.faults} faults; default reconciler settings; {load()}", flush=True)
    log: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-chaos-") as scratch:
        work = Path(scratch)
        settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}")
        with Stack(settings, work / "logs", web_workers=2, web_threads=4, celery_concurrency=2) as stack:
            print(f"  reconcile every {stack.settings.reconcile_seconds} s; lost openings after "
                  f"{stack.settings.reopen_after_seconds} s, lost reviews after "
                  f"{stack.settings.review_after_seconds} s", flush=True)
            done = threading.Event()
            injector = threading.Thread(target=chaos, args=(stack, random.Random(args.seed), args.faults, done, log))
            injector.start()
            try:
                report = run_on(stack.settings, stack.url, config)
            finally:
                done.set()
                injector.join()
            batch_id, _ = submitted_turns(stack.settings)
            doubled = duplicates(stack.settings, batch_id)
            died = {name: process.returncode for name, process in stack.processes.items()
                    if process.poll() is not None}
    turns = report["reproducible"]["turns"]
    opened = [entry["opened_s"] for entry in log if entry["opened_s"] is not None]
    reviewed = [entry["reviewed_s"] for entry in log if entry["reviewed_s"] is not None]
    result = {"faults": log, "turns": turns, "doubled": doubled, "died_unrestarted": died,
              "wall_seconds": report["measured"]["wall_seconds"], "http_errors": report["measured"]["http"]["errors"]}
    OUT.mkdir(exist_ok=True)
    (OUT / "chaos.json").write_text(json.dumps(result, indent=2, default=str))
    print(f"  turns: {turns['stored']} stored of {turns['confirmed']} confirmed; lost {turns['lost']}, "
          f"unexpected {turns['unexpected']}, history mismatches {turns['history_mismatches']}")
    print(f"  doubled: {doubled}; processes that died on their own: {died or 'none'}")
    print(f"  recovery after a fault, next turns open: {_summary(opened)}")
    print(f"  recovery after a fault, every turn reviewed: {_summary(reviewed)}")
    ok = (turns["lost"] == turns["unexpected"] == 0 and not any(doubled.values()) and not died
          and len(opened) == len(log) and max(opened, default=0) < TARGET_OPEN_SECONDS)
    print(f"  targets (nothing lost or doubled, openings back within {TARGET_OPEN_SECONDS} s): "
          f"{'met' if ok else 'MISSED'}; wall {result['wall_seconds']:.0f} s; report: {OUT}/chaos.json; {load()}")


if __name__ == "__main__":
    main()
