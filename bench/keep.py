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

Crowds (``--crowds``): one whose people stay their session, there every round (the simulator's default);
one where people come and go round by round (``away=P``: each worker sits each round out with chance P, drawn
from the seed), or for a while (``away=P/R``: away for spells of R rounds on average, P of the rounds in all);
and one where half the people leave for good halfway through (``leave=S``: that share of each role). Under
``session`` a worker away or gone closed their queue's page (its beacon says so), and their conversations go on
with others: nothing may be lost or stalled.

    python -m bench keep                     # any, session and 30 s; each crowd; 24 conversations
    python -m bench keep --keeps any,session --crowds stay,away=0.5 --think-time 1
    python -m bench keep --provider prolific --keeps any,session   # the crowd on the fake Prolific
    python -m bench keep --provider prolific --protocol star --keeps session --crowds leave=0.5
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from bench._cpu import load
from bench.e2e import OUT
from bench._data import SGD_DEV


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench keep", description=__doc__.splitlines()[0])
    parser.add_argument("--keeps", default="any,session,30", help="comma-separated --keep rules (any, session, "
                                                                   "SECONDS); the first is the base")
    parser.add_argument("--crowds", default="stay,away=0.3,leave=0.5",
                        help="comma-separated crowds: stay, away=P (each worker sits each round out with chance "
                             "P), away=P/R (away for spells of R rounds on average, P of the rounds), leave=S (that "
                             "share of each role leaves for good halfway through)")
    parser.add_argument("--protocol", choices=("wizard_of_tasks", "star", "frames", "meep"),
                        default="wizard_of_tasks", help="the batch's protocol (STAR, Frames, MEEP: generated "
                                                        "dialogs on turkflow's samples, played on their own pages)")
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--workers", type=int, default=16, help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=12)
    parser.add_argument("--think-time", type=float, default=0.5,
                        help="mean seconds before each submission (drawn between 0 and twice this)")
    parser.add_argument("--provider", choices=("local", "prolific"), default="local",
                        help="prolific: the crowd on the fake Prolific, each run on a stack and a database of its "
                             "own (our page picks each participant's turn)")
    parser.add_argument("--prolific-presence", type=int, default=120,
                        help="TURKFLOW_PROLIFIC_PRESENCE_SECONDS of the Prolific runs: longer than the wall time "
                             "between a participant's turns (two rounds; some 25 s at load 20 on 2 cores), or "
                             "their turns go to others while they stay")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16, help="simulated workers making requests at once")
    args = parser.parse_args(argv)

    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig, run_on, run_with_stack
    from turkflow.simulator.stack import Stack

    keeps = args.keeps.split(",")
    config = SimulationConfig(dialogs=SGD_DEV if args.protocol == "wizard_of_tasks" else None,
                              protocol=args.protocol, students=args.workers // 2, teachers=args.workers - args.workers // 2,
                              conversations=args.conversations, max_turns=2 * args.mean_turns,
                              mean_turns=args.mean_turns, mix={}, seed=args.seed, policy="none",
                              concurrency=args.concurrency, think_time=args.think_time, settle_timeout=120,
                              provider=args.provider)
    OUT.mkdir(exist_ok=True)
    print(f"keep: {args.protocol}, {args.conversations} conversations, {args.workers} workers (honest, policy none), mean "
          f"{args.mean_turns} turns, think time {args.think_time} s, seed {args.seed}, {args.provider}, SQLite, "
          f"{'one stack' if args.provider == 'local' else 'a stack per run'} (gunicorn 2 x 2 threads, Celery 2); "
          f"{load()}")
    print("  crowd     | keep    | turns | lost | one writer per role | same-worker share (student / teacher) | "
          "workers per conv. role | next turn wait p95 s (sim.) | pay per hour | wall s | turns/s | "
          "next turn taken p50 / p95 ms")
    reports: dict[str, dict] = {}
    currency = "GBP" if args.provider == "prolific" else "USD"  # the fake Prolific's workspace's; the local queue's
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-keep-") as scratch, ExitStack() as running:
        work = Path(scratch)
        settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}")
        if args.provider == "local":
            stack = running.enter_context(Stack(settings, work / "logs", web_workers=2, web_threads=2,
                                                celery_concurrency=2))

        def run(name: str, chosen: SimulationConfig) -> dict:
            if args.provider == "local":
                return run_on(stack.settings, stack.url, chosen)
            own = work / name.replace(" ", "").replace(",", "-").replace("=", "")
            own.mkdir()
            return run_with_stack(Settings(data_dir=own, database_url=f"sqlite:///{own / 'turkflow.db'}",
                                           prolific_presence_seconds=args.prolific_presence), own, chosen,
                                  web_workers=2, web_threads=2)

        for crowd in args.crowds.split(","):
            kind, _, share = crowd.partition("=")
            away, _, spell = share.partition("/")
            people = ({"away": float(away), "away_rounds": float(spell or 1)} if kind == "away" else
                      {"leave": float(share)} if kind == "leave" else {})
            for keep in keeps:
                report = run(f"{crowd}, keep {keep}", replace(config, keep=keep, **people))
                reports[f"{crowd}, keep {keep}"] = report
                _row(crowd, keep, report, currency)
            base = reports[f"{crowd}, keep {keeps[0]}"]
            for keep in keeps[1:]:
                _against(reports[f"{crowd}, keep {keep}"], base, keep, keeps[0])
    out = OUT / f"keep-{args.provider}{'' if args.protocol == 'wizard_of_tasks' else '-' + args.protocol}.json"
    out.write_text(json.dumps(reports, indent=2, default=str))
    print(f"  reports: {out}; {load()}")


def _row(crowd: str, keep: str, report: dict, currency: str) -> None:
    from turkflow.hits.money import shown

    done, measured = report["reproducible"], report["measured"]
    same, taken = done["same_worker"], measured["submit_to_next_turn_taken_ms"]
    by_role = " / ".join(f"{share:.2f}" for share in same["by_role"].values())
    print(f"  {crowd:9} | {keep:7} | {done['turns']['stored']:5} | {done['turns']['lost']:4} | "
          f"{done['one_writer_per_role_share']:19.3f} | {same['most_frequent_worker_share']:.3f} ({by_role}){'':15} | "
          f"{same['workers_per_conversation_role']:22} | {done['next_turn_wait_p95_seconds']:27} | "
          f"{shown(done['money']['paid_per_hour_cents'], currency):>12} | {measured['wall_seconds']:6.1f} | "
          f"{measured['turns_per_second']:7.2f} | {taken['p50']:>7} / {taken['p95']:>7} | stalled "
          f"{len(done['stalled'])}, conversations completed {done['conversations']['completed']} of "
          f"{done['conversations']['launched']}", flush=True)


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
