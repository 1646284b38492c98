"""Reviews that arrive together are judged together (issue 27): a burst of submissions costs one review
message and one transaction instead of one each, and every turn is still reviewed exactly once, whoever
reviews it (the task, a second task, the reconciler), with nothing lost when a message is."""

from __future__ import annotations

import time

import pytest
from redis import Redis
from sqlalchemy import func
from sqlmodel import select

from tests.conftest import celery_worker_of, wait_until
from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd
from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS, launch, make_worker
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Bonus, BonusStatus, Event, Hit, HitStatus, QualityDecision, Rating, Turn, Worker
from turkflow.workers import tasks
import turkflow.workers.app

pytestmark = pytest.mark.both_backends  # claims that race and unique decisions: the storage is the subject


def write_rounds(settings, providers, conversations: int, rounds: int, open_last: bool = True) -> list[int]:
    """Every open turn of a batch written, round after round, each next turn opened as the turns task does,
    and no review run; the last round's next turns are left unopened unless ``open_last``. Returns the
    turn ids, oldest first."""
    launch(settings, providers, conversations=conversations, max_turns=10)
    writers = {"student": make_worker(settings, "student", "s1"), "teacher": make_worker(settings, "teacher", "t1")}
    written = []
    for n in range(rounds):
        with session_scope(settings.database_url) as s:
            hits = s.exec(select(Hit.id, Hit.role).where(Hit.status == HitStatus.open).order_by(Hit.id)).all()
        for hit_id, role in hits:
            with session_scope(settings.database_url) as s:
                worker = s.get(Worker, writers[role].id)
                assignment = lifecycle.take_turn(s, worker, hit_id, lease_seconds=60)
                answers = STUDENT_ANSWERS if role == "student" else TEACHER_ANSWERS
                written.append(lifecycle.submit_turn(s, assignment.external_id, worker, answers).turn.id)
            if open_last or n < rounds - 1:
                pipeline.open_after(settings, providers, written[-1])
    return written


def reviewed(settings) -> dict[int, int]:
    """How many ``turn_reviewed`` events each turn has."""
    with session_scope(settings.database_url) as s:
        return dict(s.exec(select(Event.turn_id, func.count()).where(Event.kind == "turn_reviewed")
                           .group_by(Event.turn_id)).all())


def decisions_per_rating(settings) -> dict[int, int]:
    with session_scope(settings.database_url) as s:
        ratings = s.exec(select(Rating.id)).all()
        counted = dict(s.exec(select(QualityDecision.rating_id, func.count())
                              .group_by(QualityDecision.rating_id)).all())
    return {rating_id: counted.get(rating_id, 0) for rating_id in ratings}


def test_one_review_judges_every_turn_waiting_once_and_a_second_finds_nothing(settings, providers):
    turns = write_rounds(settings, providers, conversations=4, rounds=3)
    reviews = pipeline.review_waiting(settings, providers, turns[-1])
    assert sorted(reviews.turns) == turns and not reviews.more
    assert reviewed(settings) == {turn_id: 1 for turn_id in turns}
    assert set(decisions_per_rating(settings).values()) == {1} and len(decisions_per_rating(settings)) == 8
    assert pipeline.review_waiting(settings, providers, turns[0]).turns == {}  # a redelivered message
    assert pipeline.reconcile(settings.model_copy(update={"review_after_seconds": 0}), providers).turns_reviewed == []
    assert reviewed(settings) == {turn_id: 1 for turn_id in turns}


def test_turns_a_review_cannot_take_wait_for_the_next_and_none_is_reviewed_twice(settings, providers, monkeypatch):
    turns = write_rounds(settings, providers, conversations=4, rounds=2)
    monkeypatch.setattr(pipeline, "REVIEW_BATCH", 3)
    first = pipeline.review_waiting(settings, providers, turns[-1])
    assert len(first.turns) == 3 and turns[-1] in first.turns and first.more
    while (more := pipeline.review_waiting(settings, providers)).turns:
        assert not set(more.turns) & set(first.turns)
    assert not more.more
    assert reviewed(settings) == {turn_id: 1 for turn_id in turns}


def test_a_turn_whose_review_trips_holds_up_no_other_turn_of_its_review(settings, providers):
    """A turn carrying a malformed typing report from an older page trips the content checks: the turns
    reviewed with it are reviewed all the same (turn by turn), and it waits for the reconciler, which
    records its failure; a review asked for that turn itself raises, for its message to be retried."""
    turns = write_rounds(settings, providers, conversations=3, rounds=2)
    broken = turns[1]
    with session_scope(settings.database_url) as s:
        turn = s.get(Turn, broken)
        turn.text, turn.signals = "How do I start with this recipe today, step by step?", {"keys": 200}
        # no page time: the typing check trips on it
    reviews = pipeline.review_waiting(settings, providers, turns[0])
    assert sorted(reviews.turns) == [t for t in turns if t != broken]
    with pytest.raises(KeyError):
        pipeline.review_waiting(settings, providers, broken)
    assert reviewed(settings) == {turn_id: 1 for turn_id in turns if turn_id != broken}
    repairs = pipeline.reconcile(settings.model_copy(update={"review_after_seconds": 0}), providers)
    assert repairs.failed == [("review", broken)]


