"""Session places on Prolific: one submission in which a participant writes turn after turn, paid once.

A batch whose study terms give ``session_minutes`` publishes places that last a session instead of one turn
(``StudyTerms.sessions``). The participant opens the study link once; our page opens their place
(``ProlificPlace``, keyed by Prolific's submission id) and, while it is open, gives them a turn kept for them
first, else another conversation's turn, else a waiting screen that asks again; each turn is an
``Assignment`` of the place (``place_id``), numbered within it. The place ends, and its page gives the
completion code, when its time is up, when the participant says they are done, or when the batch has no work
left for the role; a returned or timed-out submission ends it too (``leave``). Either way a turn held at the
end goes back to the pool and the participant's kept conversations go to anyone at once (they are no longer
present).

Money, each path once (``turkflow.states`` holds the moves): a finished place is approved on Prolific, which pays
the study's reward (the batch's ``--reward``: the session's pay, at least Prolific's hourly minimum on its
minutes), whether or not a turn was offered in it: the participant gave their time. A place returned or timed
out after turns were written, or after our page ended it (time up, no work left) and the participant never
followed its code back, is owed: approved late where Prolific allows (a timed-out one), else its reward goes
as a bonus on the submission (``compensate``, one per place). One left with no turn written before our page
ended it owes nothing (the participant gave it up on Prolific). Quality bonuses are paid per turn as on one-turn places, on the
place's submission (``SUBMISSION``).

Plain functions over the session: no Flask, Celery or HTTP here.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Optional

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.db import savepoint
from turkflow.hits import keep as keeping, lifecycle, money
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusKind,
    Conversation,
    ConversationStatus,
    Hit,
    HitStatus,
    PlaceStatus,
    ProlificPlace,
    Turn,
    Worker,
    utcnow,
)

# The Prolific submission a turn's assignment belongs to: its place's, or its own (a one-turn place); for
# queries that outer-join ``ProlificPlace`` on ``Assignment.place_id``.
SUBMISSION = func.coalesce(ProlificPlace.submission_id, Assignment.external_id)
# Turns of a place that count as written (stored, whatever their verdict since).
WRITTEN = (AssignmentStatus.submitted, AssignmentStatus.approved, AssignmentStatus.rejected,
           AssignmentStatus.unpaid, AssignmentStatus.compensated)
# How often the waiting screen asks for a turn, in seconds (well within TURKFLOW_PRESENCE_SECONDS).
ASK_EVERY = 5


def described(minutes: int, reward_cents: int, currency: str) -> str:
    """What a Prolific batch's places are and pay, in a line (``batch launch``, ``batch status``, the batch
    page); ``minutes`` 0: one turn a place."""
    if not minutes:
        return f"one turn a place, paid {money.shown(reward_cents, currency)}"
    return (f"a session of {minutes} minutes, turn after turn in one submission, paid "
            f"{money.shown(reward_cents, currency)} once (whether or not a turn was offered), plus each turn's "
            "quality bonus")


def of_submission(session: Session, submission_id: str) -> Optional[ProlificPlace]:
    return session.exec(select(ProlificPlace).where(ProlificPlace.submission_id == submission_id)).first()


def submission_of(session: Session, assignment: Assignment) -> str:
    """The Prolific submission that pays for ``assignment``'s turn."""
    if assignment.place_id is None:
        return assignment.external_id
    return session.get(ProlificPlace, assignment.place_id).submission_id


def sharing_submission(session: Session, assignment: Assignment) -> list[int]:
    """The assignments paid through ``assignment``'s submission: its place's turns, or itself alone."""
    if assignment.place_id is None:
        return [assignment.id]
    return list(session.exec(select(Assignment.id).where(Assignment.place_id == assignment.place_id)))


def open_place(session: Session, worker: Worker, batch_id: int, role: str, study_id: str, submission_id: str,
               minutes: int, now: datetime) -> ProlificPlace:
    """The participant's place for this submission, opened now for ``minutes`` (the same link opened twice at
    once opens one)."""
    place = ProlificPlace(batch_id=batch_id, role=role, worker_id=worker.id, study_id=study_id,
                          submission_id=submission_id, started_at=now, ends_at=now + timedelta(minutes=minutes))
    try:
        with savepoint(session):
            session.add(place)
            session.flush()
    except IntegrityError:
        return of_submission(session, submission_id)
    events.record(session, "prolific_place_opened", f"worker:{worker.id}", batch_id=batch_id, worker_id=worker.id,
                  role=role, place_id=place.id, submission_id=submission_id, minutes=minutes)
    return place


