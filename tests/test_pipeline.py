"""The asynchronous turn pipeline without a browser: domain functions plus a real Celery worker."""

from __future__ import annotations

from sqlmodel import select

from tests.conftest import wait_until
from turkflow.db import session_scope
from turkflow.documents import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.models import Hit, HitStatus, Task, Turn, TurnStatus, Worker
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

    assert wait_until(next_open, timeout=5)


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
