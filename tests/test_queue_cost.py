"""The queue reads the oldest open turns and those kept for the worker without sorting every open turn
(issue 27: that sort was half of PostgreSQL's CPU per turn). What it lists must not change: the turns kept
for the worker first, then the oldest, the page cut at its limit, each turn once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from tests.test_pipeline import launch, make_worker
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Hit, utcnow

pytestmark = pytest.mark.both_backends  # the statement's plan and its LIMITs in a UNION are the subject


def test_the_queue_lists_the_kept_turns_first_then_the_oldest_cut_at_the_page(settings, providers):
    launch(settings, providers, conversations=30)
    student, other = make_worker(settings, "student", "s1"), make_worker(settings, "student", "s2")
    with session_scope(settings.database_url) as s:
        oldest_first = [hit.id for hit in lifecycle.open_hits_for(s, student, limit=100)]
        # kept for the student: one of the oldest (also in the oldest part), one beyond a page of 12; kept for
        # another worker who may still take it: one the student must not see; a reservation that ran out
        kept = [oldest_first[2], oldest_first[20]]
        now = utcnow()
        for hit_id, worker_id, until in ((kept[0], student.id, now + timedelta(minutes=5)),
                                         (kept[1], student.id, now + timedelta(minutes=5)),
                                         (oldest_first[4], other.id, now + timedelta(minutes=5)),
                                         (oldest_first[6], other.id, now - timedelta(minutes=5))):
            s.execute(update(Hit).where(Hit.id == hit_id).values(reserved_for_id=worker_id, reserved_until=until))
        # leased to somebody now: not listed; a lease that ran out: listed again
        s.execute(update(Hit).where(Hit.id == oldest_first[0]).values(lease_expires_at=now + timedelta(minutes=5)))
        s.execute(update(Hit).where(Hit.id == oldest_first[1]).values(lease_expires_at=now - timedelta(minutes=5)))
    with session_scope(settings.database_url) as s:
        for limit in (1, 2, 3, 12, 50):
            expected = [hit.id for hit in lifecycle.open_hits_for(s, student, limit=limit)]  # kept first, then by id
            listed = [entry["hit_id"] for entry in lifecycle.queue_entries(s, student, limit=limit)]
            assert len(listed) == len(set(listed)) == len(expected)
            assert listed[:min(limit, 2)] == expected[:min(limit, 2)] == kept[:limit]
            assert listed[2:] == lifecycle._spread(expected[2:], student.id)
        assert oldest_first[4] not in listed and oldest_first[6] in listed
        assert oldest_first[0] not in listed and oldest_first[1] in listed
        other_listed = [entry["hit_id"] for entry in lifecycle.queue_entries(s, other)]
        assert other_listed[0] == oldest_first[4] and kept[0] not in other_listed and kept[1] not in other_listed
