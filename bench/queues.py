"""Queues by workload, measured: the same simulated collection with one Celery worker taking every queue,
then with a worker per queue as the Procfile runs them (turns, reviews, platform with sweeps), side by side.

What the split is for: a burst of submissions queues a spaCy review per turn; with one worker the next
turns' openings wait behind them, with a turns worker of their own they do not. Both layouts get the same
number of Celery processes, so the difference is the queues, not more CPU.

    python -m bench queues                       # 120 conversations, 100 workers, SQLite
    python -m bench queues --conversations 60 --workers 60
"""

from __future__ import annotations

import argparse
import json

from bench._cpu import load
from bench.e2e import OUT, simulate

LAYOUTS = {
    "one worker, every queue": None,
    "a worker per queue": {"turns": 1, "reviews": 1, "platform,sweeps": 1},
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench queues", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    parser.add_argument("--conversations", type=int, default=120)
    parser.add_argument("--workers", type=int, default=100, help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16,
                        help="simulated workers making requests at once")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    processes = 3  # Celery processes in either layout
    print(f"queues: {args.conversations} conversations, {args.workers} workers, mean {args.mean_turns} "
          f"turns, {args.backend}, {processes} Celery processes in each layout, crowd at full speed; "
          f"{load()}")
    print("  layout                    | turns | lost | turns/s | next turn open p50 / p95 / p99 ms")
    p99 = {}
    for layout, queue_workers in LAYOUTS.items():
        report = simulate(args.backend, args.conversations, args.workers, args.mean_turns, args.seed,
                          args.concurrency, 0.0, 3, 4, processes, queue_workers)
        (OUT / f"queues-{'split' if queue_workers else 'one'}.json").write_text(
            json.dumps(report, indent=2, default=str))
        turns, measured = report["reproducible"]["turns"], report["measured"]
        latency = measured["submit_to_next_hit_open_ms"]["worker"]
        p99[layout] = latency["p99"]
        print(f"  {layout:25} | {turns['stored']:5} | {turns['lost']:4} | "
              f"{measured['turns_per_second']:7.1f} | "
              f"{latency['p50']:>6} / {latency['p95']:>6} / {latency['p99']:>6}", flush=True)
    one, split = p99["one worker, every queue"], p99["a worker per queue"]
    if one and split:
        print(f"  next-turn p99, a worker per queue / one worker: {split / one:.2f}x")
    print(f"  reports: {OUT}/queues-<layout>.json; {load()}")


if __name__ == "__main__":
    main()
