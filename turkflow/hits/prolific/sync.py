"""Keeping our records and Prolific's in step, from webhooks or by polling: both end in ``apply_status``.

Prolific's webhooks need a public HTTPS address and can be missed, so the poller (a Celery beat task) reads
the running studies' submissions and does the same; each step is idempotent, so an event seen twice, or
by both ways, changes things once. It reads only what can still change ours: the submissions of studies
where we hold a submission that is not settled (a turn in progress, a stored turn not yet approved or
paid), newest first, back to the oldest such one. A round also keeps each study's places in step with its
waiting turns, pays the stored turns whose submission ended unpaid (timed out or returned), asks
Prolific to approve the turns whose review delay has passed (only those it shows as awaiting review, so
none it will not approve holds the others up; nothing is ever rejected automatically), and lists the
claimed bonuses whose pay outcome is still unknown, for the pipeline to settle from Prolific.

A claimed bonus Prolific still shows no payment for ``prolific_bonus_unknown_after_seconds`` after its
claim is a person's to decide (``stuck_bonuses``): released for a new bulk payment (``release_bonus``) or
marked settled (``settle_bonus_by_hand``); turkflow never pays it again by itself. A release is refused
while Prolific may still pay: Prolific pays an accepted call "in the following minutes" (its description of
the pay call), so a bonus whose call it accepted is never released, and one whose call may have reached it
(a crash, no answer) only ``PAYS_WITHIN`` after its claim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Optional

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.access import OPERATOR, Access, of_batches
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import Conflict, NotFound
from turkflow.hits import keep as keeping, lifecycle, money
from turkflow.hits.prolific import api, pages, places, studies
from turkflow.hits.prolific.provider import ProlificProvider, payment_shown
from turkflow.hits.prolific.terms import StudyTerms
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    BonusStatus,
    Conversation,
    Event,
    Hit,
    PlaceStatus,
    ProlificPlace,
    ProlificStudy,
    Turn,
    Worker,
    utcnow,
)

log = logging.getLogger("turkflow.prolific")

GIVES_TURN_BACK = {"RETURNED": "returned on Prolific", "TIMED-OUT": "timed out on Prolific"}
VERDICTS = {"APPROVED": AssignmentStatus.approved, "REJECTED": AssignmentStatus.rejected}
FINISHED = {"AWAITING REVIEW", "PARTIALLY APPROVED", *VERDICTS}
# Ours until settled: a turn in progress, a stored turn not approved yet, one whose submission ended unpaid;
# the last two are money owed, still followed once the study has ended.
OWED = (AssignmentStatus.submitted, AssignmentStatus.unpaid)
UNSETTLED = (AssignmentStatus.accepted, *OWED)
# How long before our record of taking a turn its submission may have started on Prolific, beyond the
# study's maximum time: Prolific's reservation (10 minutes) and clocks that disagree.
STARTED_BEFORE_TAKEN = timedelta(minutes=15)
UNPAID_PER_ROUND = 200
# How long after a pay call reached Prolific its payment may still land: Prolific pays "in the following
# minutes"; an hour is a dozen times more than any wait its description allows for.
PAYS_WITHIN = timedelta(hours=1)


@dataclass
class ProlificRound:
    """What one round found and did; ids are our assignment, bonus or study ids."""

    released: list[int] = field(default_factory=list)  # turns given back: submission returned or timed out
    settled: list[int] = field(default_factory=list)  # approved or rejected on Prolific, now here too
    finished_without_turn: list[int] = field(default_factory=list)  # done on Prolific, no turn stored here
    unpaid: list[int] = field(default_factory=list)  # stored turns whose submission ended unpaid
    approved_late: list[int] = field(default_factory=list)  # of those, approved on Prolific after all
    reward_bonuses: list[int] = field(default_factory=list)  # of those, bonus ids paying the reward: pay them
    awaiting_review: set[str] = field(default_factory=set)  # submission ids Prolific shows awaiting review
    approvals_asked: list[int] = field(default_factory=list)
    claimed_bonuses: list[int] = field(default_factory=list)  # pay outcome unknown: settle from Prolific
    places_left: list[int] = field(default_factory=list)  # session places returned or timed out: ended now
    places_approved: list[int] = field(default_factory=list)  # session places approved on Prolific, now here too
    place_approvals_asked: list[int] = field(default_factory=list)
    studies: dict[str, str] = field(default_factory=dict)  # Prolific study id -> its status afterwards
    slow: dict[str, str] = field(default_factory=dict)  # study id -> a timing warning said for the first time
    failed: list[str] = field(default_factory=list)  # studies Prolific could not be asked about this round

    def __bool__(self) -> bool:
        return any((self.released, self.settled, self.finished_without_turn, self.unpaid, self.approved_late,
                    self.reward_bonuses, self.failed, self.slow, self.places_left, self.places_approved))


def apply_status(session: Session, submission_id: str, status: str, found: ProlificRound) -> None:
    """Take a submission's status on Prolific into our records (the caller commits).

    Returned or timed out: the turn it held goes back to the pool; if its turn was stored already, we keep
    the turn, and the submission is marked unpaid, for ``settle_unpaid`` to pay. Approved or rejected (by
    us, by hand in Prolific's app, or by Prolific's own auto-approval): our assignment says so (a rejection
    of one marked unpaid changes nothing: the turn is kept and paid). Finished on Prolific while we stored
    no turn (the participant came back without our page's code): the turn goes back too, and the
    submission waits for a person's review on Prolific. Anything else changes nothing here. A session
    place's submission is the place's (``apply_to_place``).
    """
    place = places.of_submission(session, submission_id)
    if place is not None:
        apply_to_place(session, place, status, found)
        return
    assignment = session.exec(select(Assignment).where(Assignment.external_id == submission_id)).first()
    if assignment is None:
        return
    if status == "AWAITING REVIEW":
        found.awaiting_review.add(submission_id)
    if status in GIVES_TURN_BACK and assignment.status == AssignmentStatus.submitted:
        keeping.left(session, assignment.worker_id, utcnow())  # gone: the turns kept for them go to anyone
        states.move(assignment, AssignmentStatus.unpaid)
        session.add(assignment)
        turn = lifecycle.turn_for_assignment(session, assignment)
        events.record(session, "prolific_submission_unpaid", "provider", conversation_id=turn.conversation_id,
                      turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id,
                      submission_id=submission_id, status=status)
        found.unpaid.append(assignment.id)
    elif status in GIVES_TURN_BACK:
        if pages.release(session, assignment, GIVES_TURN_BACK[status]):
            keeping.left(session, assignment.worker_id, utcnow())
            found.released.append(assignment.id)
    elif status in FINISHED and assignment.status == AssignmentStatus.accepted:
        pages.release(session, assignment, "finished on Prolific before a turn was stored")
        found.finished_without_turn.append(assignment.id)
        turn = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)
        events.record(session, "prolific_finished_without_turn", "provider", turn_id=turn.id,
                      conversation_id=turn.conversation_id, worker_id=assignment.worker_id,
                      assignment_id=assignment.id, submission_id=submission_id, status=status)
    elif (status in VERDICTS and assignment.status == AssignmentStatus.submitted) or \
            (status == "APPROVED" and assignment.status in (AssignmentStatus.unpaid, AssignmentStatus.rejected)):
        if lifecycle.settle_assignment(session, assignment, VERDICTS[status]):
            found.settled.append(assignment.id)


def apply_to_place(session: Session, place: ProlificPlace, status: str, found: ProlificRound) -> None:
    """A session place's submission on Prolific: returned or timed out, the place ends at once (its held turn
    back to the pool, its kept conversations to anyone) and its written turns are owed (``settle_unpaid``);
    awaiting review while the place is open (the code typed without our page ending it), it ends as
    finished; approved, the place is paid. Each once, however often it is seen."""
    now = utcnow()
    if status == "AWAITING REVIEW":
        found.awaiting_review.add(place.submission_id)
        places.finish(session, place, "finished on Prolific", now)
    elif status in GIVES_TURN_BACK:
        if places.leave(session, place, GIVES_TURN_BACK[status], now):
            found.places_left.append(place.id)
    elif status == "APPROVED" and places.approved(session, place):
        found.places_approved.append(place.id)


def poll(settings: Settings, provider: ProlificProvider, now: Optional[datetime] = None) -> ProlificRound:
    """One round over every running study: submissions, places, unpaid turns, approvals due, bonuses to
    settle.

    A study's submissions are read only while we hold one of them unsettled, and only back to the oldest
    such one's start; an ended study's, only while a stored turn of it is not paid yet. Each study is its
    own transaction, and one Prolific cannot answer about is skipped this round.
    """
    now = now or utcnow()
    found = ProlificRound()
    with session_scope(settings.database_url) as session:
        rows = session.exec(select(ProlificStudy).where(col(ProlificStudy.study_id).is_not(None))
                            .order_by(ProlificStudy.id)).all()
        running = {row.study_id: row.id for row in rows if row.ended_at is None}
        since = {**unsettled_since(session, settings, OWED), **unsettled_since(session, settings, UNSETTLED)}
    studies = [row.study_id for row in rows if row.study_id in running or row.study_id in since]
    for study_id in studies:
        try:
            if study_id in since:
                submissions = list(api.list_submissions(provider.client, study_id,
                                                        started_since=since[study_id]))
                with session_scope(settings.database_url) as session:
                    for submission in submissions:
                        apply_status(session, submission["id"], submission["status"], found)
            if study_id in running:
                with session_scope(settings.database_url) as session:
                    row = session.get(ProlificStudy, running[study_id])
                    status = provider.keep_in_step(session, session.get(Batch, row.batch_id), row.role)
                found.studies[study_id] = status or "UNPUBLISHED"
        except api.ProlificError as exc:
            log.warning("Prolific study %s skipped this round (%s)", study_id, exc)
            found.failed.append(study_id)
    with session_scope(settings.database_url) as session:
        for batch_id in sorted({row.batch_id for row in rows if row.study_id in running}):
            warn_once(session, session.get(Batch, batch_id), found)
    settle_unpaid(settings, provider, found)
    settle_left_places(settings, provider, found)
    found.approvals_asked = approve_due(settings, provider, now, found.awaiting_review)
    found.place_approvals_asked = approve_places_due(settings, provider, now, found.awaiting_review)
    with session_scope(settings.database_url) as session:
        found.claimed_bonuses = claimed_bonuses(session)
    return found


def warn_once(session: Session, batch: Batch, found: ProlificRound) -> None:
    """Record (an event) and say (``found.slow``) each running study's timing or pause warning the first
    time it reaches a level: near Prolific's minimum, under it, paused elsewhere."""
    for view in studies.study_views(session, batch):
        warning = view.warning
        if view.ended or warning is None or view.study_id is None:
            continue
        level = ("paused" if view.paused_elsewhere else "under"
                 if view.median_minutes >= view.underpaid_after_minutes else "near"
                 if view.median_minutes >= studies.WARN_AT * view.underpaid_after_minutes else None)
        if level is None or session.exec(select(Event.id).where(
                Event.kind == "prolific_study_warning", Event.batch_id == batch.id,
                Event.data["study_id"].as_string() == view.study_id,
                Event.data["level"].as_string() == level)).first() is not None:
            continue
        events.record(session, "prolific_study_warning", "provider", batch_id=batch.id, study_id=view.study_id,
                      role=view.role, level=level, warning=warning)
        log.warning("Prolific study %s of batch %s (%ss): %s", view.study_id, batch.id, view.role, warning)
        found.slow[view.study_id] = warning


