"""End to end: a Wizard-of-Tasks-size collection simulated through the real stack, SQLite against PostgreSQL.

549 conversations of about 33 turns (about 18,000 turns) worked by 400 simulated workers (200 students,
200 teachers; 15% spammers and 10% careless raters) through gunicorn, a Celery worker, Redis and the
database, all started here as in production (``turkflow.simulator``). The batch runs with the policy
``none``: the monitor judges every rating and pays bonuses as usual but blocks nobody, so the whole
collection is written and the throughput is that of the system, not of a crowd shrinking under blocks
(``bench.quality`` measures the blocks).

Targets: under 10 minutes, no lost or duplicated turn, submit-to-next-HIT-open p99 under 250 ms.

    python -m bench.e2e                                    # both backends, the full size
    python -m bench.e2e --backends sqlite --conversations 100 --workers 80
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any, Optional

from bench._cpu import cpu_seconds, load
from bench._data import SGD_DEV

OUT = Path(__file__).resolve().parent / "out"
TARGET_SECONDS = 600
TARGET_P99_MS = 250


def simulate(backend: str, conversations: int, workers: int, mean_turns: int, seed: int, concurrency: int,
             think_time: float, web_workers: int, web_threads: int, celery_concurrency: int,
             queue_workers: Optional[dict[str, int]] = None) -> dict[str, Any]:
    """One simulation on a fresh database of ``backend``; the report plus CPU seconds per service.
    ``queue_workers``: a Celery worker per queue (``{queues: processes}``) instead of one for all."""
    from turkflow.config import Settings
    from turkflow.simulator.run import SimulationConfig, run_on
    from turkflow.simulator.stack import PostgresCluster, Stack

    config = SimulationConfig(dialogs=SGD_DEV, students=workers // 2, teachers=workers - workers // 2, conversations=conversations,
                              max_turns=2 * mean_turns, mean_turns=mean_turns, seed=seed, policy="none",
                              concurrency=concurrency, think_time=think_time, settle_timeout=120)
    with tempfile.TemporaryDirectory(prefix=f"turkflow-bench-e2e-{backend}-") as scratch:
        work = Path(scratch)
        cluster = None
        if backend == "postgresql":
            cluster = PostgresCluster()
            cluster.start()
            url = cluster.create_database("e2e")
        else:
            url = f"sqlite:///{work / 'turkflow.db'}"
        try:
            with Stack(Settings(data_dir=work, database_url=url), work / "logs", web_workers=web_workers,
                       web_threads=web_threads, celery_concurrency=celery_concurrency,
                       queue_workers=queue_workers) as stack:
                before = cpu_seconds(stack.processes)
                report = run_on(stack.settings, stack.url, config)
                after = cpu_seconds(stack.processes)
        finally:
            if cluster is not None:
                cluster.stop()
    report["cpu_seconds"] = {name: round(after[name] - before[name], 2) for name in after}
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--conversations", type=int, default=549)
    parser.add_argument("--workers", type=int, default=400, help="simulated workers, half of each role")
    parser.add_argument("--mean-turns", type=int, default=33)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16, help="simulated workers making requests at once")
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--web-threads", type=int, default=4, help="threads per gunicorn worker (gthread)")
    parser.add_argument("--think-time", type=float, default=0.0,
                        help="mean seconds before each submission (0: every round's submissions arrive at once)")
    parser.add_argument("--celery-concurrency", type=int, default=2)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    print(f"e2e: {args.conversations} conversations, {args.workers} workers, mean {args.mean_turns} turns; "
          f"think time {args.think_time} s; gunicorn {args.web_workers} workers x {args.web_threads} threads, "
          f"Celery concurrency {args.celery_concurrency}; {load()}")
    print("  backend    | turns  | lost | unexp. | wall s | turns/s | next HIT open p50/p95/p99 ms (worker) | "
          "CPU ms/turn: web, celery, redis")
    rates = {}
    for backend in args.backends.split(","):
        report = simulate(backend, args.conversations, args.workers, args.mean_turns, args.seed, args.concurrency,
                          args.think_time, args.web_workers, args.web_threads, args.celery_concurrency)
        (OUT / f"e2e-{backend}.json").write_text(json.dumps(report, indent=2, default=str))
        turns = report["reproducible"]["turns"]
        measured = report["measured"]
        latency = measured["submit_to_next_hit_open_ms"]["worker"]
        cpu = {name: 1000 * seconds / max(1, turns["stored"]) for name, seconds in report["cpu_seconds"].items()}
        rates[backend] = measured["turns_per_second"]
        print(f"  {backend:10} | {turns['stored']:6} | {turns['lost']:4} | {turns['unexpected']:6} | "
              f"{measured['wall_seconds']:6.0f} | {measured['turns_per_second']:7.1f} | "
              f"{latency['p50']:>8} / {latency['p95']:>7} / {latency['p99']:>7}        | "
              f"{cpu.get('gunicorn', 0):.1f}, {cpu.get('celery', 0):.1f}, {cpu.get('redis', 0):.1f}", flush=True)
        print(f"    targets: wall {measured['wall_seconds']:.0f} s < {TARGET_SECONDS} s: "
              f"{'met' if measured['wall_seconds'] < TARGET_SECONDS else 'MISSED'}; no lost or duplicated turn: "
              f"{'met' if turns['lost'] == turns['unexpected'] == turns['repeated_submits'] == 0 else 'MISSED'}; "
              f"p99 {latency['p99']} ms < {TARGET_P99_MS} ms: "
              f"{'met' if (latency['p99'] or 0) < TARGET_P99_MS else 'MISSED'}; HTTP errors: "
              f"{measured['http']['errors'] or 'none'}", flush=True)
    if len(rates) == 2:
        print(f"  postgresql / sqlite turns per second: {rates['postgresql'] / rates['sqlite']:.2f}x")
    print(f"  reports: {OUT}/e2e-<backend>.json; {load()}")


if __name__ == "__main__":
    main()
