"""MTurk assignments in our records: a worker holding a HIT, from MTurk's ids (the turn page, or the
reconciler), and a submission MTurk recorded that we never stored. Plain steps over a session; callers commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Optional

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from turkflow import events
from turkflow.db import savepoint
from turkflow.errors import Conflict, Forbidden
from turkflow.hits import lifecycle
from turkflow.hits.mturk.answers import parse_answers
from turkflow.hits.mturk.pages import check_mturk_ids
from turkflow.models import Assignment, AssignmentStatus, Hit, HitStatus, Turn, TurnStatus, Worker, utcnow

MTURK_STATUS = {"Submitted": AssignmentStatus.submitted, "Approved": AssignmentStatus.approved,
                "Rejected": AssignmentStatus.rejected}


def accept_assignment(session: Session, hit: Hit, assignment_id: str, worker_id: str,
                      now: Optional[datetime] = None) -> Assignment:
    """Record that an MTurk worker holds the HIT, from MTurk's ids (the caller verified them with MTurk).

    A worker new to us joins with the HIT's role: MTurk only lets workers holding that role's
    qualification accept it. Any other assignment still marked accepted for this HIT is stale (a turn HIT
    has one assignment at a time, so its worker returned or abandoned it) and is closed.
    """
    now = now or utcnow()
    check_mturk_ids(assignment_id, worker_id)
    worker = _worker(session, worker_id, hit.role)
    lifecycle.check_can_work(worker, hit.role)
    existing = session.exec(select(Assignment).where(Assignment.external_id == assignment_id)).first()
    if existing is not None:
        if existing.hit_id != hit.id or existing.worker_id != worker.id:
            raise Forbidden("this assignment belongs to another HIT or worker")
        return existing
    turn = session.get(Turn, hit.turn_id)
    if turn.status != TurnStatus.open or hit.status != HitStatus.open:
        raise Conflict("this turn is no longer open; please return the HIT")
    for stale in session.exec(select(Assignment).where(Assignment.hit_id == hit.id,
                                                       Assignment.status == AssignmentStatus.accepted)):
        lifecycle.abandon_assignment(session, stale, "replaced by a new MTurk assignment")
    assignment = Assignment(hit_id=hit.id, worker_id=worker.id, external_id=assignment_id, accepted_at=now)
    try:
        with savepoint(session):
            session.add(assignment)
            session.flush()
    except IntegrityError:  # the same page loaded twice at once
        return accept_assignment(session, hit, assignment_id, worker_id, now)
    events.record(session, "mturk_assignment_accepted", f"worker:{worker.id}", conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=worker.id, assignment_id=assignment.id, hit_id=hit.id)
    return assignment


def _worker(session: Session, external_id: str, role: str) -> Worker:
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is not None:
        return worker
    worker = Worker(external_id=external_id, role=role, onboarded=True)
    try:
        with savepoint(session):
            session.add(worker)
            session.flush()
    except IntegrityError:
        return session.exec(select(Worker).where(Worker.external_id == external_id)).one()
    events.record(session, "worker_joined", "provider", worker_id=worker.id, role=role, provider="mturk")
    return worker


def store_missed_submission(session: Session, hit: Hit, remote: dict[str, Any]) -> lifecycle.Submission:
    """Store a turn MTurk recorded as submitted but we never did (the worker's POST to us was lost)."""
    assignment = accept_assignment(session, hit, remote["AssignmentId"], remote["WorkerId"],
                                   now=remote.get("AcceptTime"))
    worker = session.get(Worker, assignment.worker_id)
    submission = lifecycle.submit_turn(session, assignment.external_id, worker, parse_answers(remote.get("Answer")),
                                       now=remote.get("SubmitTime"))
    status = MTURK_STATUS.get(remote.get("AssignmentStatus"), AssignmentStatus.submitted)
    if status != AssignmentStatus.submitted:
        lifecycle.settle_assignment(session, assignment, status)
    events.record(session, "missed_submission_stored", "provider", conversation_id=submission.turn.conversation_id,
                  turn_id=submission.turn.id, worker_id=worker.id, assignment_id=assignment.id, hit_id=hit.id)
    return submission