def unsettled_since(session: Session, settings: Settings,
                    statuses: tuple[str, ...] = UNSETTLED) -> dict[str, datetime]:
    """For each study (running or ended) where we hold a submission in one of ``statuses``: the earliest
    moment any of them may have started on Prolific (our oldest such record, less the study's maximum time,
    as its batch was launched, and a margin). Of an ended study only the money still owed counts
    (``OWED``)."""
    longest = {study_id: (StudyTerms.from_json(terms) or StudyTerms.of_settings(settings)).study_minutes[1]
               for study_id, terms in session.exec(
                   select(ProlificStudy.study_id, Batch.platform_terms).join(Batch, Batch.id == ProlificStudy.batch_id)
                   .where(col(ProlificStudy.study_id).is_not(None)))}
    query = (select(Hit.external_id, func.min(Assignment.accepted_at)).join(Hit, Hit.id == Assignment.hit_id)
             .where(Hit.provider == pages.PROVIDER, col(Assignment.status).in_(statuses),
                    col(Hit.external_id).is_not(None), col(Assignment.place_id).is_(None))
             .group_by(Hit.external_id))
    if set(statuses) - set(OWED):
        query = query.join(ProlificStudy, ProlificStudy.study_id == Hit.external_id).where(
            col(ProlificStudy.ended_at).is_(None))
    oldest_of = {study_id: oldest for study_id, oldest in session.exec(query).all() if oldest is not None}
    # a session place is followed from its start while it is open or waits for its approval
    for study_id, oldest in session.exec(
            select(ProlificPlace.study_id, func.min(ProlificPlace.started_at))
            .where(col(ProlificPlace.status).in_([PlaceStatus.open, PlaceStatus.finished]))
            .group_by(ProlificPlace.study_id)):
        oldest_of[study_id] = min(oldest, oldest_of.get(study_id, oldest))
    return {study_id: _aware(oldest) - timedelta(minutes=longest.get(study_id, settings.prolific_max_minutes))
            - STARTED_BEFORE_TAKEN for study_id, oldest in oldest_of.items()}


