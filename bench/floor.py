"""Our per-turn server cost against the floor: a bare Flask endpoint that only inserts a row.

Both run under the same gunicorn (workers, threads), on the same SQLite engine setup (``turkflow.db``: WAL,
busy timeout), driven by the same number of concurrent keep-alive clients:

- the floor: ``POST /insert`` stores one row (conversation, index, text) and answers 201;
- ours: a simulated turn as a worker makes it (take, which answers with the turn page, and submit, which
  answers with the queue: two requests) plus the Celery work it causes (open the next turn, judge the
  rating, check the content).

CPU seconds of the server processes are counted per insert and per turn, so the ratio holds on a busy
machine; requests and turns per second are shown too.

    python -m bench.floor
    python -m bench.floor --inserts 20000 --conversations 100 --workers 80
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bench._cpu import cpu_seconds, load

ROOT = Path(__file__).resolve().parents[1]
DATABASE_ENV = "BENCH_FLOOR_DATABASE_URL"


def floor_table():  # noqa: ANN201 - a SQLAlchemy Table
    from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, func

    return Table("floor_turn", MetaData(), Column("id", Integer, primary_key=True), Column("conversation_id", Integer),
                 Column("index", Integer), Column("text", String), Column("created_at", DateTime, default=func.now()))


def create_floor_app():  # noqa: ANN201 - a Flask app, imported by gunicorn in its own process
    """The floor: parse a form, insert one row, answer. The table exists already: gunicorn's workers start
    at once, and each creating it would race the others."""
    from flask import Flask, request
    from sqlalchemy import insert

    from turkflow.db import get_engine

    engine = get_engine(os.environ[DATABASE_ENV])
    table = floor_table()
    app = Flask(__name__)

    @app.post("/insert")
    def insert_row():  # noqa: ANN202
        with engine.begin() as conn:
            conn.execute(insert(table).values(conversation_id=int(request.form["conversation_id"]),
                                              index=int(request.form["index"]), text=request.form["text"]))
        return {"ok": True}, 201

    return app


def floor(inserts: int, concurrency: int, web_workers: int, web_threads: int) -> dict[str, float]:
    from turkflow.db import dispose_engine, get_engine
    from turkflow.simulator.stack import free_port, gunicorn_command, wait_for

    scratch = tempfile.TemporaryDirectory(prefix="turkflow-bench-floor-")
    work = Path(scratch.name)
    port = free_port()

    database_url = f"sqlite:///{work / 'floor.db'}"
    floor_table().metadata.create_all(get_engine(database_url))
    dispose_engine(database_url)
    env = {**os.environ, DATABASE_ENV: database_url}
    log = open(work / "gunicorn.log", "ab")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        gunicorn_command("bench.floor:create_floor_app()", f"127.0.0.1:{port}", workers=web_workers,
                         threads=web_threads),
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/insert"
    try:
        wait_for(lambda: requests.post(url, data={"conversation_id": 0, "index": 0, "text": "warm"}).ok, "floor app",
                 30, server)

        def client(n: int) -> int:
            http = requests.Session()
            for i in range(inserts // concurrency):
                response = http.post(url, data={"conversation_id": n, "index": i,
                                                "text": "Heat the pan over medium heat and brush it with butter."})
                response.raise_for_status()
            return inserts // concurrency

        before = cpu_seconds({"web": server})["web"]
        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            done = sum(pool.map(client, range(concurrency)))
        seconds = time.perf_counter() - started
        used = cpu_seconds({"web": server})["web"] - before
    finally:
        server.terminate()
        server.wait(timeout=300)  # gunicorn's graceful stop takes minutes on a machine at load 30 and more
        log.close()
        scratch.cleanup()
    return {"inserts": done, "per_second": done / seconds, "web_cpu_ms": 1000 * used / done}


def ours(conversations: int, workers: int, concurrency: int, web_workers: int, web_threads: int) -> dict[str, float]:
    from bench.e2e import simulate

    report = simulate("sqlite", conversations, workers, 33, seed=1, concurrency=concurrency, think_time=0.0,
                      web_workers=web_workers, web_threads=web_threads, celery_concurrency=2)
    turns = report["reproducible"]["turns"]["stored"]
    requests_made = report["measured"]["http"]["requests"]
    return {"turns": turns, "per_second": report["measured"]["turns_per_second"],
            "requests_per_turn": requests_made / turns,
            "web_cpu_ms": 1000 * report["cpu_seconds"]["gunicorn"] / turns,
            "celery_cpu_ms": 1000 * report["cpu_seconds"]["celery"] / turns}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.splitlines()[0])
    parser.add_argument("--inserts", type=int, default=10_000)
    parser.add_argument("--conversations", type=int, default=60)
    parser.add_argument("--workers", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--web-threads", type=int, default=4)
    args = parser.parse_args(argv)
    print(f"floor: gunicorn {args.web_workers} workers x {args.web_threads} threads, SQLite, "
          f"{args.concurrency} concurrent clients; {load()}")
    bare = floor(args.inserts, args.concurrency, args.web_workers, args.web_threads)
    print(f"  bare insert endpoint: {bare['inserts']} inserts, {bare['per_second']:.0f}/s, "
          f"web CPU {bare['web_cpu_ms']:.2f} ms per insert", flush=True)
    turn = ours(args.conversations, args.workers, args.concurrency, args.web_workers, args.web_threads)
    total = turn["web_cpu_ms"] + turn["celery_cpu_ms"]
    print(f"  turkflow turn: {turn['turns']} turns, {turn['per_second']:.1f}/s, {turn['requests_per_turn']:.2f} "
          f"requests per turn; CPU per turn: web {turn['web_cpu_ms']:.1f} ms, Celery {turn['celery_cpu_ms']:.1f} ms, "
          f"total {total:.1f} ms")
    per_request = turn["web_cpu_ms"] / turn["requests_per_turn"] / bare["web_cpu_ms"]
    print(f"  per request {per_request:.1f}x  (web CPU per request against one insert; target at most 3x)")
    print(f"  per turn {total / bare['web_cpu_ms']:.1f}x  (all server CPU per turn, web and Celery, against one "
          f"insert; target at most 20x)")
    print(f"  web CPU per turn {turn['web_cpu_ms'] / bare['web_cpu_ms']:.1f}x; "
          f"{bare['per_second'] / turn['per_second']:.0f}x fewer turns than inserts per second; {load()}")

if __name__ == "__main__":
    main()
