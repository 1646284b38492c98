"""Affinity, measured: the same simulated collection without and with ``batch launch --affinity SECONDS``.

Affinity keeps a conversation's next turn of a role for the worker who wrote that role's last turn, so more of
each conversation's role is written by one person; its price is the time a kept turn waits for that worker
while others are idle, and with it throughput. Each run works the same batch (same seed, crowd and scripts) on
one stack (gunicorn, a Celery worker, Redis, SQLite), the crowd taking the turns kept for it first
(``turkflow.simulator.driver``), and reports per affinity:

- the share of each conversation's role turns written by its most frequent worker, and the workers per
  conversation role (``reproducible.same_worker`` of the simulator's report);
- throughput (turns per second of wall time) and wall time;
- next-turn latency: from a submission to the first take of the conversation's next turn (p50/p95/p99), and
  from a submission to the next HIT open (the server's part, which affinity does not change).

Two crowds: one where every worker is there every round (the simulator's default), and one where people come
and go (``--away``: each worker sits each round out with that chance, drawn from the seed). Only the second
makes a kept turn wait for its worker while others could take it; a short window ends during such a wait and
the turn goes to anyone, a long one holds it until its worker comes back.

    python -m bench affinity                 # affinity 0, 3 and 30 s, nobody away and 30% away; 24 conversations
    python -m bench affinity --affinities 0,30 --away 0.5 --think-time 1
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
    parser = argparse.ArgumentParser(prog="python -m bench affinity", description=__doc__.splitlines()[0])
    parser.add_argument("--affinities", default="0,3,30", help="comma-separated seconds (0: off)")
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

    affinities = [int(a) for a in args.affinities.split(",")]
    config = SimulationConfig(dialogs=SGD_DEV, students=args.workers // 2, teachers=args.workers - args.workers // 2,
                              conversations=args.conversations, max_turns=2 * args.mean_turns,
                              mean_turns=args.mean_turns, mix={}, seed=args.seed, policy="none",
                              concurrency=args.concurrency, think_time=args.think_time, settle_timeout=120)
    OUT.mkdir(exist_ok=True)
    print(f"affinity: {args.conversations} conversations, {args.workers} workers (honest, policy none), mean "
          f"{args.mean_turns} turns, think time {args.think_time} s, seed {args.seed}, SQLite, one stack "
          f"(gunicorn 2 x 2 threads, Celery 2); {load()}")
    print("  away | affinity s | turns | lost | same-worker share (student / teacher) | workers per conv. role | "
          "wall s | turns/s | next turn taken p50 / p95 / p99 ms | next HIT open p50 / p99 ms (server)")
    reports: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="turkflow-bench-affinity-") as scratch:
        work = Path(scratch)
        settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}")
        with Stack(settings, work / "logs", web_workers=2, web_threads=2, celery_concurrency=2) as stack:
            for away in [float(a) for a in args.away.split(",")]:
                for affinity in affinities:
                    report = run_on(stack.settings, stack.url, replace(config, affinity_seconds=affinity, away=away))
                    reports[f"away {away:g}, affinity {affinity}"] = report
                    _row(away, affinity, report)
                base = reports[f"away {away:g}, affinity {affinities[0]}"]
                for affinity in affinities[1:]:
                    _against(reports[f"away {away:g}, affinity {affinity}"], base, affinity, affinities[0])
    (OUT / "affinity.json").write_text(json.dumps(reports, indent=2, default=str))
    print(f"  reports: {OUT}/affinity.json; {load()}")


def _row(away: float, affinity: int, report: dict) -> None:
    done, measured = report["reproducible"], report["measured"]
    same, taken = done["same_worker"], measured["submit_to_next_turn_taken_ms"]
    opened = measured["submit_to_next_hit_open_ms"]["server"]
    by_role = " / ".join(f"{share:.2f}" for share in same["by_role"].values())
    print(f"  {away:4g} | {affinity:10} | {done['turns']['stored']:5} | {done['turns']['lost']:4} | "
          f"{same['most_frequent_worker_share']:.3f} ({by_role}){'':15} | "
          f"{same['workers_per_conversation_role']:22} | {measured['wall_seconds']:6.1f} | "
          f"{measured['turns_per_second']:7.2f} | {taken['p50']:>7} / {taken['p95']:>7} / "
          f"{taken['p99']:>7}       | {opened['p50']:>5} / {opened['p99']:>5}", flush=True)


def _against(report: dict, base: dict, affinity: int, base_affinity: int) -> None:
    share = (report["reproducible"]["same_worker"]["most_frequent_worker_share"]
             / base["reproducible"]["same_worker"]["most_frequent_worker_share"])
    print(f"         affinity {affinity} s against {base_affinity} s: same-worker share {share:.2f}x, throughput "
          f"{report['measured']['turns_per_second'] / base['measured']['turns_per_second']:.2f}x, next turn taken "
          f"p50 {_ratio(report, base, 'p50')}, p95 {_ratio(report, base, 'p95')}", flush=True)


def _ratio(report: dict, base: dict, key: str) -> str:
    mine, theirs = (r["measured"]["submit_to_next_turn_taken_ms"][key] for r in (report, base))
    return f"{mine / theirs:.2f}x" if mine and theirs else "n/a"


if __name__ == "__main__":
    main()
