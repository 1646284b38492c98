"""The quality monitor on real submissions: blocks after k low-rated turns, one bonus per qualifying turn."""

from __future__ import annotations

import pytest
from sqlalchemy import func
from sqlmodel import select

from tests.conftest import wait_until
from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd, low_rated_teacher
from turkflow import pipeline, states
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import (Assignment, AssignmentStatus, Bonus, BonusStatus, Event, Hit, QualityDecision, Worker,
                             WorkerStatus)
from turkflow.quality.monitor import Policy, PolicyError
from turkflow.workers import tasks


def test_low_rated_worker_is_blocked_on_the_fifth_low_rating_and_cannot_take_a_turn(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=6)
    teacher = crowd.worker("teacher", "T-low")
    students = [crowd.worker("student", f"S{i}") for i in range(3)]

    low_rated_teacher(crowd, teacher, students, turns=4)
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, teacher.id).status == WorkerStatus.active  # four ratings decide nothing

    fifth = crowd.conversations()[4]
    crowd.submit(students[0], fifth, STUDENT_LINES[0])
    crowd.submit(teacher, fifth, TEACHER_LINES[4])
    crowd.submit(students[1], fifth, STUDENT_LINES[1], relevant=False, useful=False)

    with session_scope(settings.database_url) as s:
        blocked = s.get(Worker, teacher.id)
        assert blocked.status == WorkerStatus.temporarily_blocked
        decision = s.exec(select(QualityDecision).where(QualityDecision.worker_id == teacher.id,
                                                        QualityDecision.outcome == "block")).one()
        assert len(decision.window) == 5 and decision.mean_relevance == 0.0
        last = crowd.conversations()[5]
        crowd.submit(students[2], last, STUDENT_LINES[0])
        hit = crowd.hit_for(last)
        with pytest.raises(lifecycle.Forbidden):
            lifecycle.take_turn(s, blocked, hit.id, lease_seconds=60)
        assert lifecycle.open_hits_for(s, blocked) != []  # the turn is there; the block is what refuses it


def _high_rated_turns(crowd: Crowd, teacher: Worker, students: list[Worker], turns: int) -> list[int]:
    """The teacher answers ``turns`` times in one conversation; every answer is rated relevant and useful."""
    conversation_id = crowd.conversations()[0]
    crowd.submit(students[0], conversation_id, STUDENT_LINES[0])
    rater_turns = []
    for i in range(turns):
        crowd.submit(teacher, conversation_id, TEACHER_LINES[i])
        rater_turns.append(crowd.submit(students[(i + 1) % 2], conversation_id, STUDENT_LINES[1 + i % 5]))
    return rater_turns


def _celery_idle(worker) -> bool:
    """Both deliveries have finished: nothing active or reserved on the worker."""
    inspect = worker.app.control.inspect(timeout=1)
    active, reserved = inspect.active() or {}, inspect.reserved() or {}
    return bool(active) and not any(active.values()) and not any(reserved.values())


def _bonuses(settings, worker_id):
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Bonus).where(Bonus.worker_id == worker_id).order_by(Bonus.turn_id)))


