"""A participant's way from a Prolific study link to a turn, as plain steps the web view calls.

Prolific sends a participant to the study's URL with ``PROLIFIC_PID``, ``STUDY_ID`` and ``SESSION_ID`` (the
submission) added; anyone can type those into a browser, so the view asks Prolific about the submission
(``ProlificProvider.check_submission``) before anything is stored, and the page it then serves carries a
token signed for exactly that participant and submission. The submission holds the next waiting turn of
the study's role like a local lease (``Hit.lease_expires_at``, as long as Prolific gives the participant),
so a turn whose submission is returned, times out or outlives its lease goes back to the pool.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Optional

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.db import savepoint
from turkflow.errors import Forbidden
from turkflow.hits import lifecycle
from turkflow.hits.prolific.provider import PROVIDER, worker_external_id
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Conversation,
    Hit,
    HitStatus,
    ProlificStudy,
    Turn,
    Worker,
    utcnow,
)

_PROLIFIC_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_ids(participant_id: Optional[str], study_id: Optional[str], submission_id: Optional[str]) -> None:
    named = (("PROLIFIC_PID", participant_id), ("STUDY_ID", study_id), ("SESSION_ID", submission_id))
    for name, value in named:
        if not value or not _PROLIFIC_ID.match(value):
            raise Forbidden(f"{name} is not a Prolific id")


def study_of_link(session: Session, batch_id: Optional[int], role: str, study_id: str) -> ProlificStudy:
    """The batch role's study, which must be the study Prolific says the participant came from."""
    row = session.exec(select(ProlificStudy).where(ProlificStudy.batch_id == batch_id,
                                                   ProlificStudy.role == role)).first()
    if row is None or row.study_id != study_id:
        raise Forbidden("this link does not belong to that Prolific study")
    return row


# ---- the page's token -----------------------------------------------------------------------------------


def _signer(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-prolific-turn")


def page_token(secret_key: str, assignment: Assignment, participant_id: str) -> str:
    """Carried in the turn form: the POST comes from the page we served this participant for this
    submission (and is the form's CSRF token: no cookie is needed)."""
    return _signer(secret_key).dumps([assignment.id, participant_id, assignment.external_id])


def check_page_token(secret_key: str, token: str, assignment: Assignment, participant_id: str) -> None:
    try:
        signed = _signer(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this form was not issued by turkflow; open the study again from Prolific") from None
    if signed != [assignment.id, participant_id, assignment.external_id]:
        raise Forbidden("this form was issued for another participant or submission")


# ---- holding a turn -------------------------------------------------------------------------------------


def assignment_of(session: Session, study: ProlificStudy, submission_id: str,
                  participant_id: str) -> Optional[Assignment]:
    """The turn this submission already holds, if any; another participant's, or one of another study
    (whose completion code this link would give away), is refused."""
    assignment = session.exec(select(Assignment).where(Assignment.external_id == submission_id)).first()
    if assignment is None:
        return None
    worker = session.get(Worker, assignment.worker_id)
    if worker.external_id != worker_external_id(participant_id):
        raise Forbidden("this submission belongs to another participant")
    if session.get(Hit, assignment.hit_id).external_id != study.study_id:
        raise Forbidden("this submission belongs to another study")
    return assignment


def participant(session: Session, participant_id: str, role: str) -> Worker:
    """The participant as our worker, joining with the study's role: a participant holds one role for the
    whole collection. They come onboarded, because Prolific only lets the role's allow-list group in."""
    external_id = worker_external_id(participant_id)
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is None:
        worker = Worker(external_id=external_id, role=role, onboarded=True)
        try:
            with savepoint(session):
                session.add(worker)
                session.flush()
        except IntegrityError:  # the same link opened twice at once
            return session.exec(select(Worker).where(Worker.external_id == external_id)).one()
        events.record(session, "worker_joined", "provider", worker_id=worker.id, role=role, provider=PROVIDER)
    lifecycle.check_can_work(worker, role)
    return worker


def take_next_turn(session: Session, worker: Worker, batch_id: int, role: str, submission_id: str,
                   lease_seconds: int, now: Optional[datetime] = None) -> Optional[Assignment]:
    """Give the submission the oldest waiting turn of the batch role; None when no turn waits.

    A turn is claimed by its lease (a conditional update), as on the local queue, so two participants
    arriving at once never get the same turn; the same submission arriving twice gets one turn.
    """
    now = now or utcnow()
    free = or_(col(Hit.lease_expires_at).is_(None), col(Hit.lease_expires_at) < now)
    waiting = session.exec(
        select(Hit.id).join(Turn, Turn.id == Hit.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .join(Batch, Batch.id == Conversation.batch_id)
        .where(Conversation.batch_id == batch_id, Batch.status == BatchStatus.active,
               Hit.provider == PROVIDER, Hit.role == role, Hit.status == HitStatus.open, free)
        .order_by(Hit.id).limit(20)
    ).all()
    for hit_id in waiting:
        try:
            with savepoint(session):
                claimed = session.execute(
                    update(Hit).where(Hit.id == hit_id, Hit.status == HitStatus.open, free)
                    .values(lease_expires_at=now + timedelta(seconds=lease_seconds))).rowcount
                if claimed != 1:
                    continue
                hit = session.get(Hit, hit_id)
                held = select(Assignment).where(Assignment.hit_id == hit_id,
                                                Assignment.status == AssignmentStatus.accepted)
                for stale in session.exec(held):
                    lifecycle.abandon_assignment(session, stale, "lease_expired")
                assignment = Assignment(hit_id=hit_id, worker_id=worker.id, external_id=submission_id,
                                        accepted_at=now)
                session.add(assignment)
                session.flush()
        except IntegrityError:  # this submission took a turn in a concurrent request
            return session.exec(select(Assignment).where(Assignment.external_id == submission_id)).one()
        turn = session.get(Turn, hit.turn_id)
        events.record(session, "turn_taken", f"worker:{worker.id}", conversation_id=turn.conversation_id,
                      turn_id=turn.id, worker_id=worker.id, assignment_id=assignment.id, provider=PROVIDER)
        return assignment
    return None


def release(session: Session, assignment: Assignment, reason: str) -> bool:
    """Give a held turn back to the pool (its submission was returned or timed out on Prolific), as an
    expired local lease does; False if the assignment no longer held it (a repeated event)."""
    if not lifecycle.abandon_assignment(session, assignment, reason):
        return False
    hit = session.get(Hit, assignment.hit_id)
    if hit.status == HitStatus.open:
        hit.lease_expires_at = None
        session.add(hit)
    return True