def held(session: Session, place: ProlificPlace) -> Optional[Assignment]:
    """The turn the participant is writing in their place, if any."""
    return session.exec(select(Assignment).where(Assignment.place_id == place.id,
                                                 Assignment.status == AssignmentStatus.accepted)).first()


def latest(session: Session, place: ProlificPlace) -> Optional[Assignment]:
    """The place's last turn (the one its page shows, written or not)."""
    return session.exec(select(Assignment).where(Assignment.place_id == place.id)
                        .order_by(col(Assignment.id).desc())).first()


def written(session: Session, place: ProlificPlace) -> int:
    """How many turns were written in the place."""
    return session.exec(select(func.count()).select_from(Assignment).where(
        Assignment.place_id == place.id, col(Assignment.status).in_(WRITTEN))).one()


def next_external_id(session: Session, place: ProlificPlace) -> str:
    """The id of the place's next turn's assignment: its submission's, numbered (unique, so two requests of
    one place taking a turn at once store one)."""
    taken = session.exec(select(func.count()).select_from(Assignment).where(Assignment.place_id == place.id)).one()
    return f"{place.submission_id}#{taken + 1}"


def seconds_left(place: ProlificPlace, now: datetime) -> int:
    return max(0, int((place.ends_at - now).total_seconds()))


def last_turn_margin(session_length: timedelta, turn_minutes: int) -> timedelta:
    """How long before a session's end it starts no new turn: a turn's minutes (TURKFLOW_PROLIFIC_ESTIMATED_MINUTES),
    so the last one ends within the session's minutes, which Prolific is told and judges the pay by (a session
    shorter than two turns keeps no such margin)."""
    return timedelta(minutes=turn_minutes) if session_length >= timedelta(minutes=2 * turn_minutes) else timedelta(0)


def time_up(place: ProlificPlace, now: datetime, turn_minutes: int) -> bool:
    """Whether the place starts no new turn now (``last_turn_margin``)."""
    margin = last_turn_margin(place.ends_at - place.started_at, turn_minutes)
    return seconds_left(place, now) <= margin.total_seconds()


def work_left(session: Session, batch_id: int, role: str) -> bool:
    """Whether the batch may still have a turn for the role: it runs, and a turn of the role waits or a
    conversation goes on (its next turn of the role may open)."""
    if session.get(Batch, batch_id).status != BatchStatus.active:
        return False
    waiting = select(Hit.id).join(Turn, Turn.id == Hit.turn_id).join(
        Conversation, Conversation.id == Turn.conversation_id).where(
        Conversation.batch_id == batch_id, Hit.role == role, col(Hit.status).in_([HitStatus.pending, HitStatus.open]))
    going_on = select(Conversation.id).where(Conversation.batch_id == batch_id,
                                             Conversation.status == ConversationStatus.active)
    return session.exec(waiting.limit(1)).first() is not None or session.exec(going_on.limit(1)).first() is not None


def _give_back(session: Session, place: ProlificPlace, reason: str, now: datetime) -> None:
    """A place ended: a turn held in it goes back to the pool, and the participant's kept conversations go to
    anyone (they are no longer present)."""
    turn_held = held(session, place)
    if turn_held is not None and lifecycle.abandon_assignment(session, turn_held, reason):
        hit = session.get(Hit, turn_held.hit_id)
        if hit.status == HitStatus.open:
            hit.lease_expires_at = None
            session.add(hit)
    keeping.left(session, place.worker_id, now)


def finish(session: Session, place: ProlificPlace, reason: str, now: datetime) -> bool:
    """End an open place on our page (``reason``: time up, done, no work left): its page gives the completion
    code from now on. False if it had ended already (a double click, a second tab)."""
    if place.status != PlaceStatus.open:
        return False
    states.move(place, PlaceStatus.finished)
    place.ended_at, place.end_reason = now, reason
    session.add(place)
    _give_back(session, place, f"the session ended ({reason})", now)
    events.record(session, "prolific_place_finished", f"worker:{place.worker_id}", batch_id=place.batch_id,
                  worker_id=place.worker_id, place_id=place.id, reason=reason, turns=written(session, place))
    return True


