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
from typing import Any, Optional

from itsdangerous import BadSignature, URLSafeSerializer
from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.db import savepoint
from turkflow.errors import Forbidden
from turkflow.hits import keep as keeping, lifecycle, onboarding
from turkflow.protocols.star import stages
from turkflow.hits.prolific import places
from turkflow.hits.prolific.provider import PROVIDER, worker_external_id
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Conversation,
    Hit,
    HitStatus,
    ProlificOnboarding,
    ProlificPlace,
    ProlificStudy,
    StageAttempt,
    Turn,
    Worker,
    WorkerStatus,
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


def place_token(secret_key: str, place: ProlificPlace, participant_id: str) -> str:
    """Carried by a session's waiting screen (its "done" form and its ``pagehide`` beacon), as ``page_token``
    is by a turn's form."""
    return _signer(secret_key).dumps(["place", place.id, participant_id, place.submission_id])


def check_place_token(secret_key: str, token: str, place: ProlificPlace, participant_id: str) -> None:
    try:
        signed = _signer(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this form was not issued by turkflow; open the study again from Prolific") from None
    if signed != ["place", place.id, participant_id, place.submission_id]:
        raise Forbidden("this form was issued for another participant or submission")


def place_of_link(session: Session, study: ProlificStudy, submission_id: str,
                  participant_id: str) -> Optional[ProlificPlace]:
    """The session place of this submission, if one was opened; another participant's, or one of another
    study, is refused."""
    place = places.of_submission(session, submission_id)
    if place is None:
        return None
    if place.batch_id != study.batch_id or place.role != study.role or place.study_id != study.study_id:
        raise Forbidden("this submission belongs to another study")
    if session.get(Worker, place.worker_id).external_id != worker_external_id(participant_id):
        raise Forbidden("this submission belongs to another participant")
    return place


# ---- holding a turn -------------------------------------------------------------------------------------


def assignment_of(session: Session, study: ProlificStudy, submission_id: str,
                  participant_id: str) -> Optional[Assignment]:
    """The turn this submission already holds, if any (in a session place: its latest turn); another
    participant's, or one of another study (whose completion code this link would give away), is refused."""
    place = place_of_link(session, study, submission_id, participant_id)
    assignment = places.latest(session, place) if place is not None else session.exec(
        select(Assignment).where(Assignment.external_id == submission_id)).first()
    if assignment is None:
        return None
    worker = session.get(Worker, assignment.worker_id)
    if worker.external_id != worker_external_id(participant_id):
        raise Forbidden("this submission belongs to another participant")
    if session.get(Hit, assignment.hit_id).external_id != study.study_id:
        raise Forbidden("this submission belongs to another study")
    return assignment


def participant(session: Session, participant_id: str, role: str, vouched: bool) -> Worker:
    """The participant as our worker, who must have passed the role's onboarding study (then they are a
    worker already, onboarded) unless the role's hand-made allow-list group vouches for them (``vouched``:
    Prolific lets only its members in, so they join onboarded). A participant holds one role for the
    whole collection."""
    external_id = worker_external_id(participant_id)
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is None and not vouched:
        raise Forbidden(not_onboarded(role))
    if worker is None:
        worker = Worker(external_id=external_id, role=role, onboarded=True)
        try:
            with savepoint(session):
                session.add(worker)
                session.flush()
        except IntegrityError:  # the same link opened twice at once
            return session.exec(select(Worker).where(Worker.external_id == external_id)).one()
        events.record(session, "worker_joined", "provider", worker_id=worker.id, role=role, provider=PROVIDER)
    if worker.role == role and worker.status == WorkerStatus.active and not worker.onboarded:
        raise Forbidden(not_onboarded(role))
    lifecycle.check_can_work(worker, role)
    return worker


def not_onboarded(role: str) -> str:
    return (f"you have not passed the {role} onboarding quiz: only participants who passed it may write "
            f"{role} turns. Please return this submission on Prolific")


# ---- the onboarding study -------------------------------------------------------------------------------


def onboarding_study_of_link(session: Session, role: str, study_id: str,
                             stage: int = stages.SINGLE_TASK) -> ProlificOnboarding:
    """The role's (STAR: the role stage's) onboarding study that Prolific says the participant came from: the
    current one, or one it replaced (its participants may still finish)."""
    row = session.exec(select(ProlificOnboarding).where(ProlificOnboarding.role == role,
                                                        ProlificOnboarding.stage == stage,
                                                        ProlificOnboarding.study_id == study_id)).first()
    if row is None:
        raise Forbidden("this link does not belong to that Prolific onboarding study")
    return row


def onboarding_outcome(session: Session, participant_id: str, role: str) -> Optional[bool]:
    """Whether the participant passed the role's quiz already (None: not graded yet). The quiz is graded
    once: Prolific lets a participant take the onboarding study once, and a second try within the same
    submission gets the first answer's code again. A participant of another role is refused."""
    external_id = worker_external_id(participant_id)
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is None:
        return None
    if worker.role != role:
        raise Forbidden(f"this quiz is for {role}s; you are registered as a {worker.role}")
    return worker.onboarded


def grade_onboarding(session: Session, participant_id: str, role: str, answers: dict[str, str],
                     pass_percent: int) -> tuple[bool, Optional[int]]:
    """Grade the participant's quiz and record them as our worker of that role, onboarded if they passed
    (a failed one stays a worker who is not onboarded, so the turn page refuses them). Returns whether they
    passed, and the worker's id if this call is the one that passed them (their gold answers count once)."""
    known = onboarding_outcome(session, participant_id, role)
    if known is not None:
        return known, None
    result = onboarding.grade(onboarding.quiz_for(role), answers, pass_percent)
    worker = Worker(external_id=worker_external_id(participant_id), role=role, onboarded=result.passed)
    try:
        with savepoint(session):
            session.add(worker)
            session.flush()
    except IntegrityError:  # the same form sent twice at once: the first grade stands
        return bool(onboarding_outcome(session, participant_id, role)), None
    events.record(session, "worker_joined", "provider", worker_id=worker.id, role=role, provider=PROVIDER)
    events.record(session, "onboarding_graded", f"worker:{worker.id}", worker_id=worker.id, role=role,
                  score=result.score, passed=result.passed, wrong=result.wrong, provider=PROVIDER)
    return result.passed, worker.id if result.passed else None


def _onboarding_signer(secret_key: str) -> URLSafeSerializer:
    return URLSafeSerializer(secret_key, salt="turkflow-prolific-onboarding")


def onboarding_token(secret_key: str, participant_id: str, submission_id: str, role: str,
                     stage: Optional[int] = None) -> str:
    """Carried in the quiz form, as ``page_token`` is in a turn's: the POST comes from the quiz we served
    this participant for this submission (and, for STAR, this stage)."""
    return _onboarding_signer(secret_key).dumps(_quiz_key(participant_id, submission_id, role, stage))


def check_onboarding_token(secret_key: str, token: str, participant_id: str, submission_id: str,
                           role: str, stage: Optional[int] = None) -> None:
    try:
        signed = _onboarding_signer(secret_key).loads(token or "")
    except BadSignature:
        raise Forbidden("this form was not issued by turkflow; open the study again from Prolific") from None
    if signed != _quiz_key(participant_id, submission_id, role, stage):
        raise Forbidden("this form was issued for another participant or submission")


def _quiz_key(participant_id: str, submission_id: str, role: str, stage: Optional[int]) -> list[Any]:
    return [participant_id, submission_id, role] + ([stage] if stage is not None else [])


# ---- STAR's stages on Prolific --------------------------------------------------------------------------
# A stage's onboarding study links to its tutorial and quiz; the participant starts an attempt, may take
# hints (recorded on the server, ``turkflow.protocols.star.stages``) and is graded once: the study admits them once,
# so one attempt. Passing records the stage on our worker (stage 2 is what lets ``take_next_turn`` give
# them multi-task turns) and sends them back with the code that adds them to the stage's group.

PROLIFIC_ATTEMPTS = 1


def stage_participant(session: Session, participant_id: str, stage: stages.Stage, vouched: bool) -> Worker:
    """The participant as our worker of the stage's role: made (not onboarded) when they open stage 1's
    quiz; stage 2's is for one who passed stage 1 here, or whom the role's hand-made group vouches for (who
    then joins onboarded). Another role's participant, or a blocked one, is refused."""
    external_id = worker_external_id(participant_id)
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is None:
        if stage.number != stages.SINGLE_TASK and not vouched:
            raise Forbidden(f"stage {stage.number} is for participants who passed the {stage.role} stage "
                            f"{stage.number - 1} quiz")
        worker = Worker(external_id=external_id, role=stage.role, onboarded=vouched)
        try:
            with savepoint(session):
                session.add(worker)
                session.flush()
        except IntegrityError:  # the same link opened twice at once
            worker = session.exec(select(Worker).where(Worker.external_id == external_id)).one()
        else:
            events.record(session, "worker_joined", "provider", worker_id=worker.id, role=stage.role,
                          provider=PROVIDER)
    stages.check_offered(worker, stage)
    return worker


def known_participant(session: Session, participant_id: str, stage: stages.Stage) -> Worker:
    """The worker a quiz form was served to (``stage_participant`` made them)."""
    external_id = worker_external_id(participant_id)
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is None:
        raise Forbidden("open the quiz from its Prolific study first")
    stages.check_offered(worker, stage)
    return worker


def stage_outcome(session: Session, participant_id: str, stage: stages.Stage) -> Optional[bool]:
    """Whether the participant passed the stage (None: not graded yet). Graded once: a second try within
    the same submission gets the first grade's code again."""
    external_id = worker_external_id(participant_id)
    worker = session.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if worker is None or worker.role != stage.role:
        return None
    if stages.passed_stage(worker) >= stage.number:
        return True
    return False if stages.graded_attempts(session, worker, stage) >= PROLIFIC_ATTEMPTS else None


def start_stage(session: Session, worker: Worker, stage: stages.Stage) -> StageAttempt:
    return stages.start_attempt(session, worker, stage, provider=PROVIDER, max_attempts=PROLIFIC_ATTEMPTS)


def take_next_turn(session: Session, worker: Worker, batch_id: int, role: str, submission_id: str,
                   lease_seconds: int, now: Optional[datetime] = None,
                   place: Optional[ProlificPlace] = None) -> Optional[Assignment]:
    """Give the submission the oldest waiting turn of the batch role, a turn kept for the participant first
    (``turkflow.hits.keep``: of a conversation whose role's last turn they wrote) and none kept for another who
    may still take it; None when no turn waits. A STAR turn only of a conversation whose qualification stage
    the participant passed (``turkflow.protocols.star.stages``).

    A turn is claimed by its lease (a conditional update), as on the local queue, so two participants
    arriving at once never get the same turn; the same submission arriving twice gets one turn. In a session
    ``place`` the turn is the place's next (``places.next_external_id``).
    """
    now = now or utcnow()
    free = or_(col(Hit.lease_expires_at).is_(None), col(Hit.lease_expires_at) < now)
    waiting = session.exec(stages.unlocked(
        select(Hit.id).join(Turn, Turn.id == Hit.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .join(Batch, Batch.id == Conversation.batch_id)
        .where(Conversation.batch_id == batch_id, Batch.status == BatchStatus.active,
               Hit.provider == PROVIDER, Hit.role == role, Hit.status == HitStatus.open, free, keeping.open_to(Hit)),
        worker).order_by(keeping.kept_first(Hit), Hit.id).limit(20), params={"worker": worker.id, "now": now}
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
                external_id = submission_id if place is None else places.next_external_id(session, place)
                assignment = Assignment(hit_id=hit_id, worker_id=worker.id, external_id=external_id,
                                        accepted_at=now, place_id=place.id if place is not None else None)
                session.add(assignment)
                session.flush()
        except IntegrityError:  # this submission took a turn in a concurrent request
            if place is not None:
                return places.held(session, place)
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
