"""`turkflow simulate --provider prolific`: a small simulated crowd works a batch on Prolific, played by the
fake Prolific (every call checked against Prolific's contract), through the real stack (gunicorn, a
prefork Celery worker, Redis, SQLite and PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from typing import Iterator

import pytest
from sqlalchemy import func
from sqlmodel import col, select

from tests.conftest import SHARED_DATA
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.models import (
    Assignment,
    Batch,
    Bonus,
    Conversation,
    Hit,
    Rating,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
)
from turkflow.simulator.run import SimulationConfig, run_with_stack

from tests.fake_prolific import SPEC_PATH, FakeProlific

# Short windows, so a few turns are enough for the monitor to block the spammers and pay bonuses.
SMALL = SimulationConfig(students=3, teachers=3, conversations=3, max_turns=8, mean_turns=8,
                         mix={"spammer": 0.34}, seed=5, concurrency=2, policy="k=2,p=0.5",
                         dialogs=SHARED_DATA / "sgd" / "dev", settle_timeout=30, provider="prolific")


@pytest.fixture(scope="module")
def small_run(module_database_url, tmp_path_factory) -> Iterator[tuple[dict, FakeProlific]]:
    """SMALL once per backend on a fake Prolific that checks every call against Prolific's contract, read by
    the tests below (each run through the stack costs half a minute); a broken contract fails the module."""
    work = tmp_path_factory.mktemp("small")
    settings = Settings(data_dir=work, database_url=module_database_url, secret_key="test", worker_hash_key="test")
    with FakeProlific(contract=SPEC_PATH) as fake:
        yield run_with_stack(settings, work, SMALL, web_workers=2, web_threads=2, prolific_fake=fake), fake
    assert not fake.violations, "Prolific's contract was broken:\n" + "\n".join(fake.violations)


def test_a_simulation_on_prolific_reports_what_the_database_and_prolific_hold(module_database_url, small_run):
    database_url = module_database_url
    report, fake_prolific = small_run
    done = report["reproducible"]
    with session_scope(database_url) as s:
        batch = s.exec(select(Batch).order_by(col(Batch.id).desc())).first()
        turns = s.exec(
            select(Turn).join(Conversation, Conversation.id == Turn.conversation_id)
            .where(Conversation.batch_id == batch.id, Turn.status == TurnStatus.submitted)
        ).all()
        submissions = {turn.id: s.exec(select(Assignment.external_id).join(Hit, Hit.id == Assignment.hit_id)
                                       .where(Hit.turn_id == turn.id, Assignment.status.in_(
                                           ("submitted", "approved")))).one() for turn in turns}
        names = {w.id: w.external_id for w in s.exec(select(Worker))}
        ratings = s.exec(select(func.count()).select_from(Rating)).one()
        blocked = s.exec(select(func.count()).select_from(Worker)
                         .where(Worker.status != WorkerStatus.active)).one()
        bonus_cents = s.exec(select(func.coalesce(func.sum(Bonus.amount_cents), 0))).one()
        completed = s.exec(select(func.count()).select_from(Conversation)
                           .where(Conversation.batch_id == batch.id,
                                  Conversation.status == "completed")).one()

    assert batch.provider == "prolific"
    assert done["monitor"]["blocked"] >= 1 and bonus_cents > 0  # the monitor had work to do, and paid
    assert done["turns"]["stored"] == done["turns"]["confirmed"] == len(turns) > 0
    assert done["turns"]["lost"] == done["turns"]["unexpected"] == done["turns"]["history_mismatches"] == 0
    assert done["conversations"]["completed"] == completed
    assert done["ratings"] == ratings
    assert sum(row["blocked"] for row in done["crowd"].values()) == done["monitor"]["blocked"] == blocked
    assert done["money"]["rewards_cents"] == 20 * len(turns)
    assert done["money"]["bonuses_cents"] == bonus_cents
    per_worker = Counter(names[t.worker_id] for t in turns)
    assert sum(per_worker.values()) == sum(row["turns"] for row in done["crowd"].values())
    assert all(external_id.startswith("prolific:sim-") for external_id in per_worker)
    assert report["measured"]["http"]["errors"] == {}

    # Prolific's side: every stored turn is a submission finished with its study's code, every bonus paid
    # there once, and not one call broke the contract (the fixture also fails the test on any).
    seen = report["prolific"]
    assert seen["checked"] and seen["violations"] == 0 and seen["calls"] > 0
    for turn in turns:
        submission = fake_prolific.submissions[submissions[turn.id]]
        assert submission.status in ("AWAITING REVIEW", "APPROVED")
        assert submission.participant_id == names[turn.worker_id].removeprefix("prolific:")
    assert seen["bonus_cents_paid"] == bonus_cents
    assert sorted(p.submission_id for p in fake_prolific.payments) == sorted(
        set(p.submission_id for p in fake_prolific.payments))


def test_same_seed_gives_the_same_report_on_prolific(small_run, tmp_path, another_database_url):
    """Participants take whatever turn our page gives them, yet the same seed gives the same report (SMALL
    again, on a fresh database of the same backend and a Prolific of its own, as the module's run)."""
    settings = Settings(data_dir=tmp_path, database_url=another_database_url, secret_key="test",
                        worker_hash_key="test")
    (first, _), second = small_run, run_with_stack(settings, tmp_path, SMALL, web_workers=2, web_threads=2)
    assert first["prolific"]["checked"]
    assert first["prolific"]["violations"] == second["prolific"]["violations"] == 0
    assert first["reproducible"] == second["reproducible"]
    assert first["parameters"] == second["parameters"]
