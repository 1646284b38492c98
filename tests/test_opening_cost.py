"""Opening the next turn after a submission (issue 27: prebuilt statements on plain rows, no ORM objects):
the records it writes for every protocol, a redelivered message, a budget, a blocked writer and a race."""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import event, update
from sqlmodel import select

from turkflow import pipeline
from turkflow.db import get_engine, session_scope
from turkflow.hits import lifecycle
from turkflow.hits.keep import Keep
from turkflow.models import Batch, Conversation, Event, Hit, HitStatus, KeepRule, Task, Turn, TurnStatus, Worker, utcnow
from turkflow.protocols.questions import get_protocol

pytestmark = pytest.mark.both_backends  # ON CONFLICT, RETURNING and the partial unique index: the storage is the subject

# (protocol, the labels of the turns as they are submitted, launch options, after which turn its writer is blocked)
SCENARIOS = {
    # the student stops and the teacher's reply closes; the student's next turns are kept for them, the
    # teacher's for no one (blocked after writing turn 1)
    "wizard_of_tasks": ("wizard_of_tasks", ["request_step", "return_step", "request_step", "return_step", "stop",
                                            "chit_chat"], {"max_turns": 20, "keep": Keep(KeepRule.window, 60)}, 1),
    "star": ("star", ["hello", "reply", "complete"], {"max_turns": 20, "keep": Keep(KeepRule.window, 30)}, None),
    "frames": ("frames", ["ask", "book"], {"max_turns": 20}, None),
    "meep": ("meep", ["ask", "answer", "ask"], {"max_turns": 3, "keep": Keep()}, None),
    # three turns' rewards: the fourth is refused and the batch paused
    "budget": ("wizard_of_tasks", ["request_step", "return_step", "request_step"],
               {"max_turns": 20, "reward_cents": 50, "budget_cents": 150, "keep": Keep()}, None),
}


def play(settings, providers, protocol, labels, options, block_after):
    """Launch one conversation, then submit its turns with ``labels`` one by one, each followed by the opening
    Celery runs, delivered twice (a redelivered message): the second opens nothing. The records, in order."""
    roles = [get_protocol(protocol).first_role]
    roles.append(get_protocol(protocol).next_role(roles[0]))
    with session_scope(settings.database_url) as s:
        task = Task(key=f"{protocol}-1", protocol=protocol, title="A task", domain="test")
        s.add(task)
        for role in roles:
            s.add(Worker(external_id=role, role=role, onboarded=True))
        s.flush()
        batch, hits = lifecycle.launch_batch(s, [task], 1, name="b", protocol=protocol, **options)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
    for n, label in enumerate(labels):
        with session_scope(settings.database_url) as s:
            turn = s.exec(select(Turn).where(Turn.status == TurnStatus.open)).one()
            writer = s.exec(select(Worker).where(Worker.role == turn.role)).one()
            s.execute(update(Turn).where(Turn.id == turn.id).values(
                status=TurnStatus.submitted, label=label, worker_id=writer.id, text=f"turn {n}",
                submitted_at=utcnow()))
            s.execute(update(Hit).where(Hit.turn_id == turn.id).values(status=HitStatus.submitted))
            s.execute(update(Conversation).where(Conversation.id == turn.conversation_id).values(
                turn_count=turn.index + 1))
            if block_after == n:
                s.execute(update(Worker).where(Worker.id == writer.id).values(status="temporarily_blocked"))
            turn_id = turn.id
        opened = pipeline.open_after(settings, providers, turn_id)
        assert pipeline.open_after(settings, providers, turn_id) is None  # redelivered: nothing opens twice
        if opened is None:
            assert n == len(labels) - 1, "the conversation ended before its last turn"
    return records(settings)


