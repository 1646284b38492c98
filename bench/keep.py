"""Keeping people, measured: the same simulated collection under each ``batch launch --keep`` rule.

Keeping a conversation's next turn of a role for the worker who wrote that role's last turn (for their session,
or for a window of seconds) has more of each conversation's role written by one person; its price is the time a
kept turn waits for that worker while others are idle. Each run works the same batch (same seed, crowd and
scripts) on one stack (gunicorn, a Celery worker, Redis, SQLite), the crowd taking the turns kept for it first
(``turkflow.simulator.driver``), and reports per rule:

- the share of conversations each of whose roles one worker wrote (``reproducible.one_writer_per_role_share``),
  the share of each conversation's role turns written by its most frequent worker and the workers per
  conversation role (``reproducible.same_worker``);
- the wait for a next turn, p95 on the simulated clock (``reproducible.next_turn_wait_p95_seconds``: a round
  stands for a minute) and on the wall clock (submission to the next take, ``measured``);
- pay per hour a worker stays (``reproducible.money.paid_per_hour_cents``), and throughput.

Two crowds: one where every worker is there every round (the simulator's default), and one where people come
and go (``--away``: each worker sits each round out with that chance, drawn from the seed; under ``session``
their queue's page says they left, and their conversations go on with others).

    python -m bench keep                     # any, session and 30 s; nobody away and 30% away; 24 conversations
    python -m bench keep --keeps any,session --away 0.5 --think-time 1
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from bench._cpu import load
from bench.e2e import OUT
from bench._data import SGD_DEV


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench keep", description=__doc__.splitlines()[0])
    parser.add_argument("--keeps", default="any,session,30", help="comma-separated --keep rules (any, session, "
                                                                   "SECONDS); the first is the base")
    parser.add_argument("--away", default="0,0.3",
                        help="comma-separated chances that a worker sits a round out, one crowd each")
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--workers", type=int, default=16, help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=12)
    parser.add_argument("--think-time", type=float, default=0.5,
                        help="mean seconds before each submission (drawn between 0 and twice this)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16, help="simulated workers making requests at once")
    args = parser.parse_args(argv)

    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig, run_on
    from turkflow.simulator.stack import Stack

    keeps = args.keeps.split(",")
    config = SimulationConfig(dialogs=SGD_DEV, students=args.workers // 2, teachers=args.workers - args.workers // 2,
                              conversations=args.conversations, max_turns=2 * args.mean_turns,
                              mean_turns=args.mean_turns, mix={}, seed=args.seed, policy="none",
                              concurrency=args.concurrency, think_time=args.think_time, settle_timeout=120)
    OUT.mkdir(exist_ok=True)
    print(f"keep: {args.conversations} conversations, {args.workers} workers (honest, policy none), mean "
          f"{args.mean_turns} turns, think time {args.think_time} s, seed {args.seed}, SQLite, one stack "
          f"(gunicorn 2 x 2 threads, Celery 2); {load()}")
    print("  away | keep    | turns | lost | one writer per role | same-worker share (student / teacher) | "
          "workers per conv. role | next turn wait p95 s (sim.) | pay per hour | wall s | turns/s | "
          "next turn taken p50 / p95 ms")
    reports: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-keep-") as scratch:
        work = Path(scratch)
        settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}")
        with Stack(settings, work / "logs", web_workers=2, web_threads=2, celery_concurrency=2) as stack:
            for away in [float(a) for a in args.away.split(",")]:
                for keep in keeps:
                    report = run_on(stack.settings, stack.url, replace(config, keep=keep, away=away))
                    reports[f"away {away:g}, keep {keep}"] = report
                    _row(away, keep, report)
                base = reports[f"away {away:g}, keep {keeps[0]}"]
                for keep in keeps[1:]:
                    _against(reports[f"away {away:g}, keep {keep}"], base, keep, keeps[0])
    (OUT / "keep.json").write_text(json.dumps(reports, indent=2, default=str))
    print(f"  reports: {OUT}/keep.json; {load()}")


def _row(away: float, keep: str, report: dict) -> None:
    done, measured = report["reproducible"], report["measured"]
    same, taken = done["same_worker"], measured["submit_to_next_turn_taken_ms"]
    by_role = " / ".join(f"{share:.2f}" for share in same["by_role"].values())
    print(f"  {away:4g} | {keep:7} | {done['turns']['stored']:5} | {done['turns']['lost']:4} | "
          f"{done['one_writer_per_role_share']:19.3f} | {same['most_frequent_worker_share']:.3f} ({by_role}){'':15} | "
          f"{same['workers_per_conversation_role']:22} | {done['next_turn_wait_p95_seconds']:27} | "
          f"${done['money']['paid_per_hour_cents'] / 100:10.2f} | {measured['wall_seconds']:6.1f} | "
          f"{measured['turns_per_second']:7.2f} | {taken['p50']:>7} / {taken['p95']:>7}", flush=True)


def _against(report: dict, base: dict, keep: str, base_keep: str) -> None:
    mine, theirs = report["reproducible"], base["reproducible"]
    wait = (f"{mine['next_turn_wait_p95_seconds'] / theirs['next_turn_wait_p95_seconds']:.2f}x"
            if theirs["next_turn_wait_p95_seconds"] else
            f"{mine['next_turn_wait_p95_seconds']} s against {theirs['next_turn_wait_p95_seconds']} s")
    print(f"         keep {keep} against {base_keep}: one writer per role {mine['one_writer_per_role_share']:.2f} "
          f"against {theirs['one_writer_per_role_share']:.2f}, next turn wait p95 (sim.) {wait}, throughput "
          f"{report['measured']['turns_per_second'] / base['measured']['turns_per_second']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
