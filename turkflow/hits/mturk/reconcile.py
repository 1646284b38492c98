"""The MTurk reconciler's steps: which HITs and approvals to look at, and how one HIT's records at MTurk
repair ours. MTurk's notifications are at-least-once and can be missed, so polling is the source of truth.

``check_hit`` only repairs our records and says what it found (a turn stored from MTurk's records, a new
attempt to publish); ``turkflow.pipeline`` runs the steps that follow, the same as for a live submission.
MTurk is read GetHIT first, then ListAssignmentsForHIT, so a worker who submits between the two calls is
seen as a submission, never as an expired HIT.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from turkflow import events
from turkflow.db import savepoint
from turkflow.errors import TurkflowError
from turkflow.hits import lifecycle
from turkflow.hits.mturk.assignments import MTURK_STATUS, store_missed_submission
from turkflow.hits.provider import HitCheck
from turkflow.models import Assignment, AssignmentStatus, Hit, HitStatus

log = logging.getLogger("turkflow.mturk")


def open_hits(session: Session, limit: int = 500) -> list[int]:
    return list(session.exec(
        select(Hit.id).where(Hit.provider == "mturk", Hit.status == HitStatus.open, col(Hit.external_id).is_not(None))
        .order_by(Hit.id).limit(limit)
    ))


def due_for_approval(session: Session, now: datetime, delay_seconds: int, limit: int = 500) -> list[int]:
    """MTurk assignments submitted at least ``delay_seconds`` before ``now``: turkflow approves them now."""
    return list(session.exec(
        select(Assignment.id).join(Hit, Hit.id == Assignment.hit_id)
        .where(Hit.provider == "mturk", Assignment.status == AssignmentStatus.submitted,
               col(Assignment.submitted_at) <= now - timedelta(seconds=delay_seconds))
        .order_by(Assignment.id).limit(limit)
    ))


def check_hit(session: Session, hit: Hit, remote_hit: dict[str, Any], remote_assignments: list[dict[str, Any]],
              now: datetime) -> HitCheck:
    """Repair one open HIT's records from what MTurk says about it (GetHIT, then ListAssignmentsForHIT)."""
    found = HitCheck()
    for remote in remote_assignments:
        ours = session.exec(select(Assignment).where(Assignment.external_id == remote["AssignmentId"])).first()
        if ours is not None and ours.status != AssignmentStatus.accepted:
            status = MTURK_STATUS.get(remote["AssignmentStatus"])
            if status not in (None, AssignmentStatus.submitted) and lifecycle.settle_assignment(session, ours, status):
                found.settled.append(ours.id)
            continue
        try:
            with savepoint(session):
                found.stored_turn_id = store_missed_submission(session, hit, remote).turn.id
        except (ValueError, TurkflowError) as exc:
            log.warning("HIT %s: MTurk assignment %s is submitted but cannot be stored (%s); reopening the turn",
                        hit.id, remote["AssignmentId"], exc)
            events.record(session, "missed_submission_unreadable", "provider", turn_id=hit.turn_id, hit_id=hit.id,
                          mturk_assignment=remote["AssignmentId"], reason=str(exc))
            found.unreadable = True
            _reopen(session, hit, "submitted on MTurk but unreadable", found)
        return found
    if remote_assignments:
        return found
    if remote_hit.get("NumberOfAssignmentsPending", 0) > 0:
        return found  # someone is working on it, even if the HIT has expired meanwhile
    for stale in session.exec(select(Assignment).where(Assignment.hit_id == hit.id,
                                                       Assignment.status == AssignmentStatus.accepted)):
        if lifecycle.abandon_assignment(session, stale, "returned or abandoned on MTurk"):
            found.abandoned.append(stale.id)
    expiration = remote_hit.get("Expiration")
    if expiration is not None and expiration <= now:
        _reopen(session, hit, "expired on MTurk unanswered", found)
    return found


def _reopen(session: Session, hit: Hit, reason: str, found: HitCheck) -> None:
    attempt = lifecycle.reopen_turn(session, hit, reason)
    found.reopened_hit_id = attempt.id if attempt else None
