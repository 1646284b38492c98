"""`turkflow simulate --protocol star|frames|meep --provider prolific`: simulated participants enter through
their role's study link on the fake Prolific (every call checked against Prolific's contract) and play the
protocol's own turn pages (STAR's knowledge base and suggestions, Frames' searches and bookings, MEEP's
clicks) through the real stack; the poller pays every turn once, and the report says who wrote each
conversation's roles."""

from __future__ import annotations

from collections import defaultdict

import pytest
from sqlmodel import select

from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.models import Batch, Conversation, ConversationStatus, Turn, TurnStatus
from turkflow.simulator.run import SimulationConfig, run_with_stack

from tests.fake_prolific import SPEC_PATH, FakeProlific

# What each protocol's wizard (MEEP: agent) does on its own page, as the report's events count it.
PLAYED_ON_THE_PAGE = {"star": ("Wizard query", "Wizard pick_suggestion"),
                      "frames": ("Wizard search", "Wizard book"),
                      "meep": ("Agent call_api", "Agent pick_template")}


@pytest.mark.parametrize("protocol", sorted(PLAYED_ON_THE_PAGE))
def test_a_protocol_on_prolific_pays_every_turn_once_loses_nothing_and_keeps_one_writer_per_role(
        protocol, database_url, tmp_path):
    config = SimulationConfig(students=2, teachers=2, conversations=3, mix={}, seed=3, concurrency=2,
                              settle_timeout=60, protocol=protocol, provider="prolific")
    settings = Settings(data_dir=tmp_path, database_url=database_url, secret_key="test", worker_hash_key="test")
    with FakeProlific(contract=SPEC_PATH) as fake:
        report = run_with_stack(settings, tmp_path, config, web_workers=2, web_threads=2, prolific_fake=fake)
    assert not fake.violations, "Prolific's contract was broken:\n" + "\n".join(fake.violations)
    done = report["reproducible"]
    with session_scope(database_url) as s:
        conversations = s.exec(select(Conversation)).all()
        turns = s.exec(select(Turn).where(Turn.status == TurnStatus.submitted)).all()
    writers = defaultdict(set)
    for turn in turns:
        writers[(turn.conversation_id, turn.role)].add(turn.worker_id)

    # Nothing lost: every planned turn stored, every conversation finished, each page's work logged.
    assert done["stop_reason"] == "all conversations finished"
    assert done["turns"]["stored"] == done["turns"]["planned"] == len(turns)
    assert done["turns"]["lost"] == done["turns"]["unexpected"] == done["turns"]["history_mismatches"] == 0
    assert len(conversations) == 3 and all(c.status == ConversationStatus.completed for c in conversations)
    events = done[protocol]["events"]
    assert all(events.get(action, 0) > 0 for action in PLAYED_ON_THE_PAGE[protocol]), events
    # The protocol keeps people for their session, so a place lasts one: each participant writes turn after
    # turn in one submission, finished with the code once no work is left, approved once by the poller; so
    # every stored turn is paid exactly once, and the reward once a session.
    paid = done["prolific_settlement"]
    assert paid["turns_stored"] == done["turns"]["stored"] == paid["turns_paid_once"] > 0
    assert paid["turns_paid_more_than_once"] == paid["turns_unpaid"] == 0
    assert 0 < paid["session_places"] == len(fake.submissions) < len(turns)
    assert set(fake.submissions[s].status for s in fake.submissions) == {"APPROVED"}
    with session_scope(database_url) as s:
        reward = s.exec(select(Batch.reward_cents)).one()
    assert done["money"]["rewards_cents"] == reward * len(fake.submissions)
    # The crowd stays its sessions under the protocol's own rule (session): one writer per role, reported.
    assert all(len(ids) == 1 for ids in writers.values())
    assert done["one_writer_per_role_share"] == 1.0
    assert done["next_turn_wait_p95_seconds"] >= 0  # reported, on the simulated clock (a round is a minute)
    assert "hand-made role groups" in report["prolific"]["qualified_by"]