def leave(session: Session, place: ProlificPlace, status: str, now: datetime) -> bool:
    """The place's submission was returned or timed out on Prolific (``status``): the place ends at once; its
    written turns stay and are paid (``owed``). False if this was known already (a repeated webhook, the
    poller after the webhook)."""
    if place.status not in (PlaceStatus.open, PlaceStatus.finished):
        return False
    states.move(place, PlaceStatus.left)
    place.ended_at, place.end_reason = place.ended_at or now, place.end_reason or status
    session.add(place)
    _give_back(session, place, f"{status} on Prolific", now)
    events.record(session, "prolific_place_left", "provider", batch_id=place.batch_id, worker_id=place.worker_id,
                  place_id=place.id, status=status, turns=written(session, place))
    return True


# Ends of a place on our page that the participant did not choose: they gave the session its time.
SERVED_OUT = ("time up", "no work left")


def owed(session: Session, place: ProlificPlace) -> bool:
    """A place that ended unpaid on Prolific that turkflow pays: turns were written in it, or our page ended it
    (``SERVED_OUT``) and the participant never followed its code back (closed the tab: Prolific timed it out)."""
    return place.status == PlaceStatus.left and (place.end_reason in SERVED_OUT or written(session, place) > 0)


def approved(session: Session, place: ProlificPlace) -> bool:
    """Prolific approved the place's submission (its reward paid): the place and its written turns say so.
    False if known already."""
    if place.status in (PlaceStatus.approved, PlaceStatus.compensated):
        return False
    states.move(place, PlaceStatus.approved)
    place.reviewed_at = utcnow()
    session.add(place)
    for turn_assignment in session.exec(select(Assignment).where(Assignment.place_id == place.id,
                                                                 Assignment.status == AssignmentStatus.submitted)):
        lifecycle.settle_assignment(session, turn_assignment, AssignmentStatus.approved)
    events.record(session, "prolific_place_approved", "provider", batch_id=place.batch_id,
                  worker_id=place.worker_id, place_id=place.id)
    return True


def reward_as_bonus(session: Session, assignment: Assignment, turn: Turn, token: str, why: str,
                    **about: Any) -> Optional[int]:
    """The batch's reward recorded as a bonus on ``assignment``'s submission (Prolific would not approve it),
    once per ``token``: a turn's (one-turn places) or a place's; returns the bonus id, None if recorded
    before (a repeated round)."""
    batch = session.get(Batch, session.get(Conversation, turn.conversation_id).batch_id)
    bonus = Bonus(turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id,
                  kind=BonusKind.reward, amount_cents=batch.reward_cents, request_token=token)
    try:
        with savepoint(session):
            session.add(bonus)
            session.flush()
    except IntegrityError:
        return None
    events.record(session, "prolific_reward_as_bonus", "provider", batch_id=batch.id,
                  conversation_id=turn.conversation_id, turn_id=turn.id, worker_id=assignment.worker_id,
                  assignment_id=assignment.id, bonus_id=bonus.id, amount_cents=bonus.amount_cents, why=why, **about)
    return bonus.id


def compensate(session: Session, place: ProlificPlace, why: str) -> Optional[int]:
    """Pay the place's reward as a bonus on its submission (``reward_as_bonus``, one per place, hung on its
    first written turn) and mark it and its turns compensated; returns the bonus id (None if recorded before)."""
    first = session.exec(select(Assignment).where(Assignment.place_id == place.id, col(Assignment.status).in_(WRITTEN))
                         .order_by(Assignment.id)).first()
    bonus_id = reward_as_bonus(session, first, lifecycle.turn_for_assignment(session, first),
                               f"turkflow-reward-place-{place.id}", why, place_id=place.id)
    states.move(place, PlaceStatus.compensated)
    place.reviewed_at = utcnow()
    session.add(place)
    for turn_assignment in session.exec(select(Assignment).where(Assignment.place_id == place.id,
                                                                 Assignment.status == AssignmentStatus.submitted)):
        for status in (AssignmentStatus.unpaid, AssignmentStatus.compensated):  # paid by the place's bonus
            states.move(turn_assignment, status)
        session.add(turn_assignment)
    return bonus_id
