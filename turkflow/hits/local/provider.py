"""The embedded crowd provider: HITs live in our own database and people take them from ``/queue``.

Publishing, approving and paying are bookkeeping only: the queue reads open HITs straight from the
database, blocks are the worker's status, and money is what our records say. Nobody approves a local
turn by hand, so the reconciler approves each one a delay after submission, as turkflow does on MTurk;
until then its reward shows as pending.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from turkflow import events
from turkflow.hits.provider import CrowdProvider
from turkflow.models import Assignment, AssignmentStatus, Batch, Bonus, Hit, Turn, Worker, utcnow


class LocalProvider(CrowdProvider):
    name = "local"

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        return f"local-{hit.id}"

    def expire(self, session: Session, hit: Hit) -> None:
        """Nothing to tell anyone: the queue only lists open HITs."""

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Submitted work becomes approved (and its reward spent); anything else is left as it is."""
        if assignment.status != AssignmentStatus.submitted:
            return
        assignment.status = AssignmentStatus.approved
        assignment.reviewed_at = utcnow()
        session.add(assignment)
        turn = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)
        events.record(session, "assignment_approved", "system", conversation_id=turn.conversation_id,
                      turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> None:
        """Local bonuses are paid outside turkflow (e.g. by the lab); the record is the payment."""

    def block(self, session: Session, worker: Worker, reason: str, permanent: bool) -> None:
        """The worker's status already keeps them out of /queue."""

    def unblock(self, session: Session, worker: Worker) -> None:
        """The worker's status already lets them back in."""


def approve_due(session: Session, now: datetime, delay_seconds: int, limit: int = 500) -> list[int]:
    """Approve local assignments submitted at least ``delay_seconds`` before ``now``; returns their ids.

    The delay leaves the requester time to look at a turn before its reward counts as spent.
    """
    due = session.exec(
        select(Assignment).join(Hit, Hit.id == Assignment.hit_id)
        .where(Hit.provider == LocalProvider.name, Assignment.status == AssignmentStatus.submitted,
               col(Assignment.submitted_at) <= now - timedelta(seconds=delay_seconds))
        .order_by(Assignment.id).limit(limit)
    ).all()
    provider = LocalProvider()
    for assignment in due:
        provider.approve(session, assignment)
    return [assignment.id for assignment in due]
