"""The daily review queue, rater reliability and the hourly rollups the dashboard reads."""

from __future__ import annotations

from turkflow.access import OPERATOR

from datetime import timedelta

import pytest
from sqlalchemy import func
from sqlmodel import select

from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd, low_rated_teacher
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import (Batch, BatchHour, BatchSnapshot, BatchStatus, Event, QualityDecision, ReviewEntry,
                             ReviewStatus, Turn, Worker, WorkerStatus, utcnow)
from turkflow.quality import activity, reliability, review
from turkflow.quality.reliability import Tally, agreement_scores
from turkflow.workers import tasks


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
        outliers = reliability.outliers(s, built.day, OPERATOR)
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


# ---- issue 25: the recommended policy on real submissions, and what the review page shows ------------------

PASTED = {"page_ms": 9_000, "first_key_ms": None, "keys": 0, "pastes": 1, "drops": 0, "blurs": 1}
TYPED = {"page_ms": 60_000, "first_key_ms": 20_000, "keys": 70, "pastes": 0, "drops": 0, "blurs": 0}


def careless_student(settings, providers):
    """One conversation under the recommended policy: a teacher who writes well, a student who rates the
    teacher's answers yes/yes and one who gives split answers (relevant but not useful, or the other way):
    a coin, by the trust model. Returns the crowd, the teacher and the two students."""
    from turkflow.quality.monitor import Policy

    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1, quality=Policy.parse("recommended").batch_fields())
    teacher = crowd.worker("teacher", "T-good")
    attentive, careless = crowd.worker("student", "S-attentive"), crowd.worker("student", "S-careless")
    conversation_id = crowd.conversations()[0]
    crowd.submit(attentive, conversation_id, STUDENT_LINES[0], signals=TYPED)
    coin = [(True, False), (False, True), (True, False), (False, False)]  # three split answers in four
    for i in range(16):
        crowd.submit(teacher, conversation_id, TEACHER_LINES[i % len(TEACHER_LINES)], signals=TYPED)
        relevant, useful = coin[i // 2 % 4] if i % 2 == 0 else (True, True)
        crowd.submit(careless if i % 2 == 0 else attentive, conversation_id, STUDENT_LINES[1 + i % 4],
                     relevant=relevant, useful=useful, signals=TYPED)
    return crowd, teacher, attentive, careless


def test_a_rater_giving_split_answers_is_identified_stops_counting_and_shows_on_the_review_page(settings,
                                                                                                 providers):
    from turkflow.quality import dashboard

    crowd, teacher, attentive, careless = careless_student(settings, providers)
    with session_scope(settings.database_url) as s:
        found = {r.rater_id: r for r in reliability.identified(s, OPERATOR)}
        assert set(found) == {careless.id} and found[careless.id].verdict == reliability.CARELESS
        assert found[careless.id].identified_after <= 8
        event = s.exec(select(Event).where(Event.kind == "rater_identified")).one()
        assert event.worker_id == careless.id and event.data["posterior"]["careless"] >= 0.99
        assert s.get(Worker, teacher.id).status == WorkerStatus.active  # split answers never blocked them
        decision = s.exec(select(QualityDecision).where(QualityDecision.worker_id == teacher.id)
                          .order_by(QualityDecision.id.desc())).first()
        assert {w["rater_id"]: w["trust"] for w in decision.window}[careless.id] == 0.0
        queue = dashboard.review_queue(s, OPERATOR, None, None)
        (evidence, rater), = queue.identified
        assert rater.id == careless.id and evidence["verdict"] == "careless"
        assert evidence["answers"]["yes/no"] + evidence["answers"]["no/yes"] >= 4


def test_with_the_recommended_policy_a_paster_goes_to_review_on_their_second_pasted_turn(settings, providers):
    from turkflow.quality.monitor import Policy

    crowd = Crowd(settings, providers)
    crowd.launch(conversations=3, quality=Policy.parse("recommended").batch_fields())
    paster = crowd.worker("teacher", "T-paster")
    students = [crowd.worker("student", f"S{i}") for i in range(2)]
    first, second, third = crowd.conversations()
    crowd.submit(students[0], first, STUDENT_LINES[0], signals=TYPED)
    crowd.submit(paster, first, TEACHER_LINES[0], signals=PASTED)
    crowd.submit(students[1], first, STUDENT_LINES[1], signals=TYPED)
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, paster.id).status == WorkerStatus.active  # one pasted turn is not a habit
    crowd.submit(students[0], second, STUDENT_LINES[0], signals=TYPED)
    pasted = crowd.submit(paster, second, TEACHER_LINES[1], signals=PASTED)
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, paster.id).status == WorkerStatus.temporarily_blocked
        event = s.exec(select(Event).where(Event.kind == "machine_written")).one()
        assert event.worker_id == paster.id and event.turn_id == pasted and len(event.data["turns"]) == 2
        built = review.daily_review(s, review.ReviewPolicy())
        entry, = [e for e in built.entries if e.worker_id == paster.id]
        assert "machine-written" in entry.reason and entry.flags["not_typed"] == 2
        assert pasted in [sample["turn_id"] for sample in entry.sample]


@pytest.mark.browser
def test_review_page_shows_the_careless_raters_evidence_and_the_pasted_turns_in_chromium(
        settings, providers, browser_context, live_server):
    from turkflow.quality.monitor import Policy
    from turkflow.requesters import create_requester

    crowd, teacher, attentive, careless = careless_student(settings, providers)
    paster = crowd.worker("teacher", "T-paster")
    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    crowd.launch(conversations=2, quality=Policy.parse("recommended").batch_fields())
    for conversation_id in crowd.conversations()[-2:]:
        crowd.submit(attentive, conversation_id, STUDENT_LINES[0], signals=TYPED)
        crowd.submit(paster, conversation_id, TEACHER_LINES[0], signals=PASTED)
    with session_scope(settings.database_url) as s:
        review.daily_review(s, review.ReviewPolicy())
    page = browser_context.new_page()
    page.goto(f"{live_server.url}/admin/review")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/review")
    raters = page.locator("#identified-raters")
    assert "T-good" not in raters.inner_text()
    row = raters.locator("tbody tr")
    assert row.count() == 1
    text = row.inner_text()
    assert "careless" in text and "S-careless" in text or f"{careless.id}" in text
    assert "of 8" in text or " of " in text
    pasted = page.locator(f"#worker-{paster.id} .evidence")
    assert pasted.count() >= 1 and "0 keystrokes, 1 paste(s)" in pasted.first.inner_text()
    assert "machine-written" in page.locator(f"#worker-{paster.id}").inner_text()
