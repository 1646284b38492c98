"""Keeping our records and Prolific's in step, from webhooks or by polling: both end in ``apply_status``.

Prolific's webhooks need a public HTTPS address and can be missed, so the poller (a Celery beat task) reads
every running study's submissions and does the same; each step is idempotent, so an event seen twice, or
by both ways, changes things once. A round also keeps each study's places in step with its waiting turns,
asks Prolific to approve the turns whose review delay has passed (nothing is ever rejected automatically),
and lists the claimed bonuses whose pay outcome is still unknown, for the pipeline to settle from Prolific.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Optional

from sqlmodel import Session, col, select

from turkflow import events
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.hits.prolific import api, pages
from turkflow.hits.prolific.provider import ProlificProvider
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    BonusStatus,
    Conversation,
    Hit,
    ProlificStudy,
    Turn,
    utcnow,
)

log = logging.getLogger("turkflow.prolific")

GIVES_TURN_BACK = {"RETURNED": "returned on Prolific", "TIMED-OUT": "timed out on Prolific"}
VERDICTS = {"APPROVED": AssignmentStatus.approved, "REJECTED": AssignmentStatus.rejected}
FINISHED = {"AWAITING REVIEW", "PARTIALLY APPROVED", *VERDICTS}


@dataclass
class ProlificRound:
    """What one round found and did; ids are our assignment, bonus or study ids."""

    released: list[int] = field(default_factory=list)  # turns given back: submission returned or timed out
    settled: list[int] = field(default_factory=list)  # approved or rejected on Prolific, now here too
    finished_without_turn: list[int] = field(default_factory=list)  # done on Prolific, no turn stored here
    approvals_asked: list[int] = field(default_factory=list)
    claimed_bonuses: list[int] = field(default_factory=list)  # pay outcome unknown: settle from Prolific
    studies: dict[str, str] = field(default_factory=dict)  # Prolific study id -> its status afterwards
    failed: list[str] = field(default_factory=list)  # studies Prolific could not be asked about this round

    def __bool__(self) -> bool:
        return any((self.released, self.settled, self.finished_without_turn, self.failed))


def apply_status(session: Session, submission_id: str, status: str, found: ProlificRound) -> None:
    """Take a submission's status on Prolific into our records (the caller commits).

    Returned or timed out: the turn it held goes back to the pool. Approved or rejected (by us, by hand in
    Prolific's app, or by Prolific's own auto-approval): our assignment says so. Finished on Prolific while
    we stored no turn (the participant came back without our page's code): the turn goes back too, and
    the submission waits for a person's review on Prolific. Anything else changes nothing here.
    """
    assignment = session.exec(select(Assignment).where(Assignment.external_id == submission_id)).first()
    if assignment is None:
        return
    if status in GIVES_TURN_BACK:
        if pages.release(session, assignment, GIVES_TURN_BACK[status]):
            found.released.append(assignment.id)
    elif status in FINISHED and assignment.status == AssignmentStatus.accepted:
        pages.release(session, assignment, "finished on Prolific before a turn was stored")
        found.finished_without_turn.append(assignment.id)
        turn = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)
        events.record(session, "prolific_finished_without_turn", "provider", turn_id=turn.id,
                      conversation_id=turn.conversation_id, worker_id=assignment.worker_id,
                      assignment_id=assignment.id, submission_id=submission_id, status=status)
    elif status in VERDICTS and assignment.status != AssignmentStatus.abandoned:
        if lifecycle.settle_assignment(session, assignment, VERDICTS[status]):
            found.settled.append(assignment.id)


def poll(settings: Settings, provider: ProlificProvider, now: Optional[datetime] = None) -> ProlificRound:
    """One round over every running study: submissions, places, approvals due, bonuses to settle.

    Each study is its own transaction; one Prolific cannot answer about is skipped this round.
    """
    now = now or utcnow()
    found = ProlificRound()
    with session_scope(settings.database_url) as session:
        studies = [(row.id, row.study_id) for row in session.exec(
            select(ProlificStudy).where(col(ProlificStudy.study_id).is_not(None),
                                        col(ProlificStudy.ended_at).is_(None)).order_by(ProlificStudy.id))]
    for row_id, study_id in studies:
        try:
            submissions = list(api.list_submissions(provider.client, study_id))
            with session_scope(settings.database_url) as session:
                for submission in submissions:
                    apply_status(session, submission["id"], submission["status"], found)
            with session_scope(settings.database_url) as session:
                row = session.get(ProlificStudy, row_id)
                status = provider.keep_in_step(session, session.get(Batch, row.batch_id), row.role)
            found.studies[study_id] = status or "UNPUBLISHED"
        except api.ProlificError as exc:
            log.warning("Prolific study %s skipped this round (%s)", study_id, exc)
            found.failed.append(study_id)
    found.approvals_asked = approve_due(settings, provider, now)
    with session_scope(settings.database_url) as session:
        found.claimed_bonuses = claimed_bonuses(session)
    return found


def approve_due(settings: Settings, provider: ProlificProvider, now: datetime) -> list[int]:
    """Ask Prolific to approve, in bulk, the submissions whose turn was stored at least the review delay
    ago; the next round settles ours from what Prolific then says (a submission whose participant has not
    gone back to Prolific yet cannot be approved, and is asked again)."""
    stored_before = now - timedelta(seconds=settings.prolific_approve_after_seconds)
    with session_scope(settings.database_url) as session:
        due = session.exec(
            select(Assignment.id, Assignment.external_id).join(Hit, Hit.id == Assignment.hit_id)
            .where(Hit.provider == pages.PROVIDER, Assignment.status == AssignmentStatus.submitted,
                   col(Assignment.submitted_at) <= stored_before)
            .order_by(Assignment.id).limit(api.MAX_APPROVALS_PER_REQUEST)
        ).all()
    if due:
        api.bulk_approve_submissions(provider.client, [submission_id for _, submission_id in due])
    return [assignment_id for assignment_id, _ in due]


def claimed_bonuses(session: Session, limit: int = 500) -> list[int]:
    """Prolific bonuses claimed for payment and not yet known paid (a crash or a lost answer after the
    claim); ``pipeline.pay_bonus`` settles each from the submission's ``bonus_payments``, never pays again."""
    return list(session.exec(
        select(Bonus.id).join(Turn, Turn.id == Bonus.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .join(Batch, Batch.id == Conversation.batch_id)
        .where(Batch.provider == pages.PROVIDER, Bonus.status == BonusStatus.pending,
               col(Bonus.pay_claimed_at).is_not(None))
        .order_by(Bonus.id).limit(limit)
    ))