def test_high_rated_worker_gets_exactly_one_bonus_per_qualifying_turn_when_the_pipeline_runs_twice(
        settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    teacher = crowd.worker("teacher", "T-good")
    students = [crowd.worker("student", f"S{i}") for i in range(2)]
    rater_turns = _high_rated_turns(crowd, teacher, students, turns=7)

    for turn_id in rater_turns:  # the Celery task retried or delivered twice
        again = pipeline.after_submission(settings, providers, turn_id)
        assert again.bonus_ids == [] and again.blocked_worker_id is None

    bonuses = _bonuses(settings, teacher.id)
    assert len(bonuses) == 3  # the 5th, 6th and 7th rated turns: the window is full from the 5th on
    assert len({b.turn_id for b in bonuses}) == 3
    assert all(b.amount_cents == 8 for b in bonuses)
    with session_scope(settings.database_url) as s:
        recorded = s.exec(select(func.count()).select_from(Event).where(Event.kind == "bonus_recorded")).one()
        assert recorded == 3


def test_a_turn_whose_submission_ended_unpaid_still_earns_its_quality_bonus(settings, providers):
    """Prolific's poller marks a stored turn's submission unpaid when the participant let it time out or
    returned it; the turn is kept and paid, and a rating that arrives afterwards still earns its bonus."""
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    teacher = crowd.worker("teacher", "T-good")
    students = [crowd.worker("student", f"S{i}") for i in range(2)]
    conversation_id = crowd.conversations()[0]
    crowd.submit(students[0], conversation_id, STUDENT_LINES[0])
    for i in range(5):
        teacher_turn = crowd.submit(teacher, conversation_id, TEACHER_LINES[i])
        if i == 4:  # the fifth answer fills the window: its rating earns the bonus
            with session_scope(settings.database_url) as s:
                assignment = s.exec(select(Assignment).join(Hit, Hit.id == Assignment.hit_id)
                                    .where(Hit.turn_id == teacher_turn)).one()
                states.move(assignment, AssignmentStatus.unpaid)
                s.add(assignment)
        crowd.submit(students[(i + 1) % 2], conversation_id, STUDENT_LINES[1 + i % 5])

    assert [(b.turn_id, b.amount_cents) for b in _bonuses(settings, teacher.id)] == [(teacher_turn, 8)]


def test_bonus_is_paid_once_when_the_celery_task_runs_twice(settings, providers, celery_worker):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    teacher = crowd.worker("teacher", "T-good")
    students = [crowd.worker("student", f"S{i}") for i in range(2)]
    conversation_id = crowd.conversations()[0]
    crowd.submit(students[0], conversation_id, STUDENT_LINES[0])
    rater_turns = []
    for i in range(5):
        crowd.submit(teacher, conversation_id, TEACHER_LINES[i])
        rater_turns.append(crowd.submit(students[(i + 1) % 2], conversation_id, STUDENT_LINES[1 + i], run=False))
        if i < 4:  # the teacher needs the next turn opened; the last one goes through Celery only
            pipeline.after_submission(settings, providers, rater_turns[-1])

    tasks.turn_submitted.delay(rater_turns[-1])
    tasks.turn_submitted.delay(rater_turns[-1])

    def paid():
        bonuses = _bonuses(settings, teacher.id)
        return bonuses if bonuses and all(b.status == BonusStatus.paid for b in bonuses) else None

    wait_until(paid)
    wait_until(lambda: _celery_idle(celery_worker))
    bonuses = _bonuses(settings, teacher.id)
    assert len(bonuses) == 1 and bonuses[0].status == BonusStatus.paid
    with session_scope(settings.database_url) as s:
        paid_events = s.exec(select(func.count()).select_from(Event).where(Event.kind == "bonus_paid")).one()
        assert paid_events == 1


def test_a_batch_with_a_pooled_probation_policy_is_judged_by_it_live(settings, providers):
    policy = Policy.parse("pooled k=3,p=0.5 for 3, then k=4,p=0.4")
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=5, quality=policy.batch_fields())
    teacher = crowd.worker("teacher", "T-mixed")
    students = [crowd.worker("student", f"S{i}") for i in range(2)]

    def rated(conversation_id: int, relevant: bool, useful: bool) -> str:
        crowd.submit(students[0], conversation_id, STUDENT_LINES[0])
        crowd.submit(teacher, conversation_id, TEACHER_LINES[0])
        crowd.submit(students[1], conversation_id, STUDENT_LINES[1], relevant=relevant, useful=useful)
        with session_scope(settings.database_url) as s:
            return s.get(Worker, teacher.id).status

    conversations = crowd.conversations()
    # Relevant but not useful, three times: the paper's rule would block (usefulness 0 < 0.5); pooled, the
    # mean of both is 0.5, which is not below p.
    assert [rated(c, True, False) for c in conversations[:3]] == [WorkerStatus.active] * 3
    # Past probation the settled window judges: relevance 3/4, usefulness 0/4, pooled 0.375 < 0.4.
    assert rated(conversations[3], False, False) == WorkerStatus.temporarily_blocked
    with session_scope(settings.database_url) as s:
        decision = s.exec(select(QualityDecision).where(QualityDecision.worker_id == teacher.id,
                                                        QualityDecision.outcome == "block")).one()
        assert len(decision.window) == 4


def test_a_policy_that_makes_no_sense_is_refused_with_its_form():
    with pytest.raises(PolicyError, match="k=5,p=0.5"):
        Policy.parse("pooled window 5")
    with pytest.raises(PolicyError, match="p in"):
        Policy.parse("k=5,p=0")
    with pytest.raises(PolicyError, match="either, pooled"):
        Policy(rule="mean").check()