def settle_unpaid(settings: Settings, provider: ProlificProvider, found: ProlificRound,
                  limit: int = UNPAID_PER_ROUND) -> None:
    """Pay each stored turn whose submission ended unpaid: approve it where Prolific allows (a timed-out
    submission, approved by the researcher), else record its reward as a bonus on that submission
    (``compensate``; the caller has it paid like any bonus). An approval with no answer is asked again next
    round (approving is idempotent); a refusal is final, so only then is the reward recorded as a bonus."""
    with session_scope(settings.database_url) as session:
        unpaid = session.exec(select(Assignment.id, Assignment.external_id)
                              .where(Assignment.status == AssignmentStatus.unpaid)
                              .order_by(Assignment.id).limit(limit)).all()
    for assignment_id, submission_id in unpaid:
        try:
            try:  # accepted: Prolific pays the reward (its answer may still show the old status)
                api.transition_submission(provider.client, submission_id, "APPROVE")
                approved = "APPROVED"
            except api.ProlificError as exc:
                if exc.prolific_status != 400:
                    raise
                approved = api.get_submission(provider.client, submission_id)["status"]
        except api.ProlificError as exc:
            log.warning("unpaid submission %s: Prolific did not answer (%s); asked again next round",
                        submission_id, exc)
            continue
        with session_scope(settings.database_url) as session:
            assignment = session.get(Assignment, assignment_id)
            if assignment.status != AssignmentStatus.unpaid:
                continue
            if approved == "APPROVED":
                lifecycle.settle_assignment(session, assignment, AssignmentStatus.approved)
                found.approved_late.append(assignment_id)
            else:
                bonus_id = compensate(session, assignment, f"{approved.lower()} on Prolific, not approvable")
                if bonus_id is not None:
                    found.reward_bonuses.append(bonus_id)