def records(settings):
    """What the opening wrote, ids replaced by their order in their table (they differ between backends)."""
    with session_scope(settings.database_url) as s:
        order = {model: {row: n for n, row in enumerate(s.exec(select(model.id).order_by(model.id)))}
                 for model in (Batch, Conversation, Turn, Hit)}
        workers = {w.id: w.external_id for w in s.exec(select(Worker))}
        hit_ids = order[Hit]

        def data(d):
            out = dict(d)
            for key in ("hit_id", "expired_hit_id"):
                if key in out:
                    out[key] = f"h{hit_ids[out[key]]}"
            if "kept_for" in out:
                out["kept_for"] = workers[out["kept_for"]]
            if "external_id" in out:
                out["external_id"] = out["external_id"].split("-")[0] + f"-h{hit_ids[int(out['external_id'].split('-')[1])]}"
            return out

        return {
            "batch": [(b.status,) for b in s.exec(select(Batch))],
            "conversation": [(c.status, c.end_reason, c.turn_count) for c in s.exec(select(Conversation))],
            "turns": [(t.index, t.role, t.status, t.label, t.answers, t.flags, t.signals, t.reviewed_at)
                      for t in s.exec(select(Turn).order_by(Turn.id))],
            "hits": [(order[Turn][h.turn_id], h.attempt, h.provider, h.role, h.status,
                      h.external_id and f"local-h{hit_ids[int(h.external_id.split('-')[1])]}",
                      workers.get(h.reserved_for_id), h.reserved_until and (h.reserved_until - h.created_at).seconds,
                      h.lease_expires_at, h.expires_at)
                     for h in s.exec(select(Hit).order_by(Hit.id))],
            "events": [(e.kind, e.actor, e.batch_id is not None, e.conversation_id is not None,
                        e.turn_id is not None and order[Turn][e.turn_id], e.worker_id, data(e.data))
                       for e in s.exec(select(Event).order_by(Event.id))],
        }


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_opening_writes_the_expected_records_once_per_turn(settings, providers, scenario):
    found = json.loads(json.dumps(play(settings, providers, *SCENARIOS[scenario]), default=str))
    if os.environ.get("TURKFLOW_PRINT_OPENINGS"):  # how EXPECTED was taken, from the ORM opening (a93e3b3)
        print(f"OPENING {scenario} {json.dumps(found)}")
    assert found == EXPECTED[scenario]