def test_a_burst_of_submissions_queues_one_review_message_that_reviews_them_all(settings, providers, redis_url):
    app = turkflow.workers.app.configure(settings, providers)
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    try:
        turns = write_rounds(settings, providers, conversations=4, rounds=2, open_last=False)
        with celery_worker_of(app, "turns"):
            for turn_id in turns[4:]:  # the second round's messages, sent as the web sends them
                tasks.turn_submitted.delay(turn_id)
            assert wait_until(lambda: _open_turns(settings) == 4 and broker.llen("turns") == 0)
        assert broker.llen("reviews") == 1  # four openings, one review queued
        with celery_worker_of(app, "reviews"):
            assert wait_until(lambda: len(reviewed(settings)) == len(turns))
        assert reviewed(settings) == {turn_id: 1 for turn_id in turns}  # the first round's too
        assert set(decisions_per_rating(settings).values()) == {1}
        assert broker.llen("reviews") == 0
    finally:
        broker.flushdb()
        broker.close()


def test_a_lost_review_message_holds_reviews_back_no_longer_than_the_review_grace(settings, providers, redis_url):
    """The mark that a review is queued outlives a message lost with it only for ``review_after_seconds``,
    after which any turn waiting is the reconciler's anyway: the next submission queues a review again."""
    settings = settings.model_copy(update={"review_after_seconds": 1})
    app = turkflow.workers.app.configure(settings, providers)
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    try:
        turns = write_rounds(settings, providers, conversations=2, rounds=2, open_last=False)
        with celery_worker_of(app, "turns"):
            tasks.turn_submitted.delay(turns[2])
            assert wait_until(lambda: broker.llen("reviews") == 1)
            broker.delete("reviews")  # the review message is lost; its mark stays
            time.sleep(1.1)
            tasks.turn_submitted.delay(turns[3])  # the next submission, after the grace
            assert wait_until(lambda: broker.llen("reviews") == 1)
            assert _open_turns(settings) == 2
        with celery_worker_of(app, "reviews"):
            assert wait_until(lambda: len(reviewed(settings)) == len(turns))
        assert reviewed(settings) == {turn_id: 1 for turn_id in turns}
    finally:
        broker.flushdb()
        broker.close()


def test_a_local_bonus_is_paid_by_the_review_that_records_it_with_no_message_of_its_own(settings, providers):
    """The local crowd's bonus is bookkeeping: the review that records it pays it in the same transaction, and
    leaves nothing for the pay task (one message fewer per bonus); it is recorded and paid once."""
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    teacher = crowd.worker("teacher", "T-good")
    students = [crowd.worker("student", f"S{i}") for i in range(2)]
    conversation_id = crowd.conversations()[0]
    crowd.submit(students[0], conversation_id, STUDENT_LINES[0])
    to_pay = []
    for i in range(5):  # the fifth rating fills the teacher's window: its rated turn earns the bonus
        crowd.submit(teacher, conversation_id, TEACHER_LINES[i])
        rater = crowd.submit(students[(i + 1) % 2], conversation_id, STUDENT_LINES[1 + i], run=False)
        pipeline.open_after(settings, providers, rater)
        to_pay += pipeline.review_waiting(settings, providers, rater).bonus_ids
        assert pipeline.review_waiting(settings, providers, rater).turns == {}  # redelivered: nothing again
    assert to_pay == []
    with session_scope(settings.database_url) as s:
        bonuses = s.exec(select(Bonus).where(Bonus.worker_id == teacher.id)).all()
        assert [(b.status, b.amount_cents) for b in bonuses] == [(BonusStatus.paid, 8)]
        assert bonuses[0].paid_at is not None
        kinds = s.exec(select(Event.kind).where(Event.kind.in_(["bonus_recorded", "bonus_paid"])).order_by(Event.id))
        assert list(kinds) == ["bonus_recorded", "bonus_paid"]
    assert pipeline.pay_bonus(settings, providers, bonuses[0].id)  # the reconciler or a late task: paid already
    assert pipeline.reconcile(settings, providers).unpaid_bonuses == []


def _open_turns(settings) -> int:
    with session_scope(settings.database_url) as s:
        return len(s.exec(select(Hit.id).where(Hit.status == HitStatus.open)).all())