def settle_left_places(settings: Settings, provider: ProlificProvider, found: ProlificRound,
                       limit: int = UNPAID_PER_ROUND) -> None:
    """Pay each session place returned or timed out after turns were written in it, once: approve its
    submission where Prolific allows (a timed-out one), else its reward goes as a bonus on the submission
    (``places.compensate``; in ``found.reward_bonuses``, for the caller to have it paid like any bonus). As ``settle_unpaid`` does for a one-turn
    place's stored turn."""
    with session_scope(settings.database_url) as session:
        left = [(place.id, place.submission_id) for place in session.exec(
            select(ProlificPlace).where(ProlificPlace.status == PlaceStatus.left).order_by(ProlificPlace.id)
            .limit(limit)) if places.owed(session, place)]
    for place_id, submission_id in left:
        try:
            try:
                api.transition_submission(provider.client, submission_id, "APPROVE")
                status = "APPROVED"
            except api.ProlificError as exc:
                if exc.prolific_status != 400:
                    raise
                status = api.get_submission(provider.client, submission_id)["status"]
        except api.ProlificError as exc:
            log.warning("session place %s: Prolific did not answer (%s); asked again next round", submission_id, exc)
            continue
        with session_scope(settings.database_url) as session:
            place = session.get(ProlificPlace, place_id)
            if place.status != PlaceStatus.left:
                continue
            if status == "APPROVED":
                places.approved(session, place)
                found.places_approved.append(place_id)
            else:
                bonus_id = places.compensate(session, place, f"{status.lower()} on Prolific, not approvable")
                if bonus_id is not None:
                    found.reward_bonuses.append(bonus_id)