def test_a_turn_another_process_opened_meanwhile_is_not_opened_twice(settings, providers):
    """Two openings of one conversation at once: the one whose INSERT comes second opens nothing and fails
    on nothing (the database keeps one open turn per conversation)."""
    play(settings, providers, "star", ["hello"], {"max_turns": 20}, None)
    with session_scope(settings.database_url) as s:
        turn = s.exec(select(Turn).where(Turn.status == TurnStatus.open)).one()
        s.execute(update(Turn).where(Turn.id == turn.id).values(status=TurnStatus.submitted, label="reply",
                                                                 submitted_at=utcnow()))
        s.execute(update(Hit).where(Hit.turn_id == turn.id).values(status=HitStatus.submitted))
        conversation_id, submitted = turn.conversation_id, turn.id
    engine, raced = get_engine(settings.database_url), []

    def other_process_first(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, ARG001
        if statement.startswith("INSERT INTO turn") and not raced:
            raced.append(None)  # the other opening's own INSERT passes
            raced[0] = pipeline.open_after(settings, providers, submitted)

    event.listen(engine, "before_cursor_execute", other_process_first)
    try:
        assert pipeline.open_after(settings, providers, submitted) is None
    finally:
        event.remove(engine, "before_cursor_execute", other_process_first)
    assert raced and raced[0] is not None
    with session_scope(settings.database_url) as s:
        opened = s.exec(select(Turn).where(Turn.conversation_id == conversation_id, Turn.index == 2)).all()
        assert len(opened) == 1 and opened[0].status == TurnStatus.open
        assert len(s.exec(select(Hit).where(Hit.turn_id == opened[0].id)).all()) == 1
        assert len(s.exec(select(Event).where(Event.kind == "turn_opened", Event.turn_id == opened[0].id)).all()) == 1


# What the ORM opening wrote (a93e3b3, before issue 27's rewrite), the JSON of ``records``.
EXPECTED = {
    'budget': {
        'batch': [
            ['paused'],
        ],
        'conversation': [
            ['active', None, 3],
        ],
        'turns': [
            [0, 'student', 'submitted', 'request_step', {}, [], {}, None],
            [1, 'teacher', 'submitted', 'return_step', {}, [], {}, None],
            [2, 'student', 'submitted', 'request_step', {}, [], {}, None],
        ],
        'hits': [
            [0, 1, 'local', 'student', 'submitted', 'local-h0', None, None, None, None],
            [1, 1, 'local', 'teacher', 'submitted', 'local-h1', None, None, None, None],
            [2, 1, 'local', 'student', 'submitted', 'local-h2', None, None, None, None],
        ],
        'events': [
            ['batch_launched', 'system', True, False, False, None, {'conversations': 1, 'provider': 'local', 'reward_cents': 50, 'max_turns': 20}],
            ['turn_opened', 'system', True, True, 0, None, {'index': 0, 'role': 'student', 'hit_id': 'h0'}],
            ['hit_published', 'provider', True, True, 0, None, {'hit_id': 'h0', 'external_id': 'local-h0'}],
            ['turn_opened', 'system', True, True, 1, None, {'index': 1, 'role': 'teacher', 'hit_id': 'h1'}],
            ['hit_published', 'provider', True, True, 1, None, {'hit_id': 'h1', 'external_id': 'local-h1'}],
            ['turn_opened', 'system', True, True, 2, None, {'index': 2, 'role': 'student', 'hit_id': 'h2'}],
            ['hit_published', 'provider', True, True, 2, None, {'hit_id': 'h2', 'external_id': 'local-h2'}],
            ['batch_paused', 'system', True, False, False, None, {'reason': 'budget reached'}],
        ],
    },
    'frames': {
        'batch': [
            ['completed'],
        ],
        'conversation': [
            ['completed', 'wizard_booked', 2],
        ],
        'turns': [
            [0, 'user', 'submitted', 'ask', {}, [], {}, None],
            [1, 'wizard', 'submitted', 'book', {}, [], {}, None],
        ],
        'hits': [
            [0, 1, 'local', 'user', 'submitted', 'local-h0', None, None, None, None],
            [1, 1, 'local', 'wizard', 'submitted', 'local-h1', None, None, None, None],
        ],
        'events': [
            ['batch_launched', 'system', True, False, False, None, {'conversations': 1, 'provider': 'local', 'reward_cents': 20, 'max_turns': 20}],
            ['turn_opened', 'system', True, True, 0, None, {'index': 0, 'role': 'user', 'hit_id': 'h0'}],
            ['hit_published', 'provider', True, True, 0, None, {'hit_id': 'h0', 'external_id': 'local-h0'}],
            ['turn_opened', 'system', True, True, 1, None, {'index': 1, 'role': 'wizard', 'hit_id': 'h1'}],
            ['hit_published', 'provider', True, True, 1, None, {'hit_id': 'h1', 'external_id': 'local-h1'}],
            ['conversation_completed', 'system', True, True, False, None, {'reason': 'wizard_booked', 'turns': 2}],
            ['batch_completed', 'system', True, False, False, None, {}],
        ],
    },
    'meep': {
        'batch': [
            ['completed'],
        ],
        'conversation': [
            ['completed', 'max_turns', 3],
        ],
        'turns': [
            [0, 'user', 'submitted', 'ask', {}, [], {}, None],
            [1, 'wizard', 'submitted', 'answer', {}, [], {}, None],
            [2, 'user', 'submitted', 'ask', {}, [], {}, None],
        ],
        'hits': [
            [0, 1, 'local', 'user', 'submitted', 'local-h0', None, None, None, None],
            [1, 1, 'local', 'wizard', 'submitted', 'local-h1', None, None, None, None],
            [2, 1, 'local', 'user', 'submitted', 'local-h2', None, None, None, None],
        ],
        'events': [
            ['batch_launched', 'system', True, False, False, None, {'conversations': 1, 'provider': 'local', 'reward_cents': 20, 'max_turns': 3}],
            ['turn_opened', 'system', True, True, 0, None, {'index': 0, 'role': 'user', 'hit_id': 'h0'}],
            ['hit_published', 'provider', True, True, 0, None, {'hit_id': 'h0', 'external_id': 'local-h0'}],
            ['turn_opened', 'system', True, True, 1, None, {'index': 1, 'role': 'wizard', 'hit_id': 'h1'}],
            ['hit_published', 'provider', True, True, 1, None, {'hit_id': 'h1', 'external_id': 'local-h1'}],
            ['turn_opened', 'system', True, True, 2, None, {'index': 2, 'role': 'user', 'hit_id': 'h2'}],
            ['hit_published', 'provider', True, True, 2, None, {'hit_id': 'h2', 'external_id': 'local-h2'}],
            ['conversation_completed', 'system', True, True, False, None, {'reason': 'max_turns', 'turns': 3}],
            ['batch_completed', 'system', True, False, False, None, {}],
        ],
    },
    'star': {
        'batch': [
            ['completed'],
        ],
        'conversation': [
            ['completed', 'user_complete', 3],
        ],
        'turns': [
            [0, 'user', 'submitted', 'hello', {}, [], {}, None],
            [1, 'wizard', 'submitted', 'reply', {}, [], {}, None],
            [2, 'user', 'submitted', 'complete', {}, [], {}, None],
        ],
        'hits': [
            [0, 1, 'local', 'user', 'submitted', 'local-h0', None, None, None, None],
            [1, 1, 'local', 'wizard', 'submitted', 'local-h1', None, None, None, None],
            [2, 1, 'local', 'user', 'submitted', 'local-h2', 'user', 30, None, None],
        ],
        'events': [
            ['batch_launched', 'system', True, False, False, None, {'conversations': 1, 'provider': 'local', 'reward_cents': 20, 'max_turns': 20}],
            ['turn_opened', 'system', True, True, 0, None, {'index': 0, 'role': 'user', 'hit_id': 'h0'}],
            ['hit_published', 'provider', True, True, 0, None, {'hit_id': 'h0', 'external_id': 'local-h0'}],
            ['turn_opened', 'system', True, True, 1, None, {'index': 1, 'role': 'wizard', 'hit_id': 'h1'}],
            ['hit_published', 'provider', True, True, 1, None, {'hit_id': 'h1', 'external_id': 'local-h1'}],
            ['turn_opened', 'system', True, True, 2, None, {'index': 2, 'role': 'user', 'hit_id': 'h2', 'kept_for': 'user'}],
            ['hit_published', 'provider', True, True, 2, None, {'hit_id': 'h2', 'external_id': 'local-h2'}],
            ['conversation_completed', 'system', True, True, False, None, {'reason': 'user_complete', 'turns': 3}],
            ['batch_completed', 'system', True, False, False, None, {}],
        ],
    },
    'wizard_of_tasks': {
        'batch': [
            ['completed'],
        ],
        'conversation': [
            ['completed', 'student_stop', 6],
        ],
        'turns': [
            [0, 'student', 'submitted', 'request_step', {}, [], {}, None],
            [1, 'teacher', 'submitted', 'return_step', {}, [], {}, None],
            [2, 'student', 'submitted', 'request_step', {}, [], {}, None],
            [3, 'teacher', 'submitted', 'return_step', {}, [], {}, None],
            [4, 'student', 'submitted', 'stop', {}, [], {}, None],
            [5, 'teacher', 'submitted', 'chit_chat', {}, [], {}, None],
        ],
        'hits': [
            [0, 1, 'local', 'student', 'submitted', 'local-h0', None, None, None, None],
            [1, 1, 'local', 'teacher', 'submitted', 'local-h1', None, None, None, None],
            [2, 1, 'local', 'student', 'submitted', 'local-h2', 'student', 60, None, None],
            [3, 1, 'local', 'teacher', 'submitted', 'local-h3', None, None, None, None],
            [4, 1, 'local', 'student', 'submitted', 'local-h4', 'student', 60, None, None],
            [5, 1, 'local', 'teacher', 'submitted', 'local-h5', None, None, None, None],
        ],
        'events': [
            ['batch_launched', 'system', True, False, False, None, {'conversations': 1, 'provider': 'local', 'reward_cents': 20, 'max_turns': 20}],
            ['turn_opened', 'system', True, True, 0, None, {'index': 0, 'role': 'student', 'hit_id': 'h0'}],
            ['hit_published', 'provider', True, True, 0, None, {'hit_id': 'h0', 'external_id': 'local-h0'}],
            ['turn_opened', 'system', True, True, 1, None, {'index': 1, 'role': 'teacher', 'hit_id': 'h1'}],
            ['hit_published', 'provider', True, True, 1, None, {'hit_id': 'h1', 'external_id': 'local-h1'}],
            ['turn_opened', 'system', True, True, 2, None, {'index': 2, 'role': 'student', 'hit_id': 'h2', 'kept_for': 'student'}],
            ['hit_published', 'provider', True, True, 2, None, {'hit_id': 'h2', 'external_id': 'local-h2'}],
            ['turn_opened', 'system', True, True, 3, None, {'index': 3, 'role': 'teacher', 'hit_id': 'h3'}],
            ['hit_published', 'provider', True, True, 3, None, {'hit_id': 'h3', 'external_id': 'local-h3'}],
            ['turn_opened', 'system', True, True, 4, None, {'index': 4, 'role': 'student', 'hit_id': 'h4', 'kept_for': 'student'}],
            ['hit_published', 'provider', True, True, 4, None, {'hit_id': 'h4', 'external_id': 'local-h4'}],
            ['turn_opened', 'system', True, True, 5, None, {'index': 5, 'role': 'teacher', 'hit_id': 'h5'}],
            ['hit_published', 'provider', True, True, 5, None, {'hit_id': 'h5', 'external_id': 'local-h5'}],
            ['conversation_completed', 'system', True, True, False, None, {'reason': 'student_stop', 'turns': 6}],
            ['batch_completed', 'system', True, False, False, None, {}],
        ],
    },
}


def test_a_hit_another_process_published_meanwhile_is_published_once(settings, providers):
    """``publish_hit`` (platforms, the reconciler) publishes through the opening's compare-and-set: when
    another process published the HIT between the read and the UPDATE, one ``hit_published`` event stays."""
    with session_scope(settings.database_url) as s:
        task = Task(key="wot-1", protocol="wizard_of_tasks", title="A task", domain="test")
        s.add(task)
        s.flush()
        _, hits = lifecycle.launch_batch(s, [task], 1, name="b")
        hit_id = hits[0].id
    engine, raced = get_engine(settings.database_url), []

    def other_process_first(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, ARG001
        if statement.startswith("UPDATE hit SET external_id") and not raced:
            raced.append(None)
            with session_scope(settings.database_url) as other:
                raced[0] = lifecycle.publish_hit(other, providers.get("local"), hit_id).status

    event.listen(engine, "before_cursor_execute", other_process_first)
    try:
        with session_scope(settings.database_url) as s:
            hit = lifecycle.publish_hit(s, providers.get("local"), hit_id)
            assert (hit.status, hit.external_id) == (HitStatus.open, f"local-{hit_id}")
    finally:
        event.remove(engine, "before_cursor_execute", other_process_first)
    assert raced == [HitStatus.open]
    with session_scope(settings.database_url) as s:
        assert len(s.exec(select(Event).where(Event.kind == "hit_published")).all()) == 1
        assert lifecycle.publish_hit(s, providers.get("local"), hit_id).status == HitStatus.open  # again: nothing
        assert len(s.exec(select(Event).where(Event.kind == "hit_published")).all()) == 1
