"""The daily review queue, rater reliability and the hourly rollups the dashboard reads."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func
from sqlmodel import select

from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd, low_rated_teacher
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import (Batch, BatchHour, BatchSnapshot, BatchStatus, Event, ReviewEntry, ReviewStatus, Turn,
                             Worker, WorkerStatus, utcnow)
from turkflow.quality import activity, reliability, review
from turkflow.quality.reliability import Tally, agreement_scores
from workers import tasks


def blocked_teacher(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=6)
    teacher = crowd.worker("teacher", "T-low")
    students = [crowd.worker("student", f"S{i}") for i in range(3)]
    raters = low_rated_teacher(crowd, teacher, students, turns=5)
    return crowd, teacher, students, raters


def test_daily_review_queues_each_blocked_worker_with_low_rated_turns_in_context(settings, providers):
    crowd, teacher, students, raters = blocked_teacher(settings, providers)
    with session_scope(settings.database_url) as s:
        built = review.daily_review(s, review.ReviewPolicy.of(settings))
        assert [e.worker_id for e in built.entries] == [teacher.id]
    with session_scope(settings.database_url) as s:
        entry = s.exec(select(ReviewEntry)).one()
        assert entry.status == ReviewStatus.pending and "mean relevance 0.00" in entry.reason
        assert len(entry.sample) == settings.review_sample_turns
        for sampled in entry.sample:
            turn, before, after = (s.get(Turn, sampled[k]) for k in ("turn_id", "before_id", "after_id"))
            assert turn.worker_id == teacher.id
            assert (before.index, after.index) == (turn.index - 1, turn.index + 1)
            assert before.conversation_id == after.conversation_id == turn.conversation_id
            assert after.id in raters  # the low rating is right there, in the turn after
        assert entry.ratings["count"] == 5 and entry.ratings["mean_usefulness"] == 0.0
        assert s.exec(select(Event).where(Event.kind == "review_built")).one().data["workers"] == 1


def test_rebuilding_the_queue_keeps_one_entry_per_worker_and_day(settings, providers):
    blocked_teacher(settings, providers)
    for _ in range(2):
        with session_scope(settings.database_url) as s:
            review.daily_review(s, review.ReviewPolicy.of(settings))
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(ReviewEntry)).one() == 1


def test_celery_beat_task_builds_the_queue(settings, providers, celery_worker):
    from tests.conftest import wait_until

    _, teacher, _, _ = blocked_teacher(settings, providers)
    tasks.daily_review.delay()

    def queued():
        with session_scope(settings.database_url) as s:
            return s.exec(select(ReviewEntry).where(ReviewEntry.worker_id == teacher.id)).first()

    assert wait_until(queued).status == ReviewStatus.pending


def test_resolved_entry_stays_resolved_until_the_worker_is_blocked_again(settings, providers):
    _, teacher, _, _ = blocked_teacher(settings, providers)
    policy = review.ReviewPolicy.of(settings)
    with session_scope(settings.database_url) as s:
        review.daily_review(s, policy)
        assert review.unblock(s, s.get(Worker, teacher.id), actor="requester:ada", note="ok")
        assert not review.unblock(s, s.get(Worker, teacher.id), actor="requester:ada")
    with session_scope(settings.database_url) as s:
        review.daily_review(s, policy)
        assert s.exec(select(ReviewEntry)).one().status == ReviewStatus.unblocked
        review.monitor.block_worker(s, s.get(Worker, teacher.id), permanent=False, actor="system",
                                    reason="low ratings again")
    with session_scope(settings.database_url) as s:
        review.daily_review(s, policy)
        entry = s.exec(select(ReviewEntry)).one()
        assert (entry.status, entry.reason, entry.note) == (ReviewStatus.pending, "low ratings again", "")


def test_permanent_block_marks_every_open_entry_of_the_worker(settings, providers):
    _, teacher, _, _ = blocked_teacher(settings, providers)
    policy = review.ReviewPolicy.of(settings)
    today = utcnow().date()
    with session_scope(settings.database_url) as s:
        review.daily_review(s, policy, day=today - timedelta(days=1))
        review.daily_review(s, policy, day=today)
        assert review.block_permanently(s, s.get(Worker, teacher.id), actor="requester:ada")
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, teacher.id).status == WorkerStatus.blocked
        assert {e.status for e in s.exec(select(ReviewEntry))} == {ReviewStatus.blocked}


def test_agreement_is_the_chance_another_rater_of_the_same_author_said_the_same():
    authors = {1: Tally(6, 4, 4), 2: Tally(4, 4, 4)}
    pairs = {(10, 1): Tally(2, 2, 2), (11, 1): Tally(2, 2, 2), (12, 1): Tally(2, 0, 0),
             (10, 2): Tally(2, 2, 2), (11, 2): Tally(2, 2, 2)}
    scores = agreement_scores(pairs, authors)
    assert scores[10] == scores[11]
    # on author 1 the others said yes half the time (0.5 agreement), on author 2 always (1.0)
    assert scores[10] == (4, 0.75)
    assert scores[12] == (2, 0.0)  # always said no where everyone else said yes


def test_a_rater_who_contradicts_everyone_is_an_outlier(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=20)
    teachers = [crowd.worker("teacher", f"T{i}") for i in range(2)]
    honest = [crowd.worker("student", f"S{i}") for i in range(3)]
    contrary = crowd.worker("student", "S-contrary")
    for i, conversation in enumerate(crowd.conversations()):
        rater = contrary if i % 10 >= 8 else honest[(i // 2) % 3]  # two of every ten ratings per teacher
        crowd.submit(honest[(i + 1) % 3], conversation, STUDENT_LINES[0])
        crowd.submit(teachers[i % 2], conversation, TEACHER_LINES[i % 7])
        crowd.submit(rater, conversation, STUDENT_LINES[1], relevant=rater is not contrary,
                     useful=rater is not contrary)
    with session_scope(settings.database_url) as s:
        built = review.daily_review(s, review.ReviewPolicy(reliability_min_ratings=3))
        outliers = reliability.outliers(s, built.day)
        assert [(o.rater_id, o.agreement) for o in outliers] == [(contrary.id, 0.0)]
        judged, mean = reliability.summary(s, built.day)
        assert judged == 6 and mean > 0.6  # three honest students, the contrary one, two teachers


def test_activity_rollup_counts_turns_labels_and_ratings_once_however_often_it_runs(settings, providers):
    crowd, teacher, students, _ = blocked_teacher(settings, providers)
    with session_scope(settings.database_url) as s:
        activity.refresh(s)
        activity.refresh(s)
        activity.refresh(s, since=utcnow() - timedelta(hours=3))
        rows = {r.role: r for r in s.exec(select(BatchHour))}
        assert rows["teacher"].turns == 5 and rows["student"].turns == 10
        assert (rows["teacher"].rated, rows["teacher"].relevant, rows["teacher"].useful) == (5, 0, 0)
        assert rows["student"].rated == 5 and rows["student"].relevant == 5
        assert rows["student"].labels == {"request_step": 10}
        charts = activity.batch_activity(s, crowd.batch_id, utcnow())
        assert sum(n for _, n in charts.hours) == 15 and len(charts.hours) == 48
        assert charts.quality["teacher"][0][1:] == (0.0, 0.0, 5)
        assert charts.labels["teacher"] == {"return_step": 5}


def test_batch_snapshots_recount_running_batches_and_finished_ones_once_more(settings, providers):
    crowd, _, _, _ = blocked_teacher(settings, providers)
    with session_scope(settings.database_url) as s:
        assert activity.snapshot_batches(s) == [crowd.batch_id]
        snapshot = s.get(BatchSnapshot, crowd.batch_id)
        assert snapshot.progress["turns_submitted"] == 15 and snapshot.progress["conversations"] == 6
        assert snapshot.progress["committed_cents"] == 21 * 20  # 15 submitted + 6 open turns at $0.20
        assert activity.snapshot_batches(s) == [crowd.batch_id]  # still running: counted every time
        lifecycle.set_batch_status(s, s.get(Batch, crowd.batch_id), BatchStatus.cancelled, actor="requester:ada")
    with session_scope(settings.database_url) as s:
        assert activity.snapshot_batches(s) == [crowd.batch_id]  # once more, to count the cancellation
        assert s.get(BatchSnapshot, crowd.batch_id).progress["cancelled"] == 6
        assert activity.snapshot_batches(s) == []


def test_celery_beat_task_refreshes_rollups_and_snapshots(settings, providers, celery_worker):
    from tests.conftest import wait_until

    crowd, _, _, _ = blocked_teacher(settings, providers)
    tasks.refresh_activity.delay()

    def refreshed():
        with session_scope(settings.database_url) as s:
            return s.get(BatchSnapshot, crowd.batch_id) and s.exec(select(func.count()).select_from(BatchHour)).one()

    assert wait_until(refreshed)
