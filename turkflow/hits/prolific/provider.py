"""Prolific as a crowd provider: one study per batch and role, one submission per turn.

A batch role's study lets a participant submit any number of times; its free places follow the turns
waiting for someone, so publishing a turn grows the places (Prolific never lets a published study
shrink) and the last waiting turn going away pauses the study. A HIT's external id is its study's id; an
assignment's is the Prolific submission id (``SESSION_ID`` on our page) and a worker's the participant id
(``PROLIFIC_PID``). Prolific has no researcher-side block, so blocking is membership of a participant
group that every study lists as its block list (membership applies to published studies at once).

A batch role's study is a ``ProlificStudy`` row, written before Prolific is asked to create it, so the
study is found by our own key (batch, role) and never by listing the workspace's studies (only a row whose
creation was interrupted looks for the draft by its ``internal_name``). While the batch runs the study keeps
at least one free place and pauses when no turn waits, so it never runs out of places and drops to
AWAITING REVIEW; when the batch ends, the study is stopped.

What a batch's studies are made with (test or real studies, the role groups, the public address, texts and
times) is the batch's own, stored when it was launched (``terms.StudyTerms``), never this process's
settings; a role's onboarding study likewise keeps what it was published with. turkflow resumes only a
study it paused itself: one Prolific paused (it pays under Prolific's minimum at its median completion time)
or a person paused stays paused.

Bonuses are paid in bulk, and exactly once although Prolific's pay call is not idempotent (see docs/prolific.md):
a study's pending bonuses are set up as one bulk payment and claimed (``Bonus.pay_claimed_at`` and the bulk
id in ``Bonus.external_id``) in a transaction of their own, committed before the pay call; Prolific's
acceptance of the call is committed on its own right after it (``Bonus.pay_accepted_at``). A claimed bonus
is never paid again by this code, only settled from Prolific's record of payments on the submission, each of
our bonuses matched to a payment of its own amount (``matched_bonuses``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Optional

from sqlalchemy import String, cast, or_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select, update

from turkflow import events
from turkflow.config import Settings
from turkflow.errors import Forbidden, ProviderError
from turkflow.hits import keep as keeping, lifecycle
from turkflow.hits import onboarding
from turkflow.protocols.star import stages
from turkflow.hits.prolific import api, places, public
from turkflow.hits.prolific.terms import OnboardingTerms, StudyTerms
from turkflow.hits.provider import CrowdProvider, HitCheck
from turkflow.protocols.questions import PROTOCOLS, get_protocol
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusStatus,
    Conversation,
    Hit,
    HitStatus,
    PlaceStatus,
    ProlificOnboarding,
    ProlificPlace,
    ProlificStudy,
    Role,
    Turn,
    Worker,
    utcnow,
)

log = logging.getLogger("turkflow.prolific")

PROVIDER = "prolific"
SUBMISSION_EVENT = "submission.status.change"
WORKER_PREFIX = "prolific:"


def worker_external_id(participant_id: str) -> str:
    """Our worker id for a Prolific participant: prefixed, so it never meets an MTurk or local id."""
    return WORKER_PREFIX + participant_id


def participant_id(worker: Worker) -> str:
    """The Prolific participant id of one of our workers."""
    return worker.external_id.removeprefix(WORKER_PREFIX)


class SubmissionInProgress(Exception):
    """Prolific still has the submission as reserved or active (the participant has not come back to
    Prolific with the completion code yet); approve or pay later."""


class BonusOutcomeUnknown(Exception):
    """A pay call for this bonus went out, or may have, and Prolific shows no payment on the submission
    yet. Prolific pays within minutes, so a later look usually settles it; never pay it again blindly."""


# Statuses turkflow moves a study from; it leaves any other (PUBLISHING, SCHEDULED, a transient PROCESSING,
# one Prolific adds later) as it is until its next look.
ACTS_ON = {"UNPUBLISHED", "ACTIVE", "PAUSED", "AWAITING REVIEW", "COMPLETED"}


@dataclass(frozen=True)
class StudyStep:
    """What keeping a batch role's study in step does next: grow (a draft: set) its places, one transition,
    or take the study as over."""

    places: Optional[int] = None
    action: Optional[str] = None  # PUBLISH, START, PAUSE, STOP or CANCEL_PUBLISH
    over: bool = False


def next_step(status: str, *, places_taken: int, total_places: int, waiting: int, batch_status: str,
              paused_by_us: bool) -> StudyStep:
    """The step a batch role's study needs, from Prolific's status for it and our turns waiting.

    While the batch runs, the free places cover every waiting turn and never fall to 0 (a study with no free
    place and nothing in progress drops to AWAITING REVIEW, which takes nobody new until started again);
    the study is published, or resumed, while a turn waits, and paused while none does. A study paused by
    anyone but turkflow (Prolific, for underpaying at its median time; a person) is never resumed. An ended
    batch stops its study (a scheduled one is unscheduled). A status turkflow does not act on is left alone.
    """
    if batch_status in (BatchStatus.completed, BatchStatus.cancelled):
        if status in ("ACTIVE", "PAUSED", "AWAITING REVIEW"):
            return StudyStep(action="STOP")
        if status == "SCHEDULED":
            return StudyStep(action="CANCEL_PUBLISH")
        return StudyStep(over=status in ("COMPLETED", "UNPUBLISHED"))
    if status not in ACTS_ON:
        return StudyStep()
    wanted = places_taken + max(waiting, 1)
    places = wanted if wanted > total_places or (status == "UNPUBLISHED" and wanted != total_places) else None
    runs = batch_status == BatchStatus.active and waiting > 0
    if status == "UNPUBLISHED" and runs:
        return StudyStep(places, "PUBLISH")
    if (status == "PAUSED" and paused_by_us and runs) or (status == "AWAITING REVIEW" and runs):
        return StudyStep(places, "START")
    if status == "ACTIVE" and not runs:
        return StudyStep(places, "PAUSE")
    return StudyStep(places)


class ProlificProvider(CrowdProvider):
    name = PROVIDER

    def __init__(self, settings: Settings, client: Optional[api.ProlificClient] = None):
        self.settings = settings
        self.client = client or api.ProlificClient(settings.prolific_token, settings.prolific_base_url)
        self.install = hashlib.sha256(settings.secret_key.encode()).hexdigest()[:10]
        self._groups: dict[str, str] = {}  # our participant groups' ids by name, found once per process

    # -- names and codes --

    def internal_name(self, row: ProlificStudy) -> str:
        """How we find a batch role's study again on Prolific (a retried creation finds the first draft): named
        after this database's row for it (its id and the moment it was written), so a study another
        installation, or an earlier database with the same secret key, made for "batch 1 student" is never
        taken for ours."""
        return f"turkflow {self.install} batch {row.batch_id} {row.role} #{row.id} {_stamp(row.created_at)}"

    def completion_code(self, batch_id: int, role: str) -> str:
        """The code our page sends a participant back to Prolific with when their turn is stored."""
        key = self.settings.secret_key.encode()
        return hmac.new(key, f"prolific {batch_id} {role}".encode(), hashlib.sha256).hexdigest()[:10].upper()

    # -- what a batch publishes --

    def terms_of(self, batch: Batch) -> StudyTerms:
        """What the batch's studies are made with, as stored when it was launched. A batch with none stored
        has no study yet (its first one records them, ``_recorded_terms``): until then this process's
        settings stand for them."""
        return StudyTerms.from_json(batch.platform_terms) or StudyTerms.of_settings(self.settings)

    def _recorded_terms(self, own: Session, batch_id: int) -> StudyTerms:
        """The batch's stored terms, recording this process's settings first if it has none (once: a batch
        launched without them, by code that calls ``lifecycle.launch_batch`` itself, or before they were
        stored). ``own`` is a session of the caller's own, committed here."""
        mine = StudyTerms.of_settings(self.settings)
        own.execute(update(Batch).where(Batch.id == batch_id, cast(Batch.platform_terms, String) == "{}")
                    .values(platform_terms=mine.as_json()))
        own.commit()
        return StudyTerms.from_json(own.exec(select(Batch.platform_terms).where(Batch.id == batch_id)).one())

    def check_public_url(self, url: str, what: str, rehearsal_host: str = "") -> str:
        """``public.check`` with this process's Prolific address (a rehearsal host counts only on the fake)."""
        return public.check(url, what=what, rehearsal_host=rehearsal_host,
                            prolific_base_url=self.settings.prolific_base_url)

    def onboarding_code(self, role: str, passed: bool, stage: int = stages.SINGLE_TASK) -> str:
        """The code the onboarding quiz sends a participant back with: the passing one adds them to the
        role's group (``ADD_TO_PARTICIPANT_GROUP``; a STAR stage's group), the other only approves their
        submission."""
        key = self.settings.secret_key.encode()
        which = f" stage {stage}" if stages.has_stages(role) else ""
        text = f"prolific onboarding {role}{which} {'passed' if passed else 'failed'}"
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:10].upper()

    @staticmethod
    def onboarding_url(public_url: str, role: str, stage: int = stages.SINGLE_TASK) -> str:
        which = f"&s={stage}" if stages.has_stages(role) else ""
        return f"{public_url.rstrip('/')}/prolific/onboarding?r={role}{which}"

    def vouched_by_group(self, batch: Batch, role: str) -> bool:
        """True when a hand-made group (TURKFLOW_PROLIFIC_ROLE_GROUPS when the batch was launched) admits the
        role's participants: then Prolific's allow list alone stands for onboarding, and a new participant
        arrives onboarded."""
        return role in self.terms_of(batch).role_groups

    @staticmethod
    def onboarding_vouched(row: ProlificOnboarding) -> bool:
        """Whether a hand-made group stood for the role's passers when this onboarding study was published:
        then its members arrive at a STAR stage's quiz as onboarded participants of the role."""
        return bool(_onboarding_terms(row).hand_made_group)

    def allow_group(self, session: Session, role: str, stage: int = stages.SINGLE_TASK,
                    terms: Optional[StudyTerms] = None) -> Optional[str]:
        """The group a role's turn studies admit: the batch's hand-made one (``terms``; a new batch's:
        this process's settings), else the current onboarding study's (of a STAR role's ``stage``; hand-made
        groups stand for stage 1 only)."""
        configured = (terms or StudyTerms.of_settings(self.settings)).role_groups.get(role)
        if configured and stage == stages.SINGLE_TASK:
            return configured
        row = current_onboarding(session, role, stage)
        return row.group_id if row is not None else None

    def missing_onboarding(self, session: Session, protocol: str = "wizard_of_tasks", multi_task: bool = False,
                           terms: Optional[StudyTerms] = None) -> list[tuple[str, int, str]]:
        """The (role, stage, why) a batch of ``protocol`` (with ``terms``; a new batch: this process's
        settings) cannot admit anyone for yet: each role's stage 1, and with ``multi_task`` STAR's stage 2
        of each role too. A role is admitted by a hand-made group with somebody in it, or by an onboarding
        study that is published, or whose group already holds somebody (passers of a study it replaced). A
        real batch needs a real onboarding study: a test one admits only the workspace's test participant."""
        terms = terms or StudyTerms.of_settings(self.settings)
        wanted = [(role, stages.SINGLE_TASK) for role in get_protocol(protocol).roles]
        if multi_task:
            wanted += [(role, stages.MULTI_TASK) for role in get_protocol(protocol).roles
                       if stages.has_stages(role)]
        missing = []
        for role, stage in wanted:
            group = self.allow_group(session, role, stage, terms)
            row = current_onboarding(session, role, stage)
            hand_made = stage == stages.SINGLE_TASK and role in terms.role_groups
            published = row is not None and row.published_at is not None
            test_only = row is not None and _onboarding_terms(row).test
            if hand_made or (published and not (test_only and not terms.test)):
                why = "" if not hand_made else self._nobody_in(group, f"hand-made group {group}")
            elif group is not None and not self._nobody_in(group, ""):
                why = ""
            elif row is None:
                why = "no onboarding study"
            elif test_only and not terms.test:
                why = "only a test onboarding study, which real participants never see"
            else:
                why = "a draft onboarding study (Prolific did not publish it) with nobody in its group"
            if why:
                missing.append((role, stage, why))
        return missing

    # -- turns --

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        """Make room for this turn on its batch role's study (created on first use); returns the study id."""
        study_id = self.study_id(session, batch, hit.role)
        self.keep_in_step(session, batch, hit.role, include=hit)
        return study_id

    def expire(self, session: Session, hit: Hit) -> None:
        """Places cannot be taken back: the study pauses once no turn of it waits (participants already in
        it may still finish), and stops once its batch is over."""
        if hit.external_id is None:
            return
        self.keep_in_step(session, lifecycle.batch_of_hit(session, hit), hit.role, exclude=hit)
        events.record(session, "hit_expired", "provider", turn_id=hit.turn_id, hit_id=hit.id,
                      external_id=hit.external_id)

    def keep_in_step(self, session: Session, batch: Batch, role: str, *, include: Optional[Hit] = None,
                     exclude: Optional[Hit] = None) -> Optional[str]:
        """Bring the batch role's study in line with the turns waiting for a participant (``next_step``);
        returns Prolific's status afterwards (None: the role has no study). The caller commits what is
        recorded: the status seen, and whether turkflow paused the study.

        A turn opened while the study is being paused is found by counting again after the pause (its row is
        committed as pending before it is published): then the study resumes, or its publisher, which
        reads the study after that commit, finds it paused and resumes it. That publisher knows the pause is
        ours because it is recorded (``paused_at``), and committed, before the count: either the publisher
        reads the record, or the count finds its turn.

        A participant who has started but not yet reached our page is counted twice (their place is taken
        and the turn they will take still waits), so places can run one ahead; our page then finds no turn
        for one of them and asks them to return the submission.
        """
        row = _study_row(session, batch.id, role)
        if row is None or row.study_id is None or row.ended_at is not None:
            return None
        study = api.get_study(self.client, row.study_id)
        status = study["status"]
        sessions = self.terms_of(batch).sessions
        waiting = places_wanted(session, batch.id, role, utcnow(), sessions=sessions, include=include, exclude=exclude)
        if status == "PAUSED" and row.paused_at is None:  # a pause of ours may have been recorded meanwhile
            set_committed_value(row, "paused_at", _paused_now(session, row.id))
        step = next_step(status, places_taken=int(study.get("places_taken") or 0), waiting=waiting,
                         total_places=int(study.get("total_available_places") or 0), batch_status=batch.status,
                         paused_by_us=row.paused_at is not None)
        if step.places is not None:
            status = api.update_study(self.client, row.study_id, {"total_available_places": step.places})["status"]
        if step.action in ("PUBLISH", "STOP", "CANCEL_PUBLISH"):
            status = api.transition_study(self.client, row.study_id, step.action)["status"]
        elif step.action == "START":
            status, _ = self._transition(row.study_id, "START")
            row.paused_at = None
        elif step.action == "PAUSE":
            status, ours = self._transition(row.study_id, "PAUSE")
            if ours:  # a pause someone else made is not ours to undo
                _paused_by_us(session, row)
            if batch.status == BatchStatus.active and _places_wanted_now(session, batch.id, role, exclude, sessions) > 0:
                status, _ = self._transition(row.study_id, "START")
                row.paused_at = None
        if status == "PAUSED" and row.paused_at is None and row.seen_status != "PAUSED":
            log.warning("Prolific study %s of batch %s %s was paused, not by turkflow; turkflow leaves it paused",
                        row.study_id, batch.id, role)
            events.record(session, "prolific_study_paused_elsewhere", "provider", batch_id=batch.id, role=role,
                          study_id=row.study_id)
        row.seen_status = status
        session.add(row)
        if step.over or step.action == "STOP" or (step.action == "CANCEL_PUBLISH" and status == "UNPUBLISHED"):
            _end_study(session, row.id)
        return status

    def _transition(self, study_id: str, action: str) -> tuple[str, bool]:
        """PAUSE or START; one another worker made first (Prolific refuses it then) is taken as done. Returns
        Prolific's status afterwards and whether this call made the move."""
        try:
            return api.transition_study(self.client, study_id, action)["status"], True
        except api.ProlificError as exc:
            if exc.prolific_status != 400:
                raise
            return api.get_study(self.client, study_id)["status"], False

    def study_id(self, session: Session, batch: Batch, role: str) -> str:
        """The batch role's study id, creating the study once, with the batch's terms.

        The ``ProlificStudy`` row is written (and committed) first, with the batch's terms recorded if it had
        none; the study id is recorded on it once Prolific made the draft. A row without an id means an
        attempt was interrupted or is under way: we look for its draft by ``internal_name`` and create one
        only if there is none. Two workers doing this at once may both create a draft; the first id recorded
        wins, and the other stays an unpublished draft, which costs nothing.
        """
        with Session(session.get_bind()) as own:
            row = _study_row(own, batch.id, role)
            if row is not None and row.study_id is not None:
                return row.study_id
            terms = self._recorded_terms(own, batch.id)
            if row is None:
                try:
                    own.add(ProlificStudy(batch_id=batch.id, role=role))
                    own.commit()
                except IntegrityError:
                    own.rollback()
        stage = _stage_of_batch(session, batch)
        if self.allow_group(session, role, stage, terms) is None:
            stage = stages.SINGLE_TASK  # a multi-task batch without stage 2's group admits stage 1's
        allowed = self.allow_group(session, role, stage, terms)
        missing = [m for m in self.missing_onboarding(session, batch.protocol, stage == stages.MULTI_TASK, terms)
                   if m[0] == role and m[1] == stage]
        if allowed is None or missing:  # a study open to everyone, or to nobody, helps no one
            raise ProviderError(gate_refusal(missing or [(role, stage, "no onboarding study")]))
        page = terms.checked_url(terms.page_url(batch.id, role), f"the {role} study of batch {batch.id}",
                                 self.settings.prolific_base_url)
        with Session(session.get_bind()) as own:
            name = self.internal_name(_study_row(own, batch.id, role))
        drafts = self._studies_named(name)
        made = drafts[0]["id"] if drafts else self._create_study(batch, role, name, allowed, terms, page)["id"]
        if terms.test:  # the draft stays a draft; its test copy is the study
            made = api.create_test_study(self.client, made)["study_id"]
        with Session(session.get_bind()) as own:
            own.execute(update(ProlificStudy)
                        .where(ProlificStudy.batch_id == batch.id, ProlificStudy.role == role,
                               col(ProlificStudy.study_id).is_(None))
                        .values(study_id=made))
            own.commit()
            return _study_row(own, batch.id, role).study_id

    def _studies_named(self, name: str) -> list[dict[str, Any]]:
        """Drafts an interrupted creation left, earliest first (the only time we list the workspace's
        studies). Only an unpublished draft named after our own row is taken: a study anyone published is
        never adopted."""
        return sorted((s for s in api.list_studies(self.client)
                       if s.get("internal_name") == name and s.get("status") == "UNPUBLISHED"),
                      key=lambda s: (s.get("date_created") or "", s["id"]))

    def _create_study(self, batch: Batch, role: str, name: str, allowed: str, terms: StudyTerms,
                      page: str) -> dict[str, Any]:
        others = [other for other in get_protocol(batch.protocol).roles if other != role]
        estimated, maximum = terms.study_minutes
        body = api.study_body(
            name=f"{role.capitalize()}: {terms.study_name}", description=terms.study_description,
            page_url=page, completion_code=self.completion_code(batch.id, role),
            reward_cents=batch.reward_cents, places=1, estimated_minutes=estimated,
            maximum_minutes=maximum, internal_name=name, allow_groups=[allowed],
            block_groups=[self.blocked_group(), *(self.role_group(other) for other in others)],
            project=terms.project_id or None)
        created = api.create_study(self.client, body)
        log.info("created Prolific study %s for batch %s %s%s", created["id"], batch.id, role,
                 " (a draft for its test study)" if terms.test else "")
        return created

    def check_submission(self, study_id: str, submission_id: str, participant_id: str) -> None:
        """Refuse unless Prolific has this submission in progress, by this participant, in this study: the
        ids on our page's URL are whatever the browser sent."""
        try:
            submission = api.get_submission(self.client, submission_id)
        except api.ProlificError as exc:
            if exc.prolific_status in (400, 404):
                raise Forbidden("Prolific knows no such submission") from None
            raise
        if submission.get("participant") != participant_id or submission.get("study_id") != study_id:
            raise Forbidden("this submission belongs to another participant or study on Prolific")
        if submission.get("status") != "ACTIVE":
            raise Forbidden(f"this submission is {str(submission.get('status')).lower()} on Prolific, "
                            "not in progress")

    def verify_submission(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        self.check_submission(hit.external_id, assignment_id, worker_id)

    # -- the reconciler: per study, not per HIT (``sync.poll``, on its own beat task) --

    def hits_to_check(self, session: Session, limit: int = 500) -> list[int]:
        """None one by one: ``sync.poll`` reads each running study's submissions at once."""
        return []

    def check_hit(self, session: Session, hit: Hit, now: datetime) -> HitCheck:
        """Nothing per HIT (``hits_to_check`` lists none); ``sync.apply_status`` takes each submission's
        state."""
        return HitCheck()

    def approvals_due(self, session: Session, settings: Settings, now: datetime,
                      limit: int = 500) -> list[int]:
        """None one by one: ``sync.approve_due`` asks Prolific to approve the due submissions in bulk."""
        return []

    # -- submissions and money --

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Approve the submission (Prolific ignores a repeat); one Prolific already approved settles ours. A turn
        of a session place is approved with its place (``sync.approve_places_due``), never alone."""
        if assignment.status != AssignmentStatus.submitted or assignment.place_id is not None:
            return
        try:
            api.transition_submission(self.client, assignment.external_id, "APPROVE")
        except api.ProlificError as exc:
            if exc.prolific_status != 400:
                raise
            status = api.get_submission(self.client, assignment.external_id)["status"]
            if status in ("RESERVED", "ACTIVE"):
                raise SubmissionInProgress(f"submission {assignment.external_id} is still {status} on "
                                           "Prolific") from None
            if status != "APPROVED":
                raise
        lifecycle.settle_assignment(session, assignment, AssignmentStatus.approved)

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> list[int]:
        """Pay this bonus with every other unclaimed pending bonus of its study, in one bulk payment.

        The bonuses (at most 200, this one first) are set up as one bulk, then claimed all or none with the
        bulk id (``pay_claimed_at``, ``external_id``) in a transaction of their own, committed before the
        one pay call; the caller must hold no uncommitted write to them. A worker that finds one of them
        claimed by another meanwhile claims none and pays nothing (its set-up costs nothing). Prolific's
        acceptance of the call is committed on its own at once (``pay_accepted_at``, and the event with
        Prolific's fees), before anything else happens, so a crash after the call still knows Prolific will
        pay. A claimed bonus is settled only from its submission's ``bonus_payments``, by a payment of its
        own amount (``matched_bonuses``). An unclaimed bonus was never paid, so it needs no such look.
        """
        if bonus.pay_claimed_at is not None:
            return self._settle(session, bonus, assignment)
        hit = session.get(Hit, assignment.hit_id)
        study_id, batch_id = hit.external_id, lifecycle.batch_of_hit(session, hit).id
        due = _unclaimed_bonuses(session, study_id, first=bonus.id)
        if bonus.id not in due:
            raise BonusOutcomeUnknown(f"bonus {bonus.id} is being paid by another worker")
        bulk = api.set_up_bonus_payments(self.client, study_id, dict(due.values()))
        if not _claim(session, list(due), bulk["id"]):
            raise BonusOutcomeUnknown(f"bonus {bonus.id} is being paid by another worker")
        try:
            api.pay_bonus_payments(self.client, bulk["id"])
        except api.ProlificError as exc:
            if not exc.sent or 400 <= exc.prolific_status < 500:  # certainly not paid: let a retry pay it
                _release(session, list(due), bulk["id"])
            else:  # it may have paid: settled from Prolific, or by a person (``sync.stuck_bonuses``)
                _note_unanswered(session, list(due), bulk["id"], str(exc))
            raise
        _accepted(session, list(due), bulk, batch_id, study_id)
        return list(due)

    def _settle(self, session: Session, bonus: Bonus, assignment: Assignment) -> list[int]:
        """A claimed bonus is paid once its submission shows a payment of its own amount that no other bonus
        of ours there accounts for, and never paid again from here."""
        submission_id = places.submission_of(session, assignment)
        payments = api.get_submission(self.client, submission_id).get("bonus_payments") or []
        if payment_shown(session, bonus, payments):
            return [bonus.id]
        accepted = (f"Prolific accepted the pay call at {bonus.pay_accepted_at:%H:%M} UTC"
                    if bonus.pay_accepted_at is not None else f"it went to Prolific at {bonus.pay_claimed_at:%H:%M} UTC")
        raise BonusOutcomeUnknown(f"bonus {bonus.id}: {accepted} and submission {submission_id} shows no "
                                  f"payment of {bonus.amount_cents} yet")

    # -- participants --

    def _nobody_in(self, group: str, named: str) -> str:
        """Why ``group`` (``named``) admits nobody: empty, or not a group of the workspace; "" when someone
        is in it."""
        try:
            return "" if api.list_participant_group_members(self.client, group) else f"{named} with nobody in it"
        except api.ProlificError as exc:
            if exc.prolific_status != 404:
                raise
            return f"{named}, not a group of this workspace"

    def check_onboarding_gate(self, session: Session, live: bool, protocol: str = "wizard_of_tasks",
                              multi_task: bool = False, terms: Optional[StudyTerms] = None) -> None:
        """A role's turn studies admit the group its onboarding study adds those who pass to (``turkflow
        prolific onboarding``), or a hand-made group (TURKFLOW_PROLIFIC_ROLE_GROUPS); a draft onboarding
        study with nobody in its group, or a hand-made group with nobody in it, admits nobody, and our turn
        page would refuse every participant of the role. A STAR role has a study per stage; stage 2
        (``multi_task``) unlocks multi-task dialogs. Refused in one line naming what is missing."""
        missing = self.missing_onboarding(session, protocol, multi_task, terms)
        if missing:
            raise ProviderError(gate_refusal(missing))

    def set_up_onboarding(self, session: Session, role: str, *, reward_cents: int, places: int,
                          estimated_minutes: int, stage: int = stages.SINGLE_TASK, replace: bool = False
                          ) -> tuple[ProlificOnboarding, str]:
        """The role's current onboarding study (a STAR role's, of ``stage``), made once: returns its row and
        Prolific's status.

        As with a batch role's study, the ``ProlificOnboarding`` row is written (and committed) first, with
        what the study is published with (``terms.OnboardingTerms``: a test or a real study, by
        TURKFLOW_PROLIFIC_TEST_STUDIES; the quiz's address, checked first; reward and minutes); the group
        (the hand-made one, else our role group, found by name or created) and then the study (a draft an
        interrupted attempt left is found by ``internal_name``) are recorded on it as Prolific makes them, so
        running this again finishes an interrupted set-up and makes nothing twice. A draft's places follow
        ``places``; a published study's only grow to it. A study Prolific refused to publish (its balance)
        stays a draft, which admits nobody: ``published_at`` stays None and the launch gate says so.

        ``replace`` stops the current study (participants in it may still finish) and makes a new one in its
        place, adding those who pass to the same group, so everyone who passed the old one stays admitted;
        a test study is followed by a real one this way. Without it, settings that would make another kind of
        study than the current one (test or real) are refused.

        The study's URL is our onboarding quiz; its passing code adds the participant to the group, and both
        codes approve the submission (the quiz is paid whether passed or not). Participants of another role,
        or blocked, are kept out; each participant takes it once. A STAR role's stage 1 works the same way
        (its tutorial and quiz, with hints); its stage 2 study admits only the participants stage 1's group
        holds (set stage 1 up first), and passing it adds them to a group of its own, which the turn studies
        of batches whose dialogs are all multi-task admit.
        """
        title, description = _onboarding_texts(role, stage)
        which = f" stage {stage}" if stages.has_stages(role) else ""
        terms = OnboardingTerms.of_settings(self.settings, role, test=self.settings.prolific_test_studies,
                                            reward_cents=reward_cents, minutes=estimated_minutes)
        quiz = self.check_public_url(self.onboarding_url(terms.public_url, role, stage),
                                     f"the {role}{which} onboarding study", terms.rehearsal_host)
        admits: list[str] = []
        if stage != stages.SINGLE_TASK:
            earlier = current_onboarding(session, role, stage - 1)
            if earlier is None or earlier.group_id is None:
                raise ProviderError(f"set up {role} stage {stage - 1} first (`turkflow prolific onboarding "
                                    f"--role {role} --stage {stage - 1}`): stage {stage} admits only its group")
            admits = [earlier.group_id]
        bind = session.get_bind()
        with Session(bind) as own:
            current = current_onboarding(own, role, stage)
            if current is not None and replace:
                self._replace_onboarding(own, current)
                current = None
            kind = "test" if terms.test else "real"
            if current is not None and _onboarding_terms(current).test != terms.test:
                raise ProviderError(f"the current {role}{which} onboarding study ({current.study_id}) is not a "
                                    f"{kind} study; publish a {kind} one in its place with --replace")
            if current is None:
                try:
                    own.add(ProlificOnboarding(role=role, stage=stage, terms=terms.as_json()))
                    own.commit()
                except IntegrityError:
                    own.rollback()
            row = current_onboarding(own, role, stage)
            group_id = row.group_id or self._passing_group(role, stage, terms)
            own.execute(update(ProlificOnboarding).where(ProlificOnboarding.id == row.id,
                                                         col(ProlificOnboarding.group_id).is_(None))
                        .values(group_id=group_id))
            own.commit()
            own.refresh(row)
            group_id, study_id, terms = row.group_id, row.study_id, _onboarding_terms(row)
        if study_id is None:
            name = f"turkflow {self.install} onboarding {role}{which} #{row.id} {_stamp(row.created_at)}"
            drafts = self._studies_named(name)
            others = [other for other in _roles_beside(role) if other != role]
            made = drafts[0]["id"] if drafts else api.create_study(self.client, api.study_body(
                name=title, description=f"{description} One attempt; paid whether you pass or not.",
                page_url=quiz, reward_cents=terms.reward_cents, places=places,
                estimated_minutes=terms.minutes, internal_name=name, allow_groups=admits,
                block_groups=[self.blocked_group(), *(self.role_group(other) for other in others)],
                project=terms.project_id or None, submissions_per_participant=1,
                completion_codes=self._onboarding_codes(role, group_id, stage)))["id"]
            if terms.test:
                made = api.create_test_study(self.client, made)["study_id"]
            with Session(bind) as own:
                own.execute(update(ProlificOnboarding).where(ProlificOnboarding.id == row.id,
                                                             col(ProlificOnboarding.study_id).is_(None))
                            .values(study_id=made))
                own.commit()
            events.record(session, "prolific_onboarding_created", "provider", role=role, stage=stage,
                          study_id=made, group_id=group_id, test=terms.test)
            log.info("created Prolific onboarding study %s for %ss%s (group %s)", made, role, which, group_id)
        with Session(bind) as own:
            row = own.get(ProlificOnboarding, row.id)
        study = api.get_study(self.client, row.study_id)
        status, had = study["status"], int(study.get("total_available_places") or 0)
        if had < places or (status == "UNPUBLISHED" and had != places):  # a draft's follow; published: only grow
            status = api.update_study(self.client, row.study_id, {"total_available_places": places})["status"]
        if status == "UNPUBLISHED":
            status = api.transition_study(self.client, row.study_id, "PUBLISH")["status"]
        if status not in ("UNPUBLISHED", "SCHEDULED") and row.published_at is None:
            with Session(bind) as own:
                own.execute(update(ProlificOnboarding).where(ProlificOnboarding.id == row.id,
                                                             col(ProlificOnboarding.published_at).is_(None))
                            .values(published_at=utcnow()))
                own.commit()
                row = own.get(ProlificOnboarding, row.id)
        return row, status

    def _replace_onboarding(self, own: Session, current: ProlificOnboarding) -> None:
        """Stop the current onboarding study (a draft is left as it is: it costs nothing) and mark it
        replaced, in ``own``'s transaction, committed."""
        if current.study_id is not None:
            status = api.get_study(self.client, current.study_id)["status"]
            if status in ("ACTIVE", "PAUSED", "AWAITING REVIEW"):
                api.transition_study(self.client, current.study_id, "STOP")
            elif status == "SCHEDULED":
                api.transition_study(self.client, current.study_id, "CANCEL_PUBLISH")
        own.execute(update(ProlificOnboarding).where(ProlificOnboarding.id == current.id,
                                                     col(ProlificOnboarding.replaced_at).is_(None))
                    .values(replaced_at=utcnow()))
        events.record(own, "prolific_onboarding_replaced", "provider", role=current.role, stage=current.stage,
                      study_id=current.study_id)
        own.commit()

    def _onboarding_codes(self, role: str, group_id: str, stage: int) -> list[dict[str, Any]]:
        approve = {"action": "AUTOMATICALLY_APPROVE"}
        joins = {"action": "ADD_TO_PARTICIPANT_GROUP", "participant_group": group_id}
        return [api.completion_code_item(self.onboarding_code(role, True, stage), approve, joins),
                api.completion_code_item(self.onboarding_code(role, False, stage), approve, code_type="OTHER")]

    def _passing_group(self, role: str, stage: int, terms: OnboardingTerms) -> str:
        """The group passing the role's (stage's) quiz adds to: stage 1's is the hand-made group or our role
        group (which the other roles' studies keep out); a later stage has a group of its own."""
        if stage == stages.SINGLE_TASK:
            return terms.hand_made_group or self.role_group(role)
        return self._group(f"turkflow {self.install} {role}s stage {stage}",
                           f"Participants who passed turkflow's {role} stage {stage} quiz.")

    def soft_block(self, session: Session, worker: Worker, reason: str) -> None:
        """The block-list group every study of ours lists as a filter; the membership applies to published
        studies at once."""
        api.add_to_participant_group(self.client, self.blocked_group(), [participant_id(worker)])

    def block_permanently(self, session: Session, worker: Worker, reason: str) -> None:
        """The same block-list group: Prolific offers researchers nothing stronger."""
        self.soft_block(session, worker, reason)

    def unblock(self, session: Session, worker: Worker) -> None:
        """Leave the block-list group; any other group the participant is in is left as it is."""
        api.remove_from_participant_group(self.client, self.blocked_group(), [participant_id(worker)])

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
                by_study.setdefault(study_id, []).append(participant_id(worker))
        for study_id, participants in by_study.items():
            api.send_message(self.client, study_id, participants, f"{subject}\n\n{message}")

    # -- webhooks --

    def webhook_url(self) -> str:
        """Where Prolific posts its events: the workspace's one subscription, this process's public URL."""
        return f"{self.settings.public_url.rstrip('/')}/prolific/webhook"

    def subscribe(self) -> tuple[str, dict[str, Any]]:
        """The workspace's webhook secret (created if it has none) and an enabled subscription of our webhook
        URL to submission status changes, made by Prolific's documented flow ("Monitoring study progress"):
        creating the subscription returns its ``X-Hook-Secret`` as a response header, and sending that back
        through the API confirms it. Nothing is ever confirmed from a request to our own URL. A subscription
        of ours left unconfirmed (its secret lost with an interrupted run) is deleted and made again. The URL
        is checked first, as everything published on Prolific is (``public.check``)."""
        self.check_public_url(self.webhook_url(), "the webhook subscription",
                              self.settings.prolific_rehearsal_host)
        workspace_id = self.settings.prolific_workspace_id
        secrets = api.list_webhook_secrets(self.client, workspace_id)
        secret = secrets[0]["value"] if secrets else api.create_webhook_secret(self.client, workspace_id)
        for enabled in (True, False):
            for subscription in api.list_webhook_subscriptions(self.client, workspace_id, enabled):
                if subscription.get("target_url") != self.webhook_url() or \
                        subscription.get("event_type") != SUBMISSION_EVENT:
                    continue
                if subscription.get("is_enabled"):
                    return secret, subscription
                api.delete_webhook_subscription(self.client, subscription["id"])
        created, hook_secret = api.create_webhook_subscription(self.client, workspace_id, SUBMISSION_EVENT,
                                                               self.webhook_url())
        return secret, api.confirm_webhook_subscription(self.client, created["id"], hook_secret)

    def blocked_group(self) -> str:
        """Our block-list group: every study of ours keeps its members out."""
        return self._group(f"turkflow {self.install} blocked",
                           "Participants turkflow keeps out of its studies (low-rated work under review).")

    def role_group(self, role: str) -> str:
        """The participants who write as ``role``: the other roles' studies keep them out, so a participant
        holds one role for the whole collection without ever seeing a study they would be refused at."""
        return self._group(f"turkflow {self.install} {role}s",
                           f"Participants who write as {role}s in turkflow's collections.")

    def join_role(self, worker: Worker) -> None:
        """Record the participant's role on Prolific (a member already in is ignored)."""
        api.add_to_participant_group(self.client, self.role_group(worker.role), [participant_id(worker)])

    def _group(self, name: str, description: str) -> str:
        """A participant group of ours, found by name or created, once per process."""
        if name not in self._groups:
            workspace_id = self.settings.prolific_workspace_id
            found = [g["id"] for g in api.list_participant_groups(self.client, workspace_id)
                     if g.get("name") == name and not g.get("is_deleted")]
            self._groups[name] = found[0] if found else api.create_participant_group(
                self.client, workspace_id, name, description)["id"]
        return self._groups[name]

    def balance_cents(self, live: bool = True) -> Optional[int]:
        """What the workspace can still spend, in its currency's minor unit (Prolific has no sandbox)."""
        balance = api.get_workspace_balance(self.client, self.settings.prolific_workspace_id)
        return int(balance["available_balance"] or 0)


def gate_refusal(missing: list[tuple[str, int, str]]) -> str:
    """One line naming what keeps each (role, stage, why) from admitting anyone, and what to run."""
    said: dict[str, list[str]] = {}
    for role, stage, why in missing:
        said.setdefault(why, []).append(f"{role} stage {stage}" if stages.has_stages(role) else f"{role}s")
    reasons = "; ".join(f"{why} for {(', ' if ' stage ' in names[0] else ' or ').join(names)}"
                        for why, names in said.items())
    role, stage, _ = missing[0]
    which = f" --stage {stage}" if stages.has_stages(role) else ""
    return (f"{reasons}: run `turkflow prolific onboarding --role {role}{which}` for each (or name hand-made "
            "groups with participants in them in TURKFLOW_PROLIFIC_ROLE_GROUPS); until then nobody can take "
            "those turns")


def places_wanted(session: Session, batch_id: int, role: str, now: datetime, *, sessions: bool,
                  include: Optional[Hit] = None, exclude: Optional[Hit] = None) -> int:
    """How many of a batch role's waiting turns (HITs pending or open that nobody holds; ``include`` one being
    published, ``exclude`` one going away) need a participant who is not yet in the study: the free places its
    study keeps (``keep_in_step``), and whether a simulated newcomer finds one.

    With one-turn places every waiting turn needs one: even a turn kept for someone needs a place for them to come
    back by. With session places (``sessions``) a participant in the study takes turns without a new place, so
    two kinds of turns need none: a turn kept for a participant who may still take it (``keep.keeper_holds``:
    present, or writing another turn), which a newcomer could not take; and one turn for each open session whose
    participant is present with nothing in hand and nothing kept for them, who takes the next waiting one (unless
    its time is up: in its last turn's minutes it starts none, ``places.time_up``). A
    session busy writing a turn takes none of them now: counting it kept newcomers out while turns waited. Its
    cost: when its turn is written, a participant so let in may have taken the turn it would have taken next, and
    it waits for the next one, on a session paid by the session (bench keep measures the turns per session).
    """
    held = select(Assignment.hit_id).where(Assignment.status == AssignmentStatus.accepted)
    waiting = (col(Hit.status).in_([HitStatus.pending, HitStatus.open])
               if include is None else or_(col(Hit.status).in_([HitStatus.pending, HitStatus.open]), Hit.id == include.id))
    rows = session.exec(
        select(Hit.id, Hit.reserved_for_id, keeping.keeper_holds(Hit)).join(Turn, Turn.id == Hit.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == batch_id, Hit.role == role, Hit.provider == PROVIDER, waiting,
               col(Hit.id).not_in(held)), params={"now": now}).all()
    rows = [row for row in rows if exclude is None or row[0] != exclude.id]
    if not sessions:
        return len(rows)
    kept_for = {keeper for _, keeper, withheld in rows if withheld}
    terms = StudyTerms.from_json(session.get(Batch, batch_id).platform_terms)
    takes_turns_until = now + places.last_turn_margin(timedelta(minutes=terms.session_minutes),
                                                     terms.estimated_minutes)  # then its time is up
    idle = session.exec(
        select(ProlificPlace.worker_id).join(Worker, Worker.id == ProlificPlace.worker_id)
        .where(ProlificPlace.batch_id == batch_id, ProlificPlace.role == role, ProlificPlace.status == PlaceStatus.open,
               col(ProlificPlace.ends_at) > takes_turns_until, col(Worker.present_until) > now,
               ~select(Assignment.id).where(Assignment.place_id == ProlificPlace.id,
                                            Assignment.status == AssignmentStatus.accepted).exists())).all()
    return sum(1 for _, _, withheld in rows if not withheld) - sum(1 for worker_id in idle if worker_id not in kept_for)


def _places_wanted_now(session: Session, batch_id: int, role: str, exclude: Optional[Hit], sessions: bool) -> int:
    """``places_wanted`` as committed now, outside the caller's snapshot (SQLite keeps a transaction's)."""
    with Session(session.get_bind()) as fresh:
        return places_wanted(fresh, batch_id, role, utcnow(), sessions=sessions, exclude=exclude)


def _unclaimed_bonuses(session: Session, study_id: str, first: int) -> dict[int, tuple[str, int]]:
    """The pending, unclaimed bonuses of a study's submissions, ``first`` (if among them) before the oldest:
    bonus id -> (submission id, cents), as many as one bulk payment takes, one per submission (a turn's
    reward paid as a bonus and its quality bonus go in two bulks, each a line of its own)."""
    rows = session.exec(
        select(Bonus.id, places.SUBMISSION, Bonus.amount_cents)
        .join(Assignment, Assignment.id == Bonus.assignment_id).join(Hit, Hit.id == Assignment.hit_id)
        .outerjoin(ProlificPlace, ProlificPlace.id == Assignment.place_id)
        .where(Hit.provider == PROVIDER, Hit.external_id == study_id, Bonus.status == BonusStatus.pending,
               col(Bonus.pay_claimed_at).is_(None))
        .order_by((Bonus.id == first).desc(), Bonus.id).limit(api.MAX_BONUSES_PER_REQUEST)
    ).all()
    due: dict[int, tuple[str, int]] = {}
    taken: set[str] = set()
    for bonus_id, submission_id, cents in rows:
        if submission_id not in taken:
            due[bonus_id] = (submission_id, cents)
            taken.add(submission_id)
    return due


def _claim(session: Session, bonus_ids: list[int], bulk_id: str) -> bool:
    """Mark every one of these pending bonuses as about to be paid with this bulk, or none of them: durably,
    and only once across workers (a row another worker claimed first fails the count, and all is undone)."""
    with Session(session.get_bind()) as own:
        claimed = own.execute(
            update(Bonus).where(col(Bonus.id).in_(bonus_ids), Bonus.status == BonusStatus.pending,
                                col(Bonus.pay_claimed_at).is_(None))
            .values(pay_claimed_at=utcnow(), external_id=bulk_id)).rowcount
        if claimed != len(bonus_ids):
            own.rollback()
            return False
        own.commit()
    return True


def matched_bonuses(session: Session, assignment_id: int, payments: list[Any]) -> set[int]:
    """Our bonuses on one submission (the assignment's, with every other turn of its session place) that its
    ``bonus_payments`` (amounts in cents: all Prolific keeps of a payment on a submission) account for, each
    matched to one payment of its own amount: first those known paid, then the claimed ones, earliest claim
    first. A payment no bonus of ours matches (a person's payment in Prolific's app, an adjustment payment
    Prolific asked for) settles nothing, and no bonus is taken as paid because another one is."""
    left = Counter(round(float(cents)) for cents in payments)
    sharing = places.sharing_submission(session, session.get(Assignment, assignment_id))
    ours = session.exec(
        select(Bonus.id, Bonus.amount_cents).where(
            col(Bonus.assignment_id).in_(sharing),
            or_(Bonus.status == BonusStatus.paid, col(Bonus.pay_claimed_at).is_not(None)))
        .order_by((Bonus.status == BonusStatus.paid).desc(), Bonus.pay_claimed_at, Bonus.id)).all()
    matched = set()
    for bonus_id, cents in ours:
        if left[cents] > 0:
            left[cents] -= 1
            matched.add(bonus_id)
    return matched


def payment_shown(session: Session, bonus: Bonus, payments: list[Any]) -> bool:
    """Whether a submission's ``bonus_payments`` hold this bonus's own payment (``matched_bonuses``)."""
    return bonus.id in matched_bonuses(session, bonus.assignment_id, payments)


def _accepted(session: Session, bonus_ids: list[int], bulk: dict[str, Any], batch_id: int, study_id: str) -> None:
    """Record, durably and at once, that Prolific accepted a bulk's pay call (it pays within minutes): such
    a bonus is never released for another payment, only settled."""
    with Session(session.get_bind()) as own:
        own.execute(update(Bonus).where(col(Bonus.id).in_(bonus_ids), Bonus.external_id == bulk["id"])
                    .values(pay_accepted_at=utcnow()))
        events.record(own, "prolific_bonus_sent", "provider", batch_id=batch_id, bonus_ids=bonus_ids,
                      bulk_id=bulk["id"], study_id=study_id, total_cents=bulk["total_amount"],
                      amount_cents=bulk["amount"], fees_cents=bulk["fees"], vat_cents=bulk.get("vat") or 0)
        own.commit()


def _note_unanswered(session: Session, bonus_ids: list[int], bulk_id: str, detail: str) -> None:
    """Record, durably, that a claimed bulk's pay call failed in a way that does not say whether it paid."""
    with Session(session.get_bind()) as own:
        events.record(own, "prolific_bonus_pay_unanswered", "provider", bonus_ids=bonus_ids, bulk_id=bulk_id,
                      detail=detail[:300])
        own.commit()


def _release(session: Session, bonus_ids: list[int], bulk_id: str) -> None:
    """Undo a claim whose pay call certainly did not reach Prolific or was refused."""
    with Session(session.get_bind()) as own:
        own.execute(update(Bonus).where(col(Bonus.id).in_(bonus_ids), Bonus.status == BonusStatus.pending,
                                        Bonus.external_id == bulk_id)
                    .values(pay_claimed_at=None, external_id=None))
        own.commit()


def current_onboarding(session: Session, role: str, stage: int = stages.SINGLE_TASK) -> Optional[ProlificOnboarding]:
    """The role's current onboarding study (of ``stage``): the one not replaced."""
    return session.exec(select(ProlificOnboarding).where(ProlificOnboarding.role == role,
                                                         ProlificOnboarding.stage == stage,
                                                         col(ProlificOnboarding.replaced_at).is_(None))).first()


# An onboarding study made before its terms were stored: a real study (test ones needed a setting turned on).
_REAL = OnboardingTerms(test=False, public_url="")


def _onboarding_terms(row: ProlificOnboarding) -> OnboardingTerms:
    return OnboardingTerms.from_json(row.terms) or _REAL


def _roles_beside(role: str) -> list[str]:
    """The roles of the protocol ``role`` belongs to (a participant holds one of them)."""
    return next((list(p.roles) for p in PROTOCOLS.values() if role in p.roles), [Role.student, Role.teacher])


def _onboarding_texts(role: str, stage: int) -> tuple[str, str]:
    """The onboarding study's title and description: the role's quiz, or a STAR stage's."""
    if not stages.has_stages(role):
        quiz = onboarding.quiz_for(role)
        return quiz.title, quiz.intro
    found = stages.stage_for(role, stage)
    return found.title, (f"A short tutorial and a {len(found.questions)}-question quiz (at most "
                         f"{found.max_hints} hints); passing unlocks {found.unlocks}.")


def _stage_of_batch(session: Session, batch: Batch) -> int:
    """The STAR stage every dialog of the batch needs: 2 when all are multi-task (their turn studies then
    admit only stage 2's group), else 1."""
    if batch.protocol != "star":
        return stages.SINGLE_TASK
    single = session.exec(select(Conversation.id).where(
        Conversation.batch_id == batch.id, ~stages.multi_task(Conversation.scenario)).limit(1)).first()
    return stages.SINGLE_TASK if single is not None else stages.MULTI_TASK


def _stamp(moment: datetime) -> str:
    """A row's creation time in an internal name: to the microsecond, so two databases never share it."""
    return moment.strftime("%Y%m%dT%H%M%S%f")


def _study_row(session: Session, batch_id: int, role: str) -> Optional[ProlificStudy]:
    return session.exec(select(ProlificStudy).where(ProlificStudy.batch_id == batch_id,
                                                    ProlificStudy.role == role)).first()


def _paused_by_us(session: Session, row: ProlificStudy) -> None:
    """Record, committed at once (before the pauser counts the waiting turns again), that turkflow paused the
    study; the caller's copy of the row says the same."""
    moment = utcnow()
    with Session(session.get_bind()) as own:
        own.execute(update(ProlificStudy).where(ProlificStudy.id == row.id).values(paused_at=moment))
        own.commit()
    set_committed_value(row, "paused_at", moment)


def _paused_now(session: Session, row_id: int) -> Optional[datetime]:
    """When turkflow paused the study, as committed now (outside the caller's snapshot)."""
    with Session(session.get_bind()) as fresh:
        return fresh.exec(select(ProlificStudy.paused_at).where(ProlificStudy.id == row_id)).one()


def _end_study(session: Session, row_id: int) -> None:
    row = session.get(ProlificStudy, row_id)
    if row.ended_at is None:
        row.ended_at = utcnow()
        session.add(row)
        events.record(session, "prolific_study_stopped", "provider", batch_id=row.batch_id, role=row.role,
                      study_id=row.study_id)


