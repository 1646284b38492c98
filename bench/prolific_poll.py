"""Calls to Prolific per poller round at the Wizard of Tasks size, against the fake Prolific.

Builds a Prolific batch of 549 conversations whose history holds about 17,600 turns (the Wizard of Tasks
collection) on both of its studies, as a collection looks in its last hours: nearly every turn approved
long ago, the last hour's turns stored and waiting for approval (some of them due), a hundred
participants in the middle of a turn. The fake Prolific holds the same submissions, with the times they
started. Then runs ``turkflow.hits.prolific.sync.poll`` (what Celery beat runs every
TURKFLOW_PROLIFIC_POLL_SECONDS) a few rounds and counts the requests Prolific received in each, by kind.

    python -m bench prolific_poll
    python -m bench.prolific_poll --conversations 549 --turns 17600 --rounds 3

The fake answers at most ``--page-cap`` submissions a page, as a server that caps page sizes would.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path


def build(settings, fake, conversations: int, turns: int, recent: int, in_progress: int, due: int):  # noqa: ANN001, ANN201
    """The batch and its history, in the database and on the fake; returns the batch id."""
    from sqlalchemy import insert, update
    from sqlmodel import select

    from turkflow.db import session_scope
    from turkflow.hits import lifecycle
    from turkflow.hits.prolific import api
    from turkflow.hits.prolific.provider import ProlificProvider
    from turkflow.models import Assignment, Batch, Hit, HitStatus, Task, Turn, Worker, utcnow
    from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
    from turkflow.simulator.fake_prolific import Submission

    provider = ProlificProvider(settings)
    now = utcnow()
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="wot",
                                             provider="prolific", max_turns=60)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
        conversation_ids = [s.get(Turn, h.turn_id).conversation_id for h in hits]
    with session_scope(settings.database_url) as s:
        lifecycle.publish_hit(s, provider, hit_ids[0])
    with session_scope(settings.database_url) as s:
        batch = s.get(Batch, batch_id)
        studies = {"student": s.get(Hit, hit_ids[0]).external_id,
                   "teacher": provider.study_id(s, batch, "teacher")}
        s.execute(update(Hit).where(Hit.id.in_(hit_ids)).values(status=HitStatus.open,
                                                               external_id=studies["student"]))
    api.transition_study(provider.client, studies["teacher"], "PUBLISH")
    with session_scope(settings.database_url) as s:
        workers = {role: [] for role in studies}
        rows = [{"external_id": f"prolific:bench-{role}-{n}", "role": role, "onboarded": True,
                 "status": "active", "platform_status": "active"}
                for role in studies for n in range(200)]
        s.execute(insert(Worker), rows)
        for worker in s.exec(select(Worker).where(Worker.external_id.like("prolific:bench-%"))):
            workers[worker.role].append(worker)
    per_conversation = max(1, turns // conversations)
    history = [(cid, index) for index in range(1, per_conversation + 1) for cid in conversation_ids]
    total = len(history)
    turn_rows, hit_rows, assignment_rows = [], [], []
    first_id = 10_000_000
    for n, (cid, index) in enumerate(history):
        age = total - n  # the last written is the newest
        role = "teacher" if index % 2 else "student"
        worker = workers[role][n % 200]
        if age <= recent:  # stored in the last hour; the oldest `due` of them are due for approval
            stored = now - timedelta(minutes=70 if age > recent - due else 59 * age / recent)
            status, prolific = "submitted", "AWAITING REVIEW"
        else:
            stored = now - timedelta(hours=2, seconds=age * 10)
            status, prolific = "approved", "APPROVED"
        row_id = first_id + n
        submission_id = f"bench-submission-{row_id}"
        turn_rows.append({"id": row_id, "conversation_id": cid, "index": index, "role": role,
                          "status": "submitted", "worker_id": worker.id, "text": "...", "answers": {},
                          "flags": [], "signals": {}, "opened_at": stored, "submitted_at": stored,
                          "reviewed_at": stored})
        hit_rows.append({"id": row_id, "turn_id": row_id, "attempt": 1, "provider": "prolific",
                         "external_id": studies[role], "role": role, "status": "submitted", "created_at": stored})
        assignment_rows.append({"id": row_id, "hit_id": row_id, "worker_id": worker.id,
                                "external_id": submission_id, "status": status, "accepted_at": stored,
                                "submitted_at": stored})
        fake.submissions[submission_id] = Submission(
            submission_id, studies[role], worker.external_id.removeprefix("prolific:"), prolific,
            started_at=_iso(stored - timedelta(minutes=2)), completed_at=_iso(stored))
    for n, hit_id in enumerate(hit_ids[:in_progress]):  # participants in the middle of a first turn
        worker = workers["student"][n]
        started = now - timedelta(minutes=n % 15)
        submission_id = f"bench-active-{n}"
        assignment_rows.append({"id": first_id + total + n, "hit_id": hit_id, "worker_id": worker.id,
                                "external_id": submission_id, "status": "accepted", "accepted_at": started})
        fake.submissions[submission_id] = Submission(submission_id, studies["student"],
                                                     worker.external_id.removeprefix("prolific:"), "ACTIVE",
                                                     started_at=_iso(started))
    with session_scope(settings.database_url) as s:
        for table, rows in ((Turn, turn_rows), (Hit, hit_rows), (Assignment, assignment_rows)):
            for start in range(0, len(rows), 2000):
                s.execute(insert(table), rows[start:start + 2000])
    for study_id in studies.values():  # a place for everyone who took part, and a spare
        taken = sum(1 for sub in fake.submissions.values() if sub.study_id == study_id)
        fake.studies[study_id].fields["total_available_places"] = taken + conversations
    return batch_id, total


def _iso(moment) -> str:  # noqa: ANN001
    return moment.isoformat().replace("+00:00", "Z")


def kind(method: str, path: str) -> str:
    if path.startswith("/api/v1/submissions/") and method == "GET" and path.count("/") == 4:
        return "list submissions"
    if path.endswith("/bulk-approve/"):
        return "bulk approve"
    if path.startswith("/api/v1/studies/") and method == "GET":
        return "get study"
    if path.startswith("/api/v1/submissions/") and path.endswith("/transition/"):
        return "transition submission"
    if path.startswith("/api/v1/submissions/") and method == "GET":
        return "get submission"
    return f"{method} {path.split('/')[3]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=549)
    parser.add_argument("--turns", type=int, default=17_600)
    parser.add_argument("--recent", type=int, default=300, help="Turns stored in the last hour, not yet approved.")
    parser.add_argument("--due", type=int, default=40, help="Of those, due for approval.")
    parser.add_argument("--in-progress", type=int, default=100, help="Participants in the middle of a turn.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--page-cap", type=int, default=100,
                        help="Most submissions the fake answers per page.")
    args = parser.parse_args()

    from turkflow.config import Settings
    from turkflow.db import upgrade
    from turkflow.hits.prolific import sync
    from turkflow.hits.prolific.provider import ProlificProvider
    from turkflow.simulator.fake_prolific import FakeProlific

    with tempfile.TemporaryDirectory(prefix="turkflow-bench-prolific-") as work, \
            FakeProlific(contract=None) as fake:
        fake.max_page_size = args.page_cap
        database_url = f"sqlite:///{Path(work) / 'turkflow.db'}"
        groups = ",".join(f"{role}={fake.make_group(f'Lab {role}s', [f'known-{role}'])}"
                          for role in ("student", "teacher"))
        settings = Settings(data_dir=Path(work), database_url=database_url, secret_key="bench",
                            worker_hash_key="bench", public_url="https://turkflow.example.org",
                            prolific_rehearsal_host="turkflow.example.org",  # the fake is on this machine
                            prolific_token=fake.token, prolific_workspace_id=fake.workspace_id,
                            prolific_base_url=fake.url, prolific_role_groups=groups)
        upgrade(database_url)
        started = time.perf_counter()
        _, history = build(settings, fake, args.conversations, args.turns, args.recent, args.in_progress,
                           args.due)
        print(f"built {args.conversations} conversations, {history} stored turns on 2 studies, "
              f"{len(fake.submissions)} submissions on the fake, in {time.perf_counter() - started:.1f}s")
        provider = ProlificProvider(settings)
        for number in range(1, args.rounds + 1):
            before = len(fake.requests)
            started = time.perf_counter()
            found = sync.poll(settings, provider)
            calls = Counter(kind(method, path) for method, path in fake.requests[before:])
            print(f"round {number}: {sum(calls.values())} calls to Prolific in {time.perf_counter() - started:.2f}s "
                  f"({', '.join(f'{n} {what}' for what, n in sorted(calls.items()))}); "
                  f"{len(found.approvals_asked)} approvals asked, {len(found.settled)} settled")


if __name__ == "__main__":
    main()
