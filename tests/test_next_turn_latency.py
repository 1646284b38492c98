"""A submission's next turn opens without waiting for the quality monitor or the content checks (found by
the crowd simulator: in a burst of submissions, next turns waited behind everyone's judging, and the first
ones after a Celery restart behind the spaCy model loading)."""

from __future__ import annotations

from redis import Redis
from sqlmodel import select

from tests.conftest import celery_worker_of, wait_until
from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS, launch, make_worker
from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Hit, HitStatus, QualityDecision, Rating, Turn
from turkflow.quality import checks
from turkflow.workers import tasks
import turkflow.workers.app
from turkflow.workers.app import load_language_model


def submit_two_turns(settings, providers) -> int:
    """A student's first turn and the teacher's rating reply; returns the teacher's turn id."""
    launch(settings, providers)
    student = make_worker(settings, "student", "s1")
    teacher = make_worker(settings, "teacher", "t1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        first = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS).turn.id
    pipeline.open_after(settings, providers, first)
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, teacher)[0]
        assignment = lifecycle.take_turn(s, teacher, hit.id, lease_seconds=60)
        return lifecycle.submit_turn(s, assignment.external_id, teacher, TEACHER_ANSWERS).turn.id


def decisions(settings) -> list[QualityDecision]:
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(QualityDecision)))


def test_opening_the_next_turn_leaves_the_rating_to_the_review(settings, providers):
    rater_turn = submit_two_turns(settings, providers)
    opened = pipeline.open_after(settings, providers, rater_turn)
    with session_scope(settings.database_url) as s:
        assert s.get(Hit, opened).status == HitStatus.open
        assert s.get(Turn, s.get(Hit, opened).turn_id).index == 2
    assert decisions(settings) == []
    pipeline.review_submission(settings, providers, rater_turn)
    with session_scope(settings.database_url) as s:
        rating = s.exec(select(Rating).where(Rating.rater_turn_id == rater_turn)).one()
    assert [d.rating_id for d in decisions(settings)] == [rating.id]


def next_turn_open(settings) -> bool:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                      .where(Turn.index == 2, Hit.status == HitStatus.open)).first() is not None


def test_celery_opens_the_next_turn_then_reviews_the_submission(settings, providers, celery_worker):
    rater_turn = submit_two_turns(settings, providers)
    tasks.turn_submitted.delay(rater_turn)

    assert wait_until(lambda: next_turn_open(settings))
    assert wait_until(lambda: decisions(settings))


def test_celery_worker_processes_load_the_language_model_as_they_start(tmp_path):
    turkflow.workers.app.configure(Settings(data_dir=tmp_path, secret_key="x", worker_hash_key="x"))
    checks.english.cache_clear()
    load_language_model()
    assert checks.english.cache_info().currsize == 1


def test_every_task_goes_to_a_queue_by_its_stable_name():
    import turkflow.workers.mturk_tasks  # noqa: F401 - every task module registers its tasks
    import turkflow.workers.prolific_tasks  # noqa: F401

    registered = {name for name in turkflow.workers.app.celery_app.tasks if not name.startswith("celery.")}
    assert registered == set(turkflow.workers.app.ROUTES)
    assert set(turkflow.workers.app.ROUTES.values()) == set(turkflow.workers.app.QUEUES)


def test_a_turns_worker_opens_next_turns_while_reviews_wait_on_their_own_queue(settings, providers, redis_url):
    """Queues by workload: a backlog of reviews (spaCy) never holds up the next turn's opening."""
    app = turkflow.workers.app.configure(settings, providers)
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    try:
        rater_turn = submit_two_turns(settings, providers)
        for _ in range(3):
            tasks.review_submission.delay(rater_turn)  # a backlog nobody takes yet
        with celery_worker_of(app, "turns"):
            tasks.turn_submitted.delay(rater_turn)
            assert wait_until(lambda: next_turn_open(settings))
        assert decisions(settings) == [] and broker.llen("reviews") == 4  # the opening queued one more
        with celery_worker_of(app, "reviews"):
            assert wait_until(lambda: broker.llen("reviews") == 0 and decisions(settings))
        assert len(decisions(settings)) == 1  # reviewed once, however many messages asked
    finally:
        broker.flushdb()
        broker.close()