def compensate(session: Session, assignment: Assignment, why: str) -> Optional[int]:
    """Pay the turn's reward as a bonus on its submission (``places.reward_as_bonus``, one per turn) and mark
    the assignment compensated; returns the bonus id (None if the reward was recorded before)."""
    turn = lifecycle.turn_for_assignment(session, assignment)
    bonus_id = places.reward_as_bonus(session, assignment, turn, f"turkflow-reward-turn-{turn.id}", why)
    states.move(assignment, AssignmentStatus.compensated)
    session.add(assignment)
    return bonus_id


def approve_due(settings: Settings, provider: ProlificProvider, now: datetime,
                awaiting_review: Optional[set[str]] = None) -> list[int]:
    """Ask Prolific to approve, in bulk, the submissions whose turn was stored at least the review delay
    ago and that Prolific shows as awaiting review (``awaiting_review``: the ids this round saw so; None:
    every due one); the next round settles ours from what Prolific then says. A submission Prolific would
    not approve (still in progress, or ended unpaid) is never asked for, so it never takes the place of
    one that would be approved."""
    stored_before = now - timedelta(seconds=settings.prolific_approve_after_seconds)
    due_query = (select(Assignment.id, Assignment.external_id).join(Hit, Hit.id == Assignment.hit_id)
                 .where(Hit.provider == pages.PROVIDER, Assignment.status == AssignmentStatus.submitted,
                        col(Assignment.place_id).is_(None), col(Assignment.submitted_at) <= stored_before))
    due: list[tuple[int, str]] = []
    with session_scope(settings.database_url) as session:
        if awaiting_review is None:
            due = list(session.exec(due_query.order_by(Assignment.id).limit(api.MAX_APPROVALS_PER_REQUEST)))
        else:
            waiting = sorted(awaiting_review)
            for start in range(0, len(waiting), 500):
                due += session.exec(due_query.where(col(Assignment.external_id).in_(waiting[start:start + 500])))
            due = sorted(due)[:api.MAX_APPROVALS_PER_REQUEST]
    if due:
        api.bulk_approve_submissions(provider.client, [submission_id for _, submission_id in due])
    return [assignment_id for assignment_id, _ in due]


def approve_places_due(settings: Settings, provider: ProlificProvider, now: datetime,
                       awaiting_review: set[str]) -> list[int]:
    """Ask Prolific to approve, in bulk, the session places finished on our page at least the review delay
    ago that it shows as awaiting review (whether or not a turn was offered in them: the participant gave
    the session's time); the next round settles ours from what Prolific then says."""
    ended_before = now - timedelta(seconds=settings.prolific_approve_after_seconds)
    with session_scope(settings.database_url) as session:
        due = [(place_id, submission_id) for place_id, submission_id in session.exec(
            select(ProlificPlace.id, ProlificPlace.submission_id)
            .where(ProlificPlace.status == PlaceStatus.finished, col(ProlificPlace.ended_at) <= ended_before)
            .order_by(ProlificPlace.id)) if submission_id in awaiting_review][:api.MAX_APPROVALS_PER_REQUEST]
    if due:
        api.bulk_approve_submissions(provider.client, [submission_id for _, submission_id in due])
    return [place_id for place_id, _ in due]


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


# ---- bonuses whose payment nobody can tell: a person decides ------------------------------------------


@dataclass(frozen=True)
class StuckBonus:
    """A claimed bonus Prolific has shown no payment for since ``prolific_bonus_unknown_after_seconds``
    after its claim, with what Prolific shows for its submission now (None: not asked, or no answer)."""

    bonus_id: int
    batch_id: int
    kind: str
    amount_cents: int
    worker: str
    submission_id: str
    bulk_id: Optional[str]
    claimed_at: datetime
    reason: str  # what happened to the pay call, as far as turkflow knows
    cause: str  # the same in a word: "accepted" (by Prolific, yet unpaid), "unanswered" (failed), "crashed"
    currency: str = "GBP"  # of the amount: the batch's
    prolific_status: Optional[str] = None
    prolific_payments: Optional[list[int]] = None  # bonuses Prolific shows paid on the submission, in cents

    @property
    def releasable_from(self) -> Optional[datetime]:
        """When a person may release it for a new payment: once Prolific can no longer be paying it (None:
        never; Prolific accepted its pay call)."""
        return None if self.cause == "accepted" else self.claimed_at + PAYS_WITHIN


