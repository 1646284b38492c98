"""Keeping our records and MTurk's in step: accepting an assignment from MTurk's ids, reopening a turn whose
HIT ended unanswered, settling approvals, and the reconciler that repairs what a lost request left behind.

The functions over a session are plain domain steps (callers commit). ``reconcile`` runs them against what
MTurk reports, one HIT per transaction, through the provider's read calls: GetHIT first, then
ListAssignmentsForHIT, so a worker who submits between the two calls is seen as a submission, never as an
expired HIT. MTurk notifications are at-least-once and can be missed, so polling is the source of truth.
"""

from __future__ import annotations

import json
import logging
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Optional

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import Conflict, Forbidden, NotFound, TurkflowError
from turkflow.hits import lifecycle
from turkflow.hits.provider import Providers
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Conversation,
    Hit,
    HitStatus,
    Turn,
    TurnStatus,
    Worker,
    utcnow,
)

log = logging.getLogger("turkflow.mturk")

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"
ANSWERS_FIELD = "turkflow_answers"  # the externalSubmit field that keeps a copy of the answers at MTurk
_MTURK_ID = re.compile(r"^[A-Z0-9]{1,255}$")


# ---- the turn page's link to its HIT ------------------------------------------------------------------


def _hit_signer(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-mturk-hit")


def hit_token(secret_key: str, hit_id: int) -> str:
    """The opaque token in a HIT's ExternalURL; it names our HIT row before MTurk's id is stored."""
    return _hit_signer(secret_key).dumps(hit_id)


def hit_for_page(session: Session, secret_key: str, token: str, mturk_hit_id: Optional[str]) -> Hit:
    """The HIT a turn page link belongs to; a forged token or a hitId that is not this HIT's is refused."""
    try:
        hit_id = _hit_signer(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this turn link is not valid") from None
    hit = session.get(Hit, hit_id)
    if hit is None or hit.provider != "mturk":
        raise NotFound("this turn does not exist")
    if hit.external_id is None:
        raise Conflict("this turn is still being published; reload the page in a minute")
    if mturk_hit_id is not None and mturk_hit_id != hit.external_id:
        raise Forbidden("this page does not belong to that HIT")
    return hit


def _signer_for_assignment(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-mturk-assignment")


def assignment_token(secret_key: str, hit_id: int, assignment_id: str, worker_id: str) -> str:
    """Carried in the turn form: proves the POST comes from a page we served for exactly these ids.

    Cookies are unreliable inside MTurk's cross-site iframe, so this hidden field is the form's CSRF token.
    """
    return _signer_for_assignment(secret_key).dumps([hit_id, assignment_id, worker_id])


def check_assignment_token(secret_key: str, token: str, hit_id: int, assignment_id: str, worker_id: str) -> None:
    try:
        signed = _signer_for_assignment(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this form was not issued for this assignment; reload the HIT") from None
    if signed != [hit_id, assignment_id, worker_id]:
        raise Forbidden("this form was issued for another assignment or worker")


# ---- assignments ----------------------------------------------------------------------------------------


def check_mturk_ids(assignment_id: Optional[str], worker_id: Optional[str]) -> None:
    for name, value in (("assignmentId", assignment_id), ("workerId", worker_id)):
        if not value or not _MTURK_ID.match(value):
            raise Forbidden(f"{name} is not an MTurk id")


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
        abandon_assignment(session, stale, "replaced by a new MTurk assignment")
    assignment = Assignment(hit_id=hit.id, worker_id=worker.id, external_id=assignment_id, accepted_at=now)
    try:
        with session.begin_nested():
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
        with session.begin_nested():
            session.add(worker)
            session.flush()
    except IntegrityError:
        return session.exec(select(Worker).where(Worker.external_id == external_id)).one()
    events.record(session, "worker_joined", "provider", worker_id=worker.id, role=role, provider="mturk")
    return worker


def abandon_assignment(session: Session, assignment: Assignment, reason: str) -> bool:
    """An accepted assignment the worker returned or abandoned on MTurk; the HIT is available again."""
    if assignment.status != AssignmentStatus.accepted:
        return False
    assignment.status = AssignmentStatus.abandoned
    session.add(assignment)
    turn = lifecycle.turn_for_assignment(session, assignment)
    events.record(session, "assignment_abandoned", "provider", conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id, reason=reason)
    return True


def settle_assignment(session: Session, assignment: Assignment, status: AssignmentStatus) -> bool:
    """Take MTurk's verdict on a submitted assignment (approved or rejected there, by us or by MTurk's
    auto-approval); returns whether our record changed."""
    if assignment.status == status:
        return False
    before = assignment.status
    assignment.status = status
    assignment.reviewed_at = utcnow()
    session.add(assignment)
    turn = lifecycle.turn_for_assignment(session, assignment)
    events.record(session, f"assignment_{status}", "provider", conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id, was=before)
    return True


MTURK_STATUS = {"Submitted": AssignmentStatus.submitted, "Approved": AssignmentStatus.approved,
                "Rejected": AssignmentStatus.rejected}


# ---- HITs that ended unanswered -----------------------------------------------------------------------


def reopen_turn(session: Session, hit: Hit, reason: str) -> Optional[Hit]:
    """The HIT ended on MTurk without a submission: mark it expired and open a new attempt for the same
    turn (still to publish). Returns None when the turn no longer needs one (written or cancelled)."""
    if hit.status not in (HitStatus.pending, HitStatus.open):
        return None
    hit.status = HitStatus.expired
    session.add(hit)
    for stale in session.exec(select(Assignment).where(Assignment.hit_id == hit.id,
                                                       Assignment.status == AssignmentStatus.accepted)):
        abandon_assignment(session, stale, reason)
    session.flush()
    turn = session.get(Turn, hit.turn_id)
    if turn.status != TurnStatus.open:
        return None
    attempt = Hit(turn_id=turn.id, attempt=hit.attempt + 1, provider=hit.provider, role=hit.role)
    session.add(attempt)
    session.flush()
    conversation = session.get(Conversation, turn.conversation_id)
    events.record(session, "turn_reopened", "provider", batch_id=conversation.batch_id,
                  conversation_id=conversation.id, turn_id=turn.id, expired_hit_id=hit.id, hit_id=attempt.id,
                  attempt=attempt.attempt, reason=reason)
    return attempt


# ---- a submission MTurk has and we do not -------------------------------------------------------------


def form_answers(answers: dict[str, Any]) -> dict[str, Any]:
    """Stored answers back in the form's own terms (yes/no rather than booleans), as the turn page posts
    them: the copy kept at MTurk must pass the protocol's validation again if it is ever needed."""
    return {name: ("yes" if value is True else "no" if value is False else value) for name, value in answers.items()}


def parse_answers(answer_xml: str) -> dict[str, Any]:
    """The answers our turn page copied into its externalSubmit form, from MTurk's QuestionFormAnswers."""
    try:
        root = ElementTree.fromstring(answer_xml or "")
    except ElementTree.ParseError as exc:
        raise ValueError(f"MTurk's answer is not XML: {exc}") from None
    for answer in root.iter():
        if _local(answer.tag) != "Answer":
            continue
        fields = {_local(child.tag): (child.text or "") for child in answer}
        if fields.get("QuestionIdentifier") == ANSWERS_FIELD:
            try:
                answers = json.loads(fields.get("FreeText", ""))
            except json.JSONDecodeError:
                raise ValueError(f"MTurk's copy of the answers ({ANSWERS_FIELD}) is not JSON") from None
            if not isinstance(answers, dict):
                raise ValueError(f"MTurk's copy of the answers ({ANSWERS_FIELD}) is not an object")
            return answers
    raise ValueError(f"MTurk's answer has no {ANSWERS_FIELD} field")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def store_missed_submission(session: Session, hit: Hit, remote: dict[str, Any]) -> lifecycle.Submission:
    """Store a turn MTurk recorded as submitted but we never did (the worker's POST to us was lost)."""
    assignment = accept_assignment(session, hit, remote["AssignmentId"], remote["WorkerId"],
                                   now=remote.get("AcceptTime"))
    worker = session.get(Worker, assignment.worker_id)
    submission = lifecycle.submit_turn(session, assignment.external_id, worker, parse_answers(remote.get("Answer")),
                                       now=remote.get("SubmitTime"))
    status = MTURK_STATUS.get(remote.get("AssignmentStatus"), AssignmentStatus.submitted)
    if status != AssignmentStatus.submitted:
        settle_assignment(session, assignment, status)
    events.record(session, "missed_submission_stored", "provider", conversation_id=submission.turn.conversation_id,
                  turn_id=submission.turn.id, worker_id=worker.id, assignment_id=assignment.id, hit_id=hit.id)
    return submission


# ---- what the reconciler looks at ---------------------------------------------------------------------


def open_mturk_hits(session: Session, limit: int = 500) -> list[int]:
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


@dataclass
class MTurkRepairs:
    submissions_stored: list[int] = field(default_factory=list)  # turn ids
    assignments_settled: list[int] = field(default_factory=list)
    assignments_abandoned: list[int] = field(default_factory=list)
    hits_reopened: list[int] = field(default_factory=list)  # ids of the new HIT attempts, published
    unreadable: list[int] = field(default_factory=list)  # HITs whose MTurk submission could not be stored
    failed: list[int] = field(default_factory=list)  # HITs MTurk could not be asked about this round
    approvals_due: list[int] = field(default_factory=list)  # assignment ids for the approve task
    bonus_ids: list[int] = field(default_factory=list)  # bonuses the stored submissions earned, to pay

    def __bool__(self) -> bool:
        return any((self.submissions_stored, self.assignments_settled, self.assignments_abandoned,
                    self.hits_reopened, self.unreadable, self.failed))


def reconcile(settings: Settings, providers: Providers, now: Optional[datetime] = None) -> MTurkRepairs:
    """Compare every open MTurk HIT with MTurk and repair the difference; list approvals that are due."""
    from turkflow import pipeline

    now = now or utcnow()
    repairs = MTurkRepairs()
    with session_scope(settings.database_url) as session:
        hit_ids = open_mturk_hits(session)
        repairs.approvals_due = due_for_approval(session, now, settings.mturk_approve_after_seconds)
    provider = providers.get("mturk")
    for hit_id in hit_ids:
        try:
            stored_turn, reopened = _reconcile_hit(settings, provider, hit_id, now, repairs)
        except Exception as exc:  # noqa: BLE001 - one HIT's trouble (a throttle) must not stop the round
            log.warning("MTurk reconciler: HIT %s skipped this round (%s)", hit_id, exc)
            repairs.failed.append(hit_id)
            continue
        if stored_turn is not None:
            repairs.submissions_stored.append(stored_turn)
            repairs.bonus_ids.extend(pipeline.after_submission(settings, providers, stored_turn).bonus_ids)
        if reopened is not None:
            pipeline.publish(settings, providers, reopened, "mturk")
            repairs.hits_reopened.append(reopened)
    return repairs


def _reconcile_hit(settings: Settings, provider: Any, hit_id: int, now: datetime,
                   repairs: MTurkRepairs) -> tuple[Optional[int], Optional[int]]:
    """One HIT in one transaction; returns (turn stored from MTurk, new HIT attempt to publish)."""
    with session_scope(settings.database_url) as session:
        hit = session.get(Hit, hit_id)
        if hit.status != HitStatus.open:
            return None, None
        remote_hit = provider.remote_hit(session, hit)
        remote_assignments = provider.remote_assignments(session, hit)
        for remote in remote_assignments:
            ours = session.exec(select(Assignment).where(Assignment.external_id == remote["AssignmentId"])).first()
            if ours is not None and ours.status != AssignmentStatus.accepted:
                status = MTURK_STATUS.get(remote["AssignmentStatus"])
                if status not in (None, AssignmentStatus.submitted) and settle_assignment(session, ours, status):
                    repairs.assignments_settled.append(ours.id)
                continue
            try:
                with session.begin_nested():
                    submission = store_missed_submission(session, hit, remote)
            except (ValueError, TurkflowError) as exc:
                log.warning("HIT %s: MTurk assignment %s is submitted but cannot be stored (%s); reopening the "
                            "turn", hit.id, remote["AssignmentId"], exc)
                events.record(session, "missed_submission_unreadable", "provider", turn_id=hit.turn_id,
                              hit_id=hit.id, mturk_assignment=remote["AssignmentId"], reason=str(exc))
                repairs.unreadable.append(hit.id)
                attempt = reopen_turn(session, hit, "submitted on MTurk but unreadable")
                return None, attempt.id if attempt else None
            return submission.turn.id, None
        if remote_assignments:
            return None, None
        if remote_hit.get("NumberOfAssignmentsPending", 0) > 0:
            return None, None  # someone is working on it, even if the HIT has expired meanwhile
        for stale in session.exec(select(Assignment).where(Assignment.hit_id == hit.id,
                                                           Assignment.status == AssignmentStatus.accepted)):
            if abandon_assignment(session, stale, "returned or abandoned on MTurk"):
                repairs.assignments_abandoned.append(stale.id)
        expiration = remote_hit.get("Expiration")
        if expiration is not None and expiration <= now:
            attempt = reopen_turn(session, hit, "expired on MTurk unanswered")
            return None, attempt.id if attempt else None
        return None, None


# ---- single steps for the Celery tasks ------------------------------------------------------------------


def approve(settings: Settings, providers: Providers, assignment_id: int) -> None:
    """Approve one submitted MTurk assignment (idempotent; settles with MTurk's verdict if it differs)."""
    with session_scope(settings.database_url) as session:
        providers.get("mturk").approve(session, session.get(Assignment, assignment_id))


def expire(settings: Settings, providers: Providers, hit_id: int) -> None:
    """End one HIT on MTurk now (its batch was cancelled, or its turn is written)."""
    with session_scope(settings.database_url) as session:
        hit = session.get(Hit, hit_id)
        providers.get(hit.provider).expire(session, hit)

