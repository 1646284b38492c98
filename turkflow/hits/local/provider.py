"""The embedded crowd provider: HITs live in our own database and people take them from ``/queue``.

Publishing, approving and paying are bookkeeping only: the queue reads open HITs straight from the
database, blocks are the worker's status, onboarding is the ``/onboarding`` quiz, and money is what our
records say. Nobody approves a local turn by hand, so the reconciler approves each one a delay after
submission, as turkflow does on MTurk; until then its reward shows as pending.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional

from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.config import Settings
from turkflow.hits.provider import CrowdProvider, HitCheck
from turkflow.models import Assignment, AssignmentStatus, Batch, Bonus, Hit, Turn, Worker, utcnow


class LocalProvider(CrowdProvider):
    name = "local"
    calls_platform = False

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        return f"local-{hit.id}"

    def expire(self, session: Session, hit: Hit) -> None:
        """Nothing to tell anyone: the queue only lists open HITs."""

    def verify_submission(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        """Our own lease is the only record: ``lifecycle.submit_turn`` checks it."""

    def hits_to_check(self, session: Session, limit: int = 500) -> list[int]:
        """None: our database is the only record of local work."""
        return []

    def check_hit(self, session: Session, hit: Hit, now: datetime) -> HitCheck:
        """Nothing to compare with (``hits_to_check`` lists no HIT); expired leases are released by the
        reconciler itself."""
        return HitCheck()

    def approvals_due(self, session: Session, settings: Settings, now: datetime, limit: int = 500) -> list[int]:
        """Local assignments submitted at least TURKFLOW_LOCAL_APPROVE_AFTER_SECONDS ago; the delay leaves the
        requester time to look at a turn before its reward counts as spent."""
        delay = timedelta(seconds=settings.local_approve_after_seconds)
        return list(session.exec(
            select(Assignment.id).join(Hit, Hit.id == Assignment.hit_id)
            .where(Hit.provider == self.name, Assignment.status == AssignmentStatus.submitted,
                   col(Assignment.submitted_at) <= now - delay)
            .order_by(Assignment.id).limit(limit)
        ))

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Submitted work becomes approved (and its reward spent); anything else is left as it is."""
        if assignment.status != AssignmentStatus.submitted:
            return
        states.move(assignment, AssignmentStatus.approved)
        assignment.reviewed_at = utcnow()
        session.add(assignment)
        turn = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)
        events.record(session, "assignment_approved", "system", conversation_id=turn.conversation_id,
                      turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> list[int]:
        """Local bonuses are paid outside turkflow (e.g. by the lab); the record is the payment."""
        return [bonus.id]

    def balance_cents(self, live: bool) -> Optional[int]:
        """No account: the lab pays its people itself."""
        return None

    def check_onboarding_gate(self, session: Session, live: bool) -> None:
        """Always in place: ``/queue`` sends a worker who has not passed their role's quiz to ``/onboarding``."""

    def soft_block(self, session: Session, worker: Worker, reason: str) -> None:
        """The worker's status already keeps them out of /queue."""

    def block_permanently(self, session: Session, worker: Worker, reason: str) -> None:
        """The worker's status already keeps them out of /queue."""

    def unblock(self, session: Session, worker: Worker) -> None:
        """The worker's status already lets them back in."""

    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        """No messaging: local workers are reached however the lab invited them."""