def stuck_bonuses(settings: Settings, provider: Optional[ProlificProvider] = None, *,
                  batch_id: Optional[int] = None, now: Optional[datetime] = None,
                  access: Access = OPERATOR) -> list[StuckBonus]:
    """The claimed, unpaid bonuses past the stated time of batches ``access`` may see (the dashboard's
    requester; the CLI's operator sees all), oldest claim first; with ``provider``, each with what Prolific
    shows for its submission (read now)."""
    now = now or utcnow()
    before = now - timedelta(seconds=settings.prolific_bonus_unknown_after_seconds)
    with session_scope(settings.database_url) as session:
        query = (select(Bonus, places.SUBMISSION, Worker.external_id, Conversation.batch_id, Batch.currency)
                 .join(Assignment, Assignment.id == Bonus.assignment_id)
                 .outerjoin(ProlificPlace, ProlificPlace.id == Assignment.place_id)
                 .join(Worker, Worker.id == Bonus.worker_id)
                 .join(Turn, Turn.id == Bonus.turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
                 .join(Batch, Batch.id == Conversation.batch_id)
                 .where(Batch.provider == pages.PROVIDER, Bonus.status == BonusStatus.pending,
                        col(Bonus.pay_claimed_at).is_not(None), col(Bonus.pay_claimed_at) <= before,
                        of_batches(access, Batch.id))
                 .order_by(Bonus.pay_claimed_at, Bonus.id))
        if batch_id is not None:
            query = query.where(Conversation.batch_id == batch_id)
        rows = session.exec(query).all()
        reasons = _pay_outcomes(session, {bonus.external_id for bonus, *_ in rows})
        crashed = ("crashed", "turkflow stopped between the claim and the pay call's answer (a crash or a lost "
                              "connection); Prolific may or may not have been asked to pay")
        found = [StuckBonus(bonus.id, batch, bonus.kind, bonus.amount_cents, worker, submission_id,
                            bonus.external_id, _aware(bonus.pay_claimed_at),
                            *reversed(_accepted_reason(bonus) or reasons.get(bonus.external_id, crashed)),
                            currency=currency)
                 for bonus, submission_id, worker, batch, currency in rows]
    return found if provider is None else _with_prolific(found, provider)


def release_bonus(settings: Settings, provider: ProlificProvider, bonus_id: int, by: str,
                  now: Optional[datetime] = None) -> StuckBonus:
    """A person's decision: the stuck bonus was never paid, so it goes into a new bulk payment (the caller
    pays it). Refused unless it is stuck, Prolific can no longer be paying it (``releasable_from``), and
    Prolific shows no payment of its amount for it on the submission now. Recorded as an event naming who
    decided and what Prolific showed."""
    stuck = _stuck(settings, provider, bonus_id, now)
    if stuck.releasable_from is None:
        raise Conflict(f"bonus {bonus_id}: Prolific accepted its pay call ({stuck.reason}) and pays it itself; "
                       "a release would pay it twice. If it never shows on the submission, pay it by hand in "
                       "Prolific's app and mark it settled")
    if (now or utcnow()) < stuck.releasable_from:
        raise Conflict(f"bonus {bonus_id}: its pay call may have reached Prolific, which pays within minutes; it "
                       f"can be released from {stuck.releasable_from:%Y-%m-%d %H:%M} UTC, if no payment shows by then")
    if stuck.prolific_payments is None:
        raise Conflict(f"Prolific did not answer about submission {stuck.submission_id}; try again later")
    with session_scope(settings.database_url) as session:
        if payment_shown(session, session.get(Bonus, bonus_id), stuck.prolific_payments):
            raise Conflict(f"bonus {bonus_id}: Prolific shows a payment of its amount on submission "
                           f"{stuck.submission_id} ({_cents_list(stuck.prolific_payments, stuck.currency)}); mark it "
                           "settled instead")
        released = session.execute(
            update(Bonus).where(Bonus.id == bonus_id, Bonus.status == BonusStatus.pending,
                                Bonus.external_id == stuck.bulk_id, col(Bonus.pay_claimed_at).is_not(None))
            .values(pay_claimed_at=None, external_id=None)).rowcount
        if released != 1:
            raise Conflict(f"bonus {bonus_id} changed meanwhile; look again")
        _decided(session, "prolific_bonus_released", by, stuck)
    return stuck


def settle_bonus_by_hand(settings: Settings, provider: Optional[ProlificProvider], bonus_id: int, by: str,
                         now: Optional[datetime] = None) -> StuckBonus:
    """A person's decision: the stuck bonus needs no more payment (they saw it paid on Prolific, or paid it
    there by hand); it counts as paid. Recorded as an event naming who decided and what Prolific showed."""
    stuck = _stuck(settings, provider, bonus_id, now)
    with session_scope(settings.database_url) as session:
        moved = session.execute(states.update_to(Bonus, BonusStatus.paid)
                                .where(Bonus.id == bonus_id, Bonus.external_id == stuck.bulk_id)
                                .values(paid_at=utcnow())).rowcount
        if moved != 1:
            raise Conflict(f"bonus {bonus_id} changed meanwhile; look again")
        _decided(session, "prolific_bonus_settled", by, stuck)
    return stuck


def _stuck(settings: Settings, provider: Optional[ProlificProvider], bonus_id: int,
           now: Optional[datetime]) -> StuckBonus:
    with session_scope(settings.database_url) as session:
        bonus = session.get(Bonus, bonus_id)
        if bonus is None:
            raise NotFound(f"no bonus {bonus_id}")
        batch_id = session.get(Conversation, session.get(Turn, bonus.turn_id).conversation_id).batch_id
    found = {s.bonus_id: s for s in stuck_bonuses(settings, None, batch_id=batch_id, now=now)}
    if bonus_id not in found:
        after = settings.prolific_bonus_unknown_after_seconds
        raise Conflict(f"bonus {bonus_id} is not waiting for a person: only a Prolific bonus claimed for payment "
                       f"more than {after} s ago (TURKFLOW_PROLIFIC_BONUS_UNKNOWN_AFTER_SECONDS) and still unpaid is")
    if provider is None:
        return found[bonus_id]
    return next(iter(_with_prolific([found[bonus_id]], provider)))


def _with_prolific(found: list[StuckBonus], provider: ProlificProvider) -> list[StuckBonus]:
    seen = []
    for stuck in found:
        try:
            submission = api.get_submission(provider.client, stuck.submission_id)
        except api.ProlificError as exc:
            log.warning("bonus %s: Prolific did not show submission %s (%s)", stuck.bonus_id,
                        stuck.submission_id, exc)
            seen.append(stuck)
            continue
        seen.append(StuckBonus(**{**stuck.__dict__, "prolific_status": submission.get("status"),
                                  "prolific_payments": [round(float(c)) for c in submission.get("bonus_payments") or []]}))
    return seen


def _decided(session: Session, kind: str, by: str, stuck: StuckBonus) -> None:
    events.record(session, kind, f"requester:{by}", batch_id=stuck.batch_id, bonus_id=stuck.bonus_id,
                  bulk_id=stuck.bulk_id, submission_id=stuck.submission_id, amount_cents=stuck.amount_cents,
                  prolific_status=stuck.prolific_status, prolific_payments=stuck.prolific_payments, by=by)


def _accepted_reason(bonus: Bonus) -> Optional[tuple[str, str]]:
    """(cause, reason) of a bonus whose pay call Prolific accepted (None: it did not, as far as we know)."""
    if bonus.pay_accepted_at is None:
        return None
    return ("accepted", f"Prolific accepted the pay call at {_aware(bonus.pay_accepted_at):%Y-%m-%d %H:%M} UTC but "
                        "shows no payment of its amount on the submission")


def _pay_outcomes(session: Session, bulk_ids: set[Optional[str]]) -> dict[str, tuple[str, str]]:
    """What each bulk's failed pay call did, from the events the provider recorded: no answer that says
    whether it paid; (cause, reason)."""
    found: dict[str, tuple[str, str]] = {}
    for data in session.exec(select(Event.data).where(Event.kind == "prolific_bonus_pay_unanswered")):
        bulk_id = (data or {}).get("bulk_id")
        if bulk_id in bulk_ids:
            found.setdefault(bulk_id, ("unanswered", f"the pay call got no usable answer: {data.get('detail', '?')}"))
    return found


def _cents_list(payments: list[int], currency: str) -> str:
    return ", ".join(money.shown(c, currency) for c in payments) or "none"


def _aware(moment: datetime) -> datetime:
    """Database datetimes come back naive on SQLite; they are UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=utcnow().tzinfo)
