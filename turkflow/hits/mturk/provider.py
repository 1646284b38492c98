"""Amazon Mechanical Turk as a crowd provider: real HITs through boto3, on the sandbox unless a batch is live.

``MTurkProvider`` implements ``CrowdProvider`` with the operations in ``api.py``, choosing the sandbox or
the live client from each batch, and turns MTurk's failures into ``ProviderError`` as they leave it.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta
from typing import Any, Optional
from xml.sax.saxutils import escape

from botocore.exceptions import ClientError
from sqlmodel import Session, select

from turkflow import events
from turkflow.config import Settings
from turkflow.errors import Forbidden
from turkflow.hits import lifecycle
from turkflow.protocols.star import stages
from turkflow.hits.money import usd
from turkflow.hits.mturk import api, reconcile
from turkflow.hits.mturk.api import MTurkError, NotPayableYet, translated
from turkflow.hits.mturk.assignments import MTURK_STATUS
from turkflow.hits.mturk.pages import hit_token
from turkflow.hits.mturk.qualifications import (
    answer_key_xml,
    purposes_for,
    qualification_ids,
    qualification_names,
    qualification_requirements,
    question_form_xml,
    quiz_of,
)
from turkflow.hits.provider import CrowdProvider, HitCheck
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    Conversation,
    Hit,
    MTurkQualification,
    Turn,
    Worker,
    utcnow,
)

log = logging.getLogger("turkflow.mturk")

EXTERNAL_QUESTION_NS = ("http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
                        "ExternalQuestion.xsd")


def external_question(url: str, frame_height: int) -> str:
    return (f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}"><ExternalURL>{escape(url)}</ExternalURL>'
            f"<FrameHeight>{frame_height}</FrameHeight></ExternalQuestion>")


class MTurkProvider(CrowdProvider):
    name = "mturk"

    def __init__(self, settings: Settings, client: Optional[Any] = None):
        self.settings = settings
        self._injected = client
        self._clients: dict[bool, Any] = {}
        self.install = hashlib.sha256(settings.secret_key.encode()).hexdigest()[:10]

    def client(self, live: bool) -> Any:
        if self._injected is not None:
            return self._injected
        if live not in self._clients:
            with translated():
                self._clients[live] = api.make_client(self.settings, live)
        return self._clients[live]

    # -- HITs --

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        if not self.settings.public_url.startswith("https://"):
            raise MTurkError(f"MTurk shows only HTTPS pages; TURKFLOW_PUBLIC_URL is {self.settings.public_url}")
        quals = qualification_ids(session, batch.live, batch.protocol)
        turn = session.get(Turn, hit.turn_id)
        with translated():
            stage = stages.required_stage(session.get(Conversation, turn.conversation_id).scenario)
            hit_id = api.create_hit(self.client(batch.live), self.hit_request(hit, batch, turn, quals, stage))
        hit.expires_at = utcnow() + timedelta(seconds=self.settings.mturk_lifetime_seconds)
        session.add(hit)
        return hit_id

    def hit_request(self, hit: Hit, batch: Batch, turn: Turn, quals: dict[str, str],
                    stage: int = stages.SINGLE_TASK) -> dict[str, Any]:
        """A turn's HIT; a STAR turn's requires the qualification ``stage`` its conversation needs."""
        s = self.settings
        url = f"{s.public_url.rstrip('/')}/mturk/turn?h={hit_token(s.secret_key, hit.id)}"
        return {
            "Title": f"{turn.role.capitalize()}: {s.mturk_title}",
            "Description": s.mturk_description,
            "Keywords": s.mturk_keywords,
            "Reward": usd(batch.reward_cents),
            "MaxAssignments": 1,
            "LifetimeInSeconds": s.mturk_lifetime_seconds,
            "AssignmentDurationInSeconds": s.mturk_assignment_seconds,
            "AutoApprovalDelayInSeconds": s.mturk_auto_approve_seconds,
            "Question": external_question(url, s.mturk_frame_height),
            "RequesterAnnotation": self.annotation(hit, batch, turn),
            "UniqueRequestToken": self.request_token(f"hit-{hit.id}"),
            "QualificationRequirements": qualification_requirements(s, quals, turn.role, batch.live, stage),
        }

    def annotation(self, hit: Hit, batch: Batch, turn: Turn) -> str:
        return f"turkflow {self.install} batch {batch.id} turn {turn.id} hit {hit.id}"

    def request_token(self, what: str) -> str:
        """Deterministic per install and per thing created (at most 64 characters, MTurk's limit)."""
        return f"turkflow-{self.install}-{what}"[:64]

    def expire(self, session: Session, hit: Hit) -> None:
        if hit.external_id is None:
            return  # never reached MTurk
        with translated():
            api.update_expiration_for_hit(self.client(lifecycle.batch_of_hit(session, hit).live), hit.external_id)
        events.record(session, "hit_expired", "provider", turn_id=hit.turn_id, hit_id=hit.id,
                      external_id=hit.external_id)

    def verify_submission(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        """Check with MTurk that this assignment of this HIT is this worker's, as far as MTurk tells.

        A submitted assignment MTurk shows in full. One still in progress it does not show at all (GetAssignment
        knows only submitted, approved and rejected ones), so then the HIT must at least be held by a worker
        right now; a forged id for a HIT nobody holds is refused.
        """
        client = self.client(lifecycle.batch_of_hit(session, hit).live)
        with translated():
            found = api.get_assignment(client, assignment_id)
            if found is not None:
                if found.get("HITId") != hit.external_id or found.get("WorkerId") != worker_id:
                    raise Forbidden("MTurk says this assignment belongs to another HIT or worker")
                return
            pending = api.get_hit(client, hit.external_id).get("NumberOfAssignmentsPending", 0)
        if pending < 1:
            raise Forbidden("MTurk has no assignment in progress for this HIT; accept the HIT first")

    # -- the reconciler --

    def hits_to_check(self, session: Session, limit: int = 500) -> list[int]:
        return reconcile.open_hits(session, limit)

    def check_hit(self, session: Session, hit: Hit, now: datetime) -> HitCheck:
        client = self.client(lifecycle.batch_of_hit(session, hit).live)
        with translated():
            remote_hit = api.get_hit(client, hit.external_id)
            remote_assignments = api.list_assignments_for_hit(client, hit.external_id)
        return reconcile.check_hit(session, hit, remote_hit, remote_assignments, now)

    def approvals_due(self, session: Session, settings: Settings, now: datetime, limit: int = 500) -> list[int]:
        """turkflow approves TURKFLOW_MTURK_APPROVE_AFTER_SECONDS after submission; MTurk's own
        auto-approval is only the backstop."""
        return reconcile.due_for_approval(session, now, settings.mturk_approve_after_seconds, limit)

    # -- assignments and money --

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Approve on MTurk; if MTurk already decided (auto-approval, or the requester's own action), settle
        our record with that instead of failing on stale state."""
        if assignment.status in (AssignmentStatus.approved, AssignmentStatus.rejected):
            return
        client = self.client(_batch_of_assignment(session, assignment).live)
        with translated():
            try:
                api.approve_assignment(client, assignment.external_id)
                status = AssignmentStatus.approved
            except ClientError as exc:
                if not api.is_refusal(exc):
                    raise
                found = api.get_assignment(client, assignment.external_id)
                if found is None:
                    raise NotPayableYet(f"assignment {assignment.external_id} is not submitted on MTurk yet") from None
                status = MTURK_STATUS.get(found["AssignmentStatus"])
                if status in (None, AssignmentStatus.submitted):
                    raise
        lifecycle.settle_assignment(session, assignment, status)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> list[int]:
        """SendBonus with the bonus' own token; raises NotPayableYet while MTurk does not have the assignment
        as submitted (a bonus decided while the worker's submission is in flight), so the task retries."""
        with translated():
            api.send_bonus(self.client(_batch_of_assignment(session, assignment).live), worker.external_id,
                           bonus.amount_cents, assignment.external_id,
                           reason="Thank you: the next worker rated your turn highly relevant and useful.",
                           token=self.request_token(bonus.request_token))
        return [bonus.id]

    def balance_cents(self, live: bool) -> Optional[int]:
        with translated():
            return api.get_account_balance(self.client(live))

    # -- workers --

    def check_onboarding_gate(self, session: Session, live: bool) -> None:
        """Turn HITs require the role's qualification, whose test is the onboarding quiz: those types must exist."""
        qualification_ids(session, live)

    def soft_block(self, session: Session, worker: Worker, reason: str) -> None:
        """Our "paused" qualification, which hides every turn HIT from the worker."""
        self._pause(session, worker, reason, permanent=False)

    def block_permanently(self, session: Session, worker: Worker, reason: str) -> None:
        """The "paused" qualification and an MTurk worker block (it hurts the worker's standing on MTurk, so
        only after review)."""
        self._pause(session, worker, reason, permanent=True)

    def _pause(self, session: Session, worker: Worker, reason: str, permanent: bool) -> None:
        for live in _marketplaces(session, worker, self.settings):
            client = self.client(live)
            with translated():
                api.associate_qualification_with_worker(client, qualification_ids(session, live)["blocked"],
                                                        worker.external_id, 1)
                if permanent:
                    api.create_worker_block(client, worker.external_id, reason)

    def unblock(self, session: Session, worker: Worker) -> None:
        """Reverse both kinds of block; MTurk refusing because one of them is not there is fine."""
        for live in _marketplaces(session, worker, self.settings):
            client = self.client(live)
            for undo in (
                lambda: api.disassociate_qualification_from_worker(
                    client, qualification_ids(session, live)["blocked"], worker.external_id, "unblocked after review"),
                lambda: api.delete_worker_block(client, worker.external_id, "unblocked after review"),
            ):
                with translated():
                    try:
                        undo()
                    except ClientError as exc:
                        if not api.is_refusal(exc):
                            raise
                        log.info("unblock %s: %s", worker.external_id, api.error_of(exc)[1])

    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        ids = [w.external_id for w in workers]
        if ids:
            with translated():
                api.notify_workers(self.client(self.settings.mturk_live), subject, message, ids)

    # -- the requester's qualification types --

    def ensure_qualification_types(self, session: Session, live: bool, study: str,
                                   protocol: str = "wizard_of_tasks") -> list[MTurkQualification]:
        """Create the qualification types this marketplace lacks for the protocol's batches (adopting ours
        by name if MTurk has them and our database does not, e.g. after a database reset); returns all of
        them. STAR's are one per role and stage (``turkflow.hits.mturk.qualifications``)."""
        client = self.client(live)
        have = {q.purpose: q for q in session.exec(select(MTurkQualification).where(MTurkQualification.live == live))}
        names = qualification_names(study)
        for purpose in purposes_for(protocol):
            if purpose in have:
                continue
            name, description = names[purpose]
            with translated():
                existing = next((q for q in api.list_qualification_types(client, name) if q.get("Name") == name),
                                None)
                if existing is not None:
                    type_id = existing["QualificationTypeId"]
                elif purpose != "blocked":
                    quiz = quiz_of(purpose)
                    type_id = api.create_qualification_type(
                        client, name, description, test=question_form_xml(quiz), answer_key=answer_key_xml(quiz),
                        test_seconds=self.settings.onboarding_test_seconds)
                else:
                    type_id = api.create_qualification_type(client, name, description)
            have[purpose] = MTurkQualification(purpose=purpose, live=live, type_id=type_id, name=name)
            session.add(have[purpose])
            session.flush()
            events.record(session, "mturk_qualification_created", "requester", purpose=purpose, live=live,
                          type_id=type_id, adopted=existing is not None)
        return [have[p] for p in purposes_for(protocol)]


def _batch_of_assignment(session: Session, assignment: Assignment) -> Batch:
    return lifecycle.batch_of_hit(session, session.get(Hit, assignment.hit_id))


def _marketplaces(session: Session, worker: Worker, settings: Settings) -> list[bool]:
    """Where a worker has worked for us (sandbox, live); a worker with no MTurk turns yet: the default one."""
    found = sorted(set(session.exec(
        select(Batch.live).join(Conversation, Conversation.batch_id == Batch.id)
        .join(Turn, Turn.conversation_id == Conversation.id).join(Hit, Hit.turn_id == Turn.id)
        .join(Assignment, Assignment.hit_id == Hit.id)
        .where(Assignment.worker_id == worker.id, Batch.provider == "mturk")
    )))
    return found or [settings.mturk_live]
