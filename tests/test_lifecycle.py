"""A turn's life in the domain functions: chaining, closing, leases, budgets, repair."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS, launch, make_worker
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import (Batch, BatchStatus, Conversation, Hit, HitStatus, Turn, TurnStatus, utcnow)


def play(settings, providers, worker, answers, now=None):
    """Take the first open turn for the worker, submit it, and run what Celery would run."""
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, worker, now=now)[0]
        assignment = lifecycle.take_turn(s, worker, hit.id, lease_seconds=60, now=now)
        turn_id = lifecycle.submit_turn(s, assignment.external_id, worker, answers, now=now).turn.id
    pipeline.after_submission(settings, providers, turn_id)
    return turn_id


def conversation(settings):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation)).one()


def test_student_stop_then_teacher_closing_turn_completes_the_conversation(settings, providers):
    launch(settings, providers, max_turns=20)
    student, teacher = make_worker(settings, "student", "s"), make_worker(settings, "teacher", "t")
    play(settings, providers, student, STUDENT_ANSWERS)
    play(settings, providers, teacher, TEACHER_ANSWERS)
    play(settings, providers, student, dict(STUDENT_ANSWERS, intent="stop", response="Done, thanks!"))
    assert conversation(settings).status == "active"  # the teacher still closes
    play(settings, providers, teacher, dict(TEACHER_ANSWERS, action="chit_chat", response="Enjoy!"))
    done = conversation(settings)
    assert (done.status, done.end_reason, done.turn_count) == ("completed", "student_stop", 4)
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).one().status == BatchStatus.completed
        assert s.exec(select(Hit).where(Hit.status == HitStatus.open)).all() == []


def test_conversation_closes_at_max_turns(settings, providers):
    launch(settings, providers, max_turns=3)
    student, teacher = make_worker(settings, "student", "s"), make_worker(settings, "teacher", "t")
    for worker, answers in [(student, STUDENT_ANSWERS), (teacher, TEACHER_ANSWERS), (student, STUDENT_ANSWERS)]:
        play(settings, providers, worker, answers)
    done = conversation(settings)
    assert (done.status, done.end_reason, done.turn_count) == ("completed", "max_turns", 3)


def test_the_database_refuses_a_second_open_turn_in_a_conversation(settings, providers):
    launch(settings, providers)
    with session_scope(settings.database_url) as s:
        first = s.exec(select(Turn)).one()
        with pytest.raises(IntegrityError):
            with s.begin_nested():
                s.add(Turn(conversation_id=first.conversation_id, index=1, role="teacher"))
                s.flush()


def test_advancing_twice_opens_one_turn(settings, providers):
    launch(settings, providers)
    student = make_worker(settings, "student", "s")
    play(settings, providers, student, STUDENT_ANSWERS)
    conv_id = conversation(settings).id
    assert pipeline.open_next_turn(settings, providers, conv_id) is None
    with session_scope(settings.database_url) as s:
        assert len(s.exec(select(Turn).where(Turn.status == TurnStatus.open)).all()) == 1


def test_expired_lease_returns_the_turn_and_the_late_submit_is_refused(settings, providers):
    launch(settings, providers)
    slow, fast = make_worker(settings, "student", "slow"), make_worker(settings, "student", "fast")
    t0 = utcnow()
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, slow, now=t0)[0]
        held = lifecycle.take_turn(s, slow, hit.id, lease_seconds=60, now=t0)
        assert lifecycle.open_hits_for(s, fast, now=t0 + timedelta(seconds=30)) == []
        with pytest.raises(lifecycle.Conflict):
            lifecycle.take_turn(s, fast, hit.id, lease_seconds=60, now=t0 + timedelta(seconds=30))
    later = t0 + timedelta(seconds=61)
    with session_scope(settings.database_url) as s:
        assert [h.id for h in lifecycle.open_hits_for(s, fast, now=later)] == [hit.id]
        lifecycle.take_turn(s, fast, hit.id, lease_seconds=60, now=later)
    with session_scope(settings.database_url) as s, pytest.raises(lifecycle.Conflict):
        lifecycle.submit_turn(s, held.external_id, slow, STUDENT_ANSWERS, now=later)


def test_budget_cap_pauses_the_batch_instead_of_opening_more_turns(settings, providers):
    launch(settings, providers)
    with session_scope(settings.database_url) as s:
        batch = s.exec(select(Batch)).one()
        batch.budget_cents = batch.reward_cents  # only the first turn fits
        s.add(batch)
    play(settings, providers, make_worker(settings, "student", "s"), STUDENT_ANSWERS)
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).one().status == BatchStatus.paused
        assert s.exec(select(Turn).where(Turn.status == TurnStatus.open)).all() == []


def test_reconciler_opens_the_turn_a_lost_message_never_opened(settings, providers):
    launch(settings, providers)
    student = make_worker(settings, "student", "s")
    with session_scope(settings.database_url) as s:  # submitted, but the Celery message was lost
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS)
    repairs = pipeline.reconcile(settings, providers)
    assert repairs.conversations_advanced == [conversation(settings).id]
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Turn).where(Turn.status == TurnStatus.open)).one().role == "teacher"
    assert pipeline.reconcile(settings, providers).conversations_advanced == []


def test_cancelling_a_batch_closes_its_open_turns(settings, providers):
    launch(settings, providers, conversations=3)
    with session_scope(settings.database_url) as s:
        expired = lifecycle.set_batch_status(s, s.exec(select(Batch)).one(), BatchStatus.cancelled, "requester:t")
    assert len(expired) == 3
    with session_scope(settings.database_url) as s:
        assert {c.status for c in s.exec(select(Conversation))} == {"cancelled"}
        assert lifecycle.open_hits_for(s, make_worker(settings, "student", "s")) == []


def test_the_event_log_replays_a_conversation(settings, providers):
    from turkflow.events import replay_conversation

    launch(settings, providers, max_turns=20)
    student, teacher = make_worker(settings, "student", "s"), make_worker(settings, "teacher", "t")
    play(settings, providers, student, STUDENT_ANSWERS)
    play(settings, providers, teacher, dict(TEACHER_ANSWERS, shared=["step-1"]))
    with session_scope(settings.database_url) as s:
        conv = s.exec(select(Conversation)).one()
        stored = s.exec(select(Turn).where(Turn.status == TurnStatus.submitted).order_by(Turn.index)).all()
        replayed = replay_conversation(s, conv.id)
    assert [(r["role"], r["worker_id"], r["text"], r["label"], r["answers"]) for r in replayed] == [
        (t.role, t.worker_id, t.text, t.label, t.answers) for t in stored]
    assert replayed[1]["answers"]["shared"] == ["step-1"]


def test_the_local_queue_never_offers_another_providers_hits(settings, providers):
    launch(settings, providers)
    student = make_worker(settings, "student", "s")
    with session_scope(settings.database_url) as s:
        hit = s.exec(select(Hit)).one()
        hit.provider = "mturk"
        s.add(hit)
    with session_scope(settings.database_url) as s:
        assert lifecycle.open_hits_for(s, student) == []
        with pytest.raises(lifecycle.NotFound):
            lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
