"""The embedded crowd provider: HITs live in our own database and people take them from ``/queue``.

Publishing, approving and paying are bookkeeping only: the queue reads open HITs straight from the
database, blocks are the worker's status, and money is what our records say.
"""

from __future__ import annotations

from sqlmodel import Session

from turkflow.hits.provider import CrowdProvider
from turkflow.models import Assignment, AssignmentStatus, Batch, Bonus, Hit, Worker, utcnow


class LocalProvider(CrowdProvider):
    name = "local"

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        return f"local-{hit.id}"

    def expire(self, session: Session, hit: Hit) -> None:
        """Nothing to tell anyone: the queue only lists open HITs."""

    def approve(self, session: Session, assignment: Assignment) -> None:
        assignment.status = AssignmentStatus.approved
        assignment.reviewed_at = utcnow()
        session.add(assignment)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> None:
        """Local bonuses are paid outside turkflow (e.g. by the lab); the record is the payment."""

    def block(self, session: Session, worker: Worker, reason: str, permanent: bool) -> None:
        """The worker's status already keeps them out of /queue."""

    def unblock(self, session: Session, worker: Worker) -> None:
        """The worker's status already lets them back in."""
