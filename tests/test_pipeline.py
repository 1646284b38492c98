"""The asynchronous turn pipeline without a browser: domain functions plus a real Celery worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import col, select

from tests.conftest import wait_until
from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import AlreadySubmitted
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle, registry
from turkflow.models import (Batch, Conversation, Event, Hit, HitStatus, QualityDecision, RoleStall, Task,
                             Turn, TurnStatus, Worker)
from turkflow.quality import monitor
from turkflow.workers import tasks


def launch(settings, providers, conversations=1, max_turns=6):
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="t",
                                             max_turns=max_turns)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def make_worker(settings, role, external_id):
    with session_scope(settings.database_url) as s:
        w = Worker(external_id=external_id, role=role, onboarded=True)
        s.add(w)
        s.flush()
        return w


STUDENT_ANSWERS = {"relevant": "yes", "useful": "yes", "real_life": "mix it", "intent": "request_step",
                   "response": "What comes next?"}
TEACHER_ANSWERS = {"relevant": "yes", "useful": "yes", "action": "return_step", "response": "Whisk it all."}


def test_submitted_turn_opens_the_next_hit_through_celery(settings, providers, celery_worker):
    launch(settings, providers)
    student = make_worker(settings, "student", "s1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        sub = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS)
        turn_id = sub.turn.id
    tasks.turn_submitted.delay(turn_id)

    def next_open():
        with session_scope(settings.database_url) as s:
            return s.exec(select(Hit).where(Hit.role == "teacher", Hit.status == HitStatus.open)).first()

    assert wait_until(next_open)


def test_double_submit_stores_one_turn(settings, providers):
    launch(settings, providers)
    student = make_worker(settings, "student", "s1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
    with session_scope(settings.database_url) as s:
        first = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS)
    with session_scope(settings.database_url) as s:
        second = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS)
    assert first.created and not second.created
    with pytest.raises(AlreadySubmitted) as refused:  # other text is refused naming what was stored
        with session_scope(settings.database_url) as s:
            lifecycle.submit_turn(s, assignment.external_id, student, dict(STUDENT_ANSWERS, response="Other"))
    assert refused.value.field == "response" and "What comes next?" in refused.value.message
    with session_scope(settings.database_url) as s:
        turns = s.exec(select(Turn).where(Turn.status == TurnStatus.submitted)).all()
        assert [t.text for t in turns] == ["What comes next?"]


def submit_turns(settings, count):
    """Write the first ``count`` turns of a one-conversation batch without any Celery message: as if every
    ``turn_submitted`` were lost. Returns the turn ids."""
    launch(settings, registry.providers(settings), max_turns=10)
    writers = {"student": make_worker(settings, "student", "s1"),
               "teacher": make_worker(settings, "teacher", "t1")}
    turn_ids = []
    for _ in range(count):
        with session_scope(settings.database_url) as s:
            hit = s.exec(select(Hit).where(Hit.status == HitStatus.open)).one()
            worker = s.get(Worker, writers[hit.role].id)
            assignment = lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)
            answers = STUDENT_ANSWERS if hit.role == "student" else TEACHER_ANSWERS
            turn_ids.append(lifecycle.submit_turn(s, assignment.external_id, worker, answers).turn.id)
        pipeline.open_after(settings, registry.providers(settings), turn_ids[-1])
    return turn_ids


def review_events(settings, turn_id):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Event).where(Event.kind == "turn_reviewed", Event.turn_id == turn_id)).all()


def test_a_turn_whose_review_message_was_lost_is_reviewed_once_by_the_reconciler(settings, providers):
    student_turn, teacher_turn = submit_turns(settings, 2)
    repairs = pipeline.reconcile(settings, providers)
    assert repairs.turns_reviewed == [student_turn, teacher_turn]
    with session_scope(settings.database_url) as s:
        assert s.get(Turn, teacher_turn).reviewed_at is not None
        assert len(s.exec(select(QualityDecision)).all()) == 1  # the teacher's rating of the student's turn
    assert pipeline.reconcile(settings, providers).turns_reviewed == []
    again = pipeline.review_submission(settings, providers, teacher_turn)  # a late or redelivered message
    assert not again.reviewed and again.bonus_ids == [] and again.flags == []
    assert [len(review_events(settings, t)) for t in (student_turn, teacher_turn)] == [1, 1]
    with session_scope(settings.database_url) as s:
        assert len(s.exec(select(QualityDecision)).all()) == 1


def test_a_turn_is_left_to_its_message_until_the_review_grace_has_passed(settings, providers):
    (student_turn,) = submit_turns(settings, 1)
    waiting = settings.model_copy(update={"review_after_seconds": 3600})
    assert pipeline.reconcile(waiting, providers).turns_reviewed == []
    assert pipeline.review_submission(settings, providers, student_turn).reviewed
    assert pipeline.reconcile(settings, providers).turns_reviewed == []


def test_a_lost_opening_is_repaired_by_the_first_run_after_the_grace_and_a_slow_one_is_left_alone(
        settings, providers):
    """With the default grace, the reconciler leaves a next turn whose message may merely be slow to its
    message, and opens it on the first run once the grace has passed; a late message then opens nothing
    more. The runs get their clock injected instead of waiting it out."""
    launch(settings, providers)
    student = make_worker(settings, "student", "s1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        turn = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS).turn
    grace = timedelta(seconds=Settings.model_fields["reopen_after_seconds"].default)
    defaults = settings.model_copy(update={"reopen_after_seconds": int(grace.total_seconds())})

    def teacher_hits():
        with session_scope(settings.database_url) as s:
            return s.exec(select(Hit).where(Hit.role == "teacher")).all()

    inside = pipeline.reconcile(defaults, providers, now=turn.submitted_at + grace - timedelta(seconds=1))
    assert inside.conversations_advanced == [] and teacher_hits() == []  # perhaps still queued: left alone
    after = pipeline.reconcile(defaults, providers, now=turn.submitted_at + grace + timedelta(seconds=1))
    assert after.conversations_advanced == [turn.conversation_id]
    assert pipeline.open_after(settings, providers, turn.id) is None  # the slow message, arriving at last
    assert [h.status for h in teacher_hits()] == [HitStatus.open]


def test_a_conversation_whose_repairs_keep_failing_holds_up_no_other(settings, providers, caplog):
    """Two batches, each with a lost opening and a lost review. Batch 1's rows trip the reconciler on every
    run: its protocol is one this version no longer knows (its next turn cannot be opened) and its turn
    carries a malformed typing report from an older page (its review raises). Batch 2 is repaired all the
    same, and the stall sweep still runs; each failure is logged with its id and recorded once."""
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        tasks_ = list(s.exec(select(Task)))
        batch_ids = []
        for name in ("broken", "fine"):
            batch, hits = lifecycle.launch_batch(s, tasks_, 1, name=name, max_turns=6)
            lifecycle.publish_hit(s, providers.get("local"), hits[0].id)
            batch_ids.append(batch.id)
    teacher = make_worker(settings, "teacher", "t1")
    turns = []
    for batch_id, student in zip(batch_ids, (make_worker(settings, "student", f"s{n}") for n in (1, 2))):
        with session_scope(settings.database_url) as s:
            hit = s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                         .join(Conversation, Conversation.id == Turn.conversation_id)
                         .where(Conversation.batch_id == batch_id)).one()
            assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
            answers = dict(STUDENT_ANSWERS, response="How do I start with this recipe today, step by step?")
            turns.append(lifecycle.submit_turn(s, assignment.external_id, student, answers).turn)
    broken_turn, fine_turn = turns
    with session_scope(settings.database_url) as s:
        s.get(Batch, batch_ids[0]).protocol = "retired_protocol"
        s.get(Turn, broken_turn.id).signals = {"keys": 200}  # no page time: the typing check trips on it
        monitor.block_worker(s, s.get(Worker, teacher.id), permanent=False, actor="requester:ada",
                             reason="test")

    stalling = settings.model_copy(update={"stall_after_seconds": 0})
    repairs = pipeline.reconcile(stalling, providers)
    assert repairs.failed == [("opening", broken_turn.conversation_id), ("review", broken_turn.id)]
    assert repairs.conversations_advanced == [fine_turn.conversation_id]
    assert repairs.turns_reviewed == [fine_turn.id]
    assert repairs.roles_stalled == [(batch_ids[1], "teacher")]  # the sweep after the reviews ran too
    again = pipeline.reconcile(stalling, providers)  # the next run tries the broken ones again, and only them
    assert again.failed == repairs.failed
    assert (again.conversations_advanced, again.turns_reviewed) == ([], [])
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                      .where(Turn.conversation_id == fine_turn.conversation_id, Hit.role == "teacher",
                             Hit.status == HitStatus.open)).one()
        assert s.get(Turn, fine_turn.id).reviewed_at is not None
        assert s.get(Turn, broken_turn.id).reviewed_at is None
        stalled = select(RoleStall.role).where(RoleStall.batch_id == batch_ids[1],
                                               col(RoleStall.stalled_at).is_not(None))
        assert s.exec(stalled).all() == ["teacher"]
        failures = s.exec(select(Event).where(Event.kind == "repair_failed").order_by(Event.id)).all()
        assert [(e.data["step"], e.conversation_id, e.turn_id) for e in failures] == [
            ("opening", broken_turn.conversation_id, None),
            ("review", broken_turn.conversation_id, broken_turn.id)]
    assert f"the opening of conversation {broken_turn.conversation_id} failed" in caplog.text
    assert f"the review of turn {broken_turn.id} failed" in caplog.text
    with pytest.raises(ValueError, match="retired_protocol"):  # what the caller names (the Celery task's
        pipeline.reconcile(stalling, providers, stop_on=(ValueError,))  # time limit) ends the sweep instead
