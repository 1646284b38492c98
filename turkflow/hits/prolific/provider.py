"""Prolific as a crowd provider: one study per batch and role, one submission per turn.

A batch role's study lets a participant submit any number of times; its free places follow the turns
waiting for someone, so publishing a turn grows the places (Prolific never lets a published study
shrink) and the last waiting turn going away pauses the study. A HIT's external id is its study's id; an
assignment's is the Prolific submission id (``SESSION_ID`` on our page) and a worker's the participant id
(``PROLIFIC_PID``). Prolific has no researcher-side block, so blocking is membership of a participant
group that every study lists as its block list (membership applies to published studies at once).

Bonuses are paid exactly once although Prolific's pay call is not idempotent (see README.md): the bonus
is claimed in a transaction of its own, committed before the pay call, and a claimed bonus is never paid
again by this code, only settled from Prolific's record of payments on the submission.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from sqlmodel import Session, col, select, update

from turkflow import events
from turkflow.config import Settings
from turkflow.hits import lifecycle
from turkflow.hits.prolific import api
from turkflow.hits.provider import CrowdProvider, HitCheck
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    BonusStatus,
    Conversation,
    Hit,
    HitStatus,
    Turn,
    Worker,
    utcnow,
)

log = logging.getLogger("turkflow.prolific")

PROVIDER = "prolific"


@dataclass(frozen=True)
class ProlificOptions:
    """What the provider needs beyond ``Settings``; each field is meant to become ``TURKFLOW_PROLIFIC_*``."""

    token: str
    workspace_id: str
    project_id: Optional[str] = None
    base_url: str = api.DEFAULT_BASE_URL
    study_name: str = "Write the next message of a how-to chat (one turn)"
    study_description: str = ("Read a short chat between a student and a teacher about a how-to task and "
                              "write the next message. Each submission is one message; come back for more.")
    estimated_minutes: int = 3
    maximum_minutes: int = 20


class SubmissionInProgress(Exception):
    """Prolific still has the submission as reserved or active (the participant has not come back to
    Prolific with the completion code yet); approve or pay later."""


class BonusOutcomeUnknown(Exception):
    """A pay call for this bonus went out, or may have, and Prolific shows no payment on the submission
    yet. Prolific pays within minutes, so a later look usually settles it; never pay it again blindly."""


class ProlificProvider(CrowdProvider):
    name = PROVIDER

    def __init__(self, settings: Settings, options: ProlificOptions,
                 client: Optional[api.ProlificClient] = None):
        self.settings, self.options = settings, options
        self.client = client or api.ProlificClient(options.token, options.base_url)
        self.install = hashlib.sha256(settings.secret_key.encode()).hexdigest()[:10]
        self._blocked_group: Optional[str] = None

    # -- names and codes --

    def internal_name(self, batch_id: int, role: str) -> str:
        """How we find a batch role's study again on Prolific (a retried creation finds the first draft)."""
        return f"turkflow {self.install} batch {batch_id} {role}"

    def completion_code(self, batch_id: int, role: str) -> str:
        """The code our page sends a participant back to Prolific with when their turn is stored."""
        key = self.settings.secret_key.encode()
        return hmac.new(key, f"prolific {batch_id} {role}".encode(), hashlib.sha256).hexdigest()[:10].upper()

    def page_url(self, batch_id: int, role: str) -> str:
        return f"{self.settings.public_url.rstrip('/')}/prolific/turn?b={batch_id}&r={role}"

    # -- turns --

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        """Make room for this turn on its batch role's study: create the study on first use, grow its
        places to the places taken plus the turns waiting, and publish or resume it.

        A participant who has just started but not yet reached our page is counted twice (taken, and the
        turn they will take is still waiting), so places can run one ahead; our page then finds no turn
        for them and asks them to return the submission.
        """
        study = self._study(batch, hit.role)
        waiting = _waiting_turns(session, batch.id, hit.role, include=hit)
        wanted = int(study.get("places_taken") or 0) + waiting
        if study["status"] == "UNPUBLISHED" or wanted > (study.get("total_available_places") or 0):
            api.update_study(self.client, study["id"], {"total_available_places": wanted})
        if study["status"] == "UNPUBLISHED":
            api.transition_study(self.client, study["id"], "PUBLISH")
        elif study["status"] == "PAUSED":
            api.transition_study(self.client, study["id"], "START")
        return study["id"]

    def expire(self, session: Session, hit: Hit) -> None:
        """Places cannot be taken back, so when no turn of the study waits any more the study pauses
        (participants already in it may still finish); the next published turn resumes it."""
        if hit.external_id is None:
            return
        batch = lifecycle.batch_of_hit(session, hit)
        if _waiting_turns(session, batch.id, hit.role, exclude=hit) == 0:
            if api.get_study(self.client, hit.external_id)["status"] == "ACTIVE":
                api.transition_study(self.client, hit.external_id, "PAUSE")
        events.record(session, "hit_expired", "provider", turn_id=hit.turn_id, hit_id=hit.id,
                      external_id=hit.external_id)

    def verify_submission(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        raise NotImplementedError("Prolific's turn page is not built yet")

    def _study(self, batch: Batch, role: str) -> dict[str, Any]:
        """The batch role's study as Prolific lists it (with ``places_taken``), created as a draft if new.

        Two workers publishing a role's first turns at once may both create a draft; both then take the
        earliest one, and the other stays an unpublished draft, which costs nothing.
        """
        name = self.internal_name(batch.id, role)
        mine = self._studies_named(name)
        if mine:
            return mine[0]
        created = self._create_study(batch, role, name)
        return (self._studies_named(name) or [{**created, "places_taken": 0}])[0]

    def _studies_named(self, name: str) -> list[dict[str, Any]]:
        return sorted((s for s in api.list_studies(self.client) if s.get("internal_name") == name),
                      key=lambda s: (s.get("date_created") or "", s["id"]))

    def _create_study(self, batch: Batch, role: str, name: str) -> dict[str, Any]:
        body = api.study_body(
            name=self.options.study_name, description=self.options.study_description,
            page_url=self.page_url(batch.id, role), completion_code=self.completion_code(batch.id, role),
            reward_cents=batch.reward_cents, places=1, estimated_minutes=self.options.estimated_minutes,
            maximum_minutes=self.options.maximum_minutes, internal_name=name,
            block_groups=[self.blocked_group()], project=self.options.project_id)
        created = api.create_study(self.client, body)
        log.info("created Prolific study %s for batch %s %s", created["id"], batch.id, role)
        return created

    # -- the reconciler (not built yet: README.md says how it must settle bonuses) --

    def hits_to_check(self, session: Session, limit: int = 500) -> list[int]:
        raise NotImplementedError("Prolific's reconciler is not built yet")

    def check_hit(self, session: Session, hit: Hit, now: datetime) -> HitCheck:
        raise NotImplementedError("Prolific's reconciler is not built yet")

    def approvals_due(self, session: Session, settings: Settings, now: datetime, limit: int = 500) -> list[int]:
        raise NotImplementedError("Prolific's reconciler is not built yet")

    # -- submissions and money --

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Approve the submission (Prolific ignores a repeat); one Prolific already approved settles ours."""
        if assignment.status != AssignmentStatus.submitted:
            return
        try:
            api.transition_submission(self.client, assignment.external_id, "APPROVE")
        except api.ProlificError as exc:
            if exc.status != 400:
                raise
            status = api.get_submission(self.client, assignment.external_id)["status"]
            if status in ("RESERVED", "ACTIVE"):
                raise SubmissionInProgress(f"submission {assignment.external_id} is still {status} on "
                                           "Prolific") from None
            if status != "APPROVED":
                raise
        lifecycle.settle_assignment(session, assignment, AssignmentStatus.approved)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> None:
        """Set up the bonus on the turn's submission, claim it, then pay once.

        The claim is ``paid_at`` written while the bonus is still pending, committed in a transaction of
        its own before the pay call (the caller must hold no uncommitted write to this bonus). A claimed
        bonus is settled only from the submission's ``bonus_payments``: a turn is one submission and
        earns at most one bonus, so a payment there is this one.
        """
        submission = api.get_submission(self.client, assignment.external_id)
        if submission.get("bonus_payments"):
            return
        if bonus.paid_at is not None:
            raise BonusOutcomeUnknown(f"bonus {bonus.id} went to Prolific at {bonus.paid_at:%H:%M} UTC and "
                                      f"submission {assignment.external_id} shows no payment yet")
        bulk = api.set_up_bonus_payments(self.client, submission["study_id"],
                                         {assignment.external_id: bonus.amount_cents})
        if not _claim(session, bonus.id):
            raise BonusOutcomeUnknown(f"bonus {bonus.id} is being paid by another worker")
        try:
            api.pay_bonus_payments(self.client, bulk["id"])
        except api.ProlificError as exc:
            if not exc.sent or 400 <= exc.status < 500:  # certainly not paid: let a retry pay it
                _release(session, bonus.id)
            raise
        events.record(session, "prolific_bonus_sent", "provider", bonus_id=bonus.id, bulk_id=bulk["id"],
                      submission_id=assignment.external_id, total_cents=bulk["total_amount"])

    # -- participants --

    def check_onboarding_gate(self, session: Session, live: bool) -> None:
        raise NotImplementedError("Prolific does not gate turns on the onboarding quiz yet")

    def soft_block(self, session: Session, worker: Worker, reason: str) -> None:
        """The block-list group every study of ours lists."""
        api.add_to_participant_group(self.client, self.blocked_group(), [worker.external_id])

    def block_permanently(self, session: Session, worker: Worker, reason: str) -> None:
        """The same block-list group: Prolific offers researchers nothing stronger."""
        self.soft_block(session, worker, reason)

    def unblock(self, session: Session, worker: Worker) -> None:
        api.remove_from_participant_group(self.client, self.blocked_group(), [worker.external_id])

    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        """Prolific sends a message in the context of a study the participant took part in: each
        worker's latest of ours; a worker who never took one of our turns is not messaged."""
        by_study: dict[str, list[str]] = {}
        for worker in workers:
            study_id = session.exec(
                select(Hit.external_id).join(Assignment, Assignment.hit_id == Hit.id)
                .where(Assignment.worker_id == worker.id, Hit.provider == PROVIDER)
                .order_by(col(Assignment.id).desc())).first()
            if study_id is not None:
                by_study.setdefault(study_id, []).append(worker.external_id)
        for study_id, participant_ids in by_study.items():
            api.send_message(self.client, study_id, participant_ids, f"{subject}\n\n{message}")

    def blocked_group(self) -> str:
        """Our block-list group's id, found by name or created once per process."""
        if self._blocked_group is None:
            name = f"turkflow {self.install} blocked"
            found = [g["id"] for g in api.list_participant_groups(self.client, self.options.workspace_id)
                     if g.get("name") == name and not g.get("is_deleted")]
            self._blocked_group = found[0] if found else api.create_participant_group(
                self.client, self.options.workspace_id, name,
                "Participants turkflow keeps out of its studies (low-rated work under review).")["id"]
        return self._blocked_group

    def balance_cents(self, live: bool = True) -> Optional[int]:
        """What the workspace can still spend, in its currency's minor unit (Prolific has no sandbox)."""
        balance = api.get_workspace_balance(self.client, self.options.workspace_id)
        return int(balance["available_balance"] or 0)


def _waiting_turns(session: Session, batch_id: int, role: str, *, include: Optional[Hit] = None,
                   exclude: Optional[Hit] = None) -> int:
    """Turns of a batch role that need a participant: HITs pending or open that nobody holds."""
    held = select(Assignment.hit_id).where(Assignment.status == AssignmentStatus.accepted)
    ids = set(session.exec(
        select(Hit.id).join(Turn, Turn.id == Hit.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == batch_id, Hit.role == role, Hit.provider == PROVIDER,
               col(Hit.status).in_([HitStatus.pending, HitStatus.open]), col(Hit.id).not_in(held))))
    if include is not None:
        ids.add(include.id)
    if exclude is not None:
        ids.discard(exclude.id)
    return len(ids)


def _claim(session: Session, bonus_id: int) -> bool:
    """Mark a pending bonus as about to be paid, durably and only once across workers."""
    with Session(session.get_bind()) as own:
        claimed = own.execute(
            update(Bonus).where(Bonus.id == bonus_id, Bonus.status == BonusStatus.pending,
                                col(Bonus.paid_at).is_(None)).values(paid_at=utcnow())).rowcount
        own.commit()
    return claimed == 1


def _release(session: Session, bonus_id: int) -> None:
    """Undo a claim whose pay call certainly did not reach Prolific or was refused."""
    with Session(session.get_bind()) as own:
        own.execute(update(Bonus).where(Bonus.id == bonus_id, Bonus.status == BonusStatus.pending)
                    .values(paid_at=None))
        own.commit()
