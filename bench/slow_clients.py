"""Slow clients against what serves turkflow (issue 35): people taking and submitting turns alone, and beside
connections that send a header line (or a few bytes of a declared body) every 5 s and never finish, served two
ways on the same machine in one run:

- gunicorn alone on the public port (2 processes x 4 threads), as the Procfile served turkflow before;
- the Procfile now: nginx (``front``) taking each request whole, gunicorn (``web``, 2 x 4) behind it on a
  Unix socket.

Rounds alternate (alone, beside slow clients, ...), so the machine's other load weighs on both. A request
that times out counts its whole wait and is counted as failed.

    python -m bench slow_clients
    python -m bench slow_clients --slow 8 200 --turns 16 --rounds 4 --timeout 10
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from turkflow.config import Settings
from turkflow.simulator import slow
from turkflow.simulator.stack import ProcfileWeb, Stack, free_port

from bench._cpu import load


def settings_in(root: Path, name: str, redis_url: str = "redis://127.0.0.1:6379/0") -> Settings:
    return Settings(data_dir=root / name, database_url=f"sqlite:///{root / name}.db", secret_key="bench",
                    worker_hash_key="bench", redis_url=redis_url)


def report(arm: str, slow_clients: int, timed: dict[str, slow.Timed]) -> None:
    alone, beside = timed["alone"], timed["beside slow clients"]
    ratio = beside.p99() / alone.p99() if alone.p99() else float("inf")
    print(f"| {arm} | {slow_clients} | {_ms(alone)} | {_ms(beside)} | {ratio:.2f}x | {alone.failed} / "
          f"{beside.failed} |", flush=True)


def _ms(timed: slow.Timed) -> str:
    ordered = sorted(timed.seconds)
    p50 = ordered[len(ordered) // 2]
    return f"{p50 * 1000:,.0f} / {timed.p99() * 1000:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, nargs="+", default=[8, 200], help="slow connections held, per run")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--turns", type=int, default=16, help="turns taken and submitted a round")
    parser.add_argument("--people", type=int, default=4, help="people working at once")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a person waits for an answer")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"commit {commit}; load before: {load()}")
    print("| served by | slow connections | alone p50 / p99 ms | beside them p50 / p99 ms | p99 ratio | failed |")
    print("|---|---:|---:|---:|---:|---:|")
    measure = dict(rounds=args.rounds, people=args.people, turns=args.turns, timeout=args.timeout)
    with tempfile.TemporaryDirectory(prefix="bench-slow-") as tmp:
        root = Path(tmp)
        for count in args.slow:
            name = f"alone-{count}"
            with Stack(settings_in(root, name), root / name / "logs", web_workers=2, web_threads=4,
                       queue_workers={}, beats=0) as stack:
                report("gunicorn alone", count, slow.rounds(stack.url, stack.settings, slow_clients=count, **measure))
                name = f"front-{count}"
                with ProcfileWeb(settings_in(root, name, stack.settings.redis_url), f"http://127.0.0.1:{free_port()}",
                                 root / name / "logs", {"WEB_CONCURRENCY": "2", "WEB_THREADS": "4"}) as web:
                    report("nginx + gunicorn (Procfile)", count,
                           slow.rounds(web.url, web.settings, slow_clients=count, **measure))
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
