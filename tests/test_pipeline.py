"""The asynchronous turn pipeline without a browser: domain functions plus a real Celery worker."""

from __future__ import annotations

from sqlmodel import select

from tests.conftest import wait_until
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.documents import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle, registry
from turkflow.models import Event, Hit, HitStatus, QualityDecision, Task, Turn, TurnStatus, Worker
from workers import tasks


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
        second = lifecycle.submit_turn(s, assignment.external_id, student, dict(STUDENT_ANSWERS, response="Other"))
    assert first.created and not second.created
    with session_scope(settings.database_url) as s:
        turns = s.exec(select(Turn).where(Turn.status == TurnStatus.submitted)).all()
        assert [t.text for t in turns] == ["What comes next?"]


def submit_turns(settings, count):
    """Write the first ``count`` turns of a one-conversation batch without any Celery message: as if every
    ``turn_submitted`` were lost. Returns the turn ids."""
    launch(settings, registry.providers(settings), max_turns=10)
    writers = {"student": make_worker(settings, "student", "s1"), "teacher": make_worker(settings, "teacher", "t1")}
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


def test_a_lost_opening_is_repaired_once_the_submitted_turn_is_old_enough_and_not_before(settings, providers):
    launch(settings, providers)
    student = make_worker(settings, "student", "s1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS)
    slow = settings.model_copy(update={"reopen_after_seconds": 30, "stuck_after_seconds": 120})  # still queued?
    assert pipeline.reconcile(slow, providers).conversations_advanced == []
    assert len(pipeline.reconcile(settings, providers).conversations_advanced) == 1
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Hit).where(Hit.role == "teacher", Hit.status == HitStatus.open)).one()
