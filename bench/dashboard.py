"""Review dashboard page times at 1M stored turns against 1k.

For each size, builds the history (``bench._history``), temporarily blocks 20 of its workers, runs what
Celery beat runs (the daily review, the hourly rollups, the batch snapshots; their times are shown, they
are not per page view), signs a requester in and times each ``/admin`` page in the Flask app itself
(median of 3 after one warm-up request), so the numbers are the server's work without network or browser.

Each page is read by three requesters (``turkflow.access``): an admin, who sees everything; the owner of the
history's batch, whose pages ask at every row whether it is theirs; and a newcomer whose only batch has one
conversation, whose lists must pass over the whole history to find the little that is theirs.

    python -m bench.dashboard                          # 1k, 100k and 1M turns, SQLite
    python -m bench.dashboard --turns 1000,200000 --backends sqlite,postgresql

At 1k turns the pages hold fewer rows than a page's worth (a worker has two turns), so the ratio that
says whether a page stays flat is the last size against the one before (both full pages).
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from bench._cpu import load
from bench._history import build, fresh_database, veteran_workers

BLOCKED = 20
READERS = ("admin", "owner", "newcomer")


def prepare(database_url: str, work: Path) -> dict[str, float]:
    """Blocks, the review queue, rollups and snapshots, as beat would have left them, and the three readers;
    seconds for each step of beat's."""
    from sqlalchemy import update
    from sqlmodel import select

    from turkflow.config import Settings
    from turkflow.db import session_scope
    from turkflow.models import Batch, Conversation, Requester, Worker, WorkerStatus
    from turkflow.quality import activity, review
    from turkflow.requesters import create_requester

    settings = Settings(data_dir=work, database_url=database_url, secret_key="bench", worker_hash_key="bench")
    seconds = {}
    with session_scope(database_url) as session:
        session.execute(update(Worker).where(Worker.id.in_(list(veteran_workers("student"))[:BLOCKED]))
                        .values(status=WorkerStatus.temporarily_blocked))
        for name in READERS:  # the first is an admin
            create_requester(session, name, "bench-password")
        owner, newcomer = (session.exec(select(Requester.id).where(Requester.username == name)).one()
                           for name in READERS[1:])
        history = session.exec(select(Batch)).one()
        history.requester_id = owner
        small = Batch(name="newcomer's", requester_id=newcomer)
        session.add_all([history, small])
        session.flush()
        session.add(Conversation(batch_id=small.id, task_id=session.exec(select(Conversation.task_id)).first()))
    for name, step in (("daily review", lambda s: review.daily_review(s, review.ReviewPolicy.of(settings))),
                       ("rollups (all history)", lambda s: activity.refresh(s)),
                       ("rollups (every 5 min)", lambda s: activity.refresh(s)),
                       ("batch snapshots", lambda s: activity.snapshot_batches(s))):
        started = time.perf_counter()
        with session_scope(database_url) as session:
            step(session)
        seconds[name] = time.perf_counter() - started
    return seconds


def pages(database_url: str, reader: str) -> list[str]:
    """The pages timed, of the history's batch (the newcomer's own batch for them: the others are a 404)."""
    from sqlmodel import func, select

    from turkflow.db import session_scope
    from turkflow.models import Batch, Conversation

    with session_scope(database_url) as session:
        batch_id = session.exec(select(func.min(Batch.id) if reader != "newcomer" else func.max(Batch.id))).one()
        conversation_id = session.exec(select(func.max(Conversation.id))
                                       .where(Conversation.batch_id == batch_id)).one()
    worker = veteran_workers("teacher")[0]
    blocked = veteran_workers("student")[0]
    theirs = [f"/admin/workers/{worker}", f"/admin/workers/{blocked}/received"] if reader != "newcomer" else []
    return ["/admin/review", "/admin/workers", "/admin/workers?status=temporarily_blocked", *theirs,
            "/admin/batches", f"/admin/batches/{batch_id}", f"/admin/batches/{batch_id}/conversations",
            f"/admin/conversations/{conversation_id}"]


def time_pages(database_url: str, work: Path, reader: str) -> dict[str, float]:
    """Sign ``reader`` in and time every page; milliseconds, median of 3."""
    from turkflow.config import Settings
    from turkflow.web import create_app

    app = create_app(Settings(data_dir=work, database_url=database_url, secret_key="bench", worker_hash_key="bench"))
    client = app.test_client()
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"|value="([^"]+)"[^>]*name="csrf_token"',
                      client.get("/admin/login").get_data(as_text=True))
    signed_in = client.post("/admin/login", data={"username": reader, "password": "bench-password",
                                                  "csrf_token": token.group(1) or token.group(2)})
    if signed_in.status_code != 302:
        raise SystemExit(f"error: could not sign in to the dashboard (HTTP {signed_in.status_code})")
    times = {}
    for page in pages(database_url, reader):
        response = client.get(page)
        if response.status_code != 200:
            raise SystemExit(f"error: {page} answered HTTP {response.status_code}")
        samples = []
        for _ in range(3):
            started = time.perf_counter()
            client.get(page)
            samples.append(time.perf_counter() - started)
        times[re.sub(r"/[0-9]+", "/<id>", page)] = statistics.median(samples) * 1000
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1000,100000,1000000", help="comma-separated history sizes in turns")
    parser.add_argument("--backends", default="sqlite", help="sqlite, postgresql or both")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.turns.split(",")]
    print(f"dashboard: page time in ms (median of 3) at each history size; {load()}")
    for backend in args.backends.split(","):
        results, background = {}, {}
        for turns in sizes:
            with (fresh_database(backend) as url,
                  tempfile.TemporaryDirectory(prefix="turkflow-bench-dashboard-") as scratch):
                work = Path(scratch)
                build(url, turns)
                background[turns] = prepare(url, work)
                for reader in READERS:
                    results[turns, reader] = time_pages(url, work, reader)
        first, before, last = sizes[0], sizes[max(len(sizes) - 2, 0)], sizes[-1]
        print(f"  {backend}: reader, page | " + " | ".join(f"{n:,} turns" for n in sizes)
              + f" | {last:,} / {before:,}")
        for reader in READERS:
            for page in results[first, reader]:
                shown = " | ".join(f"{results[n, reader][page]:7.1f}" for n in sizes)
                ratio = results[last, reader][page] / results[before, reader][page]
                print(f"    {reader:8} {page:44} | {shown} | {ratio:5.2f}x")
        print(f"  {backend}: beat's background work in s at " + " / ".join(f"{n:,}" for n in sizes) + " turns: "
              + "; ".join(f"{name} " + " / ".join(f"{background[n][name]:.2f}" for n in sizes)
                          for name in background[first]), flush=True)
    print(f"  {load()}")


if __name__ == "__main__":
    main()
