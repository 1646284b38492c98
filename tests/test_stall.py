"""A batch whose waiting turns have no eligible worker left says so, once, and clears by itself."""

from datetime import timedelta

from sqlmodel import select

from tests.quality_factories import Crowd
from turkflow.db import session_scope
from turkflow.models import Event, Worker, utcnow
from turkflow.quality import monitor, stall

GRACE = timedelta(minutes=10)


def _sweep(settings, at):
    with session_scope(settings.database_url) as s:
        return stall.sweep(s, at, GRACE)


def _events(settings, kind):
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Event).where(Event.kind == kind)))


def _block(settings, *workers):
    with session_scope(settings.database_url) as s:
        for worker in workers:
            monitor.block_worker(s, s.get(Worker, worker.id), permanent=False, actor="system", reason="test")


def test_every_student_blocked_stalls_the_batch_once_after_the_grace_period(settings, providers):
    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=3)
    ann, bea = crowd.worker("student", "ann"), crowd.worker("student", "bea")
    crowd.worker("teacher", "tom")
    _block(settings, ann, bea)
    start = utcnow()

    assert _sweep(settings, start).stalled == []  # noticed, not yet stalled
    changes = _sweep(settings, start + GRACE)
    assert [(s.batch_id, s.role, s.workers, s.waiting) for s in changes.stalled] == [(batch_id, "student", 2, 3)]
    assert _sweep(settings, start + 2 * GRACE).stalled == []
    [event] = _events(settings, "batch_stalled")
    assert event.data["message"] == ("all 2 students are blocked; 3 turns wait for a student; "
                                     "review the queue or change the policy")
    with session_scope(settings.database_url) as s:
        assert [x.role for x in stall.stalls(s, batch_id)] == ["student"]
        assert stall.stalled_roles(s) == {"student"}


def test_unblocking_one_worker_clears_the_stall(settings, providers):
    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=1)
    ann = crowd.worker("student", "ann")
    _block(settings, ann)
    start = utcnow()
    _sweep(settings, start)
    assert len(_sweep(settings, start + GRACE).stalled) == 1

    with session_scope(settings.database_url) as s:
        monitor.unblock_worker(s, s.get(Worker, ann.id), actor="requester:r")
    changes = _sweep(settings, start + GRACE + timedelta(seconds=1))
    assert [(s.role, s.batch_id) for s in changes.cleared] == [("student", batch_id)]
    assert len(_events(settings, "batch_stall_cleared")) == 1
    with session_scope(settings.database_url) as s:
        assert stall.stalls(s, batch_id) == []


def test_a_short_starvation_that_ends_within_the_grace_period_is_never_reported(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    ann = crowd.worker("student", "ann")
    _block(settings, ann)
    start = utcnow()
    _sweep(settings, start)
    with session_scope(settings.database_url) as s:
        monitor.unblock_worker(s, s.get(Worker, ann.id), actor="requester:r")
    _sweep(settings, start + GRACE / 2)
    assert _sweep(settings, start + 2 * GRACE).stalled == []
    assert _events(settings, "batch_stalled") == [] and _events(settings, "batch_stall_cleared") == []


def test_workers_who_never_onboarded_or_never_came_do_not_make_a_stall(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    with session_scope(settings.database_url) as s:
        s.add(Worker(external_id="new", role="student", onboarded=False))
    start = utcnow()
    _sweep(settings, start)
    assert _sweep(settings, start + GRACE).stalled == []
    with session_scope(settings.database_url) as s:
        assert [(x.role, x.workers, x.eligible, x.waiting) for x in stall.role_supply(s, crowd.batch_id)] == [
            ("student", 0, 0, 1), ("teacher", 0, 0, 0)]
