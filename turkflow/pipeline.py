"""What happens after a submission, as plain functions the Celery tasks call.

Each step runs in its own short transaction so the next turn's HIT opens as soon as possible and a slow
provider call never holds a database lock. Every step is safe to run twice, and nothing depends on a message
arriving: what a lost message skipped is found from the database by ``reconcile``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Callable, Optional

from sqlalchemy import bindparam, update
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.config import Settings
from turkflow.db import savepoint, session_scope
from turkflow.agents import judges as agent_judges, pairwise, registry as agent_registry, turns as agent_turns
from turkflow.errors import AgentError, Conflict, InvalidInput, ModelMissing, ProviderError
from turkflow.hits import lifecycle
from turkflow.hits.provider import CrowdProvider, HitCheck, Providers
from turkflow.models import (AgentTurnStatus, Assignment, Batch, Bonus, BonusStatus, Conversation, Event, Hit, HitStatus,
                             Rating, Turn, TurnStatus, Worker, WorkerKind, WorkerStatus, utcnow)
from turkflow.protocols import registry, surveys
from turkflow.quality import checks, monitor, reliability, review, stall

log = logging.getLogger("turkflow.pipeline")


@dataclass
class AfterSubmission:
    opened_hit_id: Optional[int] = None
    blocked_worker_id: Optional[int] = None
    bonus_ids: list[int] = field(default_factory=list)  # to pay through their platform (``pay_bonus``)
    flags: list[str] = field(default_factory=list)
    reviewed: bool = False  # this call reviewed the turn (False: it had been reviewed already)


def open_next_turn(settings: Settings, providers: Providers, conversation_id: int) -> Optional[int]:
    """Advance the conversation and publish the new turn's HIT; returns the HIT id if one was opened."""
    with session_scope(settings.database_url) as session:
        opened = _advance(session, providers, conversation_id)
    return _publish_opened(settings, providers, opened)


def _advance(session: Session, providers: Providers, conversation_id: int) -> Optional[tuple[int, Optional[str]]]:
    """Open the conversation's next turn: (HIT id, provider still to publish on, or None when the HIT is
    published already). A provider that calls no platform publishes in this transaction, so the local
    crowd's next turn is one commit away from its submission; a platform is called only after commit."""
    return _to_publish(lifecycle.open_next_turn(session, conversation_id, providers))


def _to_publish(opened: Optional[lifecycle.Opened]) -> Optional[tuple[int, Optional[str]]]:
    if opened is None:
        return None
    return opened.hit_id, None if opened.published else opened.provider


def _publish_opened(settings: Settings, providers: Providers, opened: Optional[tuple[int, Optional[str]]]
                    ) -> Optional[int]:
    if opened is None:
        return None
    hit_id, provider_name = opened
    if provider_name is not None:
        publish(settings, providers, hit_id, provider_name)
    return hit_id


def publish(settings: Settings, providers: Providers, hit_id: int, provider_name: str) -> None:
    with session_scope(settings.database_url) as session:
        lifecycle.publish_hit(session, providers.get(provider_name), hit_id)


def after_submission(settings: Settings, providers: Providers, turn_id: int) -> AfterSubmission:
    """Open the next turn first (workers are waiting for it), then let the quality monitor judge, then
    flag the turn's content for review."""
    opened = open_after(settings, providers, turn_id)
    result = review_submission(settings, providers, turn_id)
    result.opened_hit_id = opened
    return result


def open_after(settings: Settings, providers: Providers, turn_id: int) -> Optional[int]:
    """Open the turn that follows a submitted one; the Celery task does only this before queueing the
    review, so in a burst of submissions every next turn opens before any judging starts."""
    opened = opening_after(settings, providers, turn_id)
    return opened.hit_id if opened is not None else None


def opening_after(settings: Settings, providers: Providers, turn_id: int) -> Optional[lifecycle.Opened]:
    """``open_after``, telling what opened: an agent's turn (``Opened.provider`` is ``AGENT``) is for the caller
    to send to the agents queue (``answer_agent_turn``)."""
    with session_scope(settings.database_url) as session:
        opened = lifecycle.open_turn_after(session, turn_id, providers)
    _publish_opened(settings, providers, _to_publish(opened))
    return opened


# A review takes at most this many waiting turns, and on SQLite writes them this many to a transaction: there
# a transaction holds the one write lock while it judges its turns (about 5 ms a turn), and a submission or an
# opening waits that long. PostgreSQL writes them in one (no lock of its own holds the others back).
REVIEW_BATCH = 16
REVIEW_TRANSACTION = 4

_WAITING = (  # turns waiting for their review, oldest first (the partial index ix_turn_unreviewed)
    select(Turn.id).where(Turn.status == TurnStatus.submitted, col(Turn.reviewed_at).is_(None))
    .order_by(Turn.submitted_at).limit(bindparam("limit"))
)
_REVIEWING = (  # the turns with what their checks and judges read of their conversation and batch, and their writer's kind
    select(Turn, Conversation.batch_id, Conversation.task_id, Batch.protocol, Batch.typed_block, Batch.provider,
           Worker.kind, Batch.agents)
    .join(Conversation, Conversation.id == Turn.conversation_id).join(Batch, Batch.id == Conversation.batch_id)
    .join(Worker, Worker.id == Turn.worker_id)
    .where(col(Turn.id).in_(bindparam("turns", expanding=True))).order_by(Turn.id)
)
_CLAIM_REVIEWS = (
    update(Turn).where(col(Turn.id).in_(bindparam("turns", expanding=True)), Turn.status == TurnStatus.submitted,
                       col(Turn.reviewed_at).is_(None))
    .values(reviewed_at=bindparam("now")).returning(Turn.id).execution_options(synchronize_session=False)
)
# The ratings the monitor judges: a person's of a person's turn. An agent is never judged for pay or blocked, and
# a model's rating of a person is kept with the dataset but decides nothing about their pay or their block.
_AUTHOR, _RATER = Worker.__table__.alias("author"), Worker.__table__.alias("rater")
_RATINGS_BY = (
    select(Rating.rater_turn_id, Rating.id).join(_AUTHOR, _AUTHOR.c.id == Rating.author_id)
    .join(_RATER, _RATER.c.id == Rating.rater_id)
    .where(col(Rating.rater_turn_id).in_(bindparam("turns", expanding=True)),
           _AUTHOR.c.kind == WorkerKind.person, _RATER.c.kind == WorkerKind.person))


@dataclass
class Reviews:
    """What one review of waiting turns did: each turn it reviewed (a turn reviewed already is not among
    them), and whether more turns wait than it took."""

    turns: dict[int, AfterSubmission] = field(default_factory=dict)
    more: bool = False

    @property
    def bonus_ids(self) -> list[int]:
        return [bonus_id for turn in self.turns.values() for bonus_id in turn.bonus_ids]


def review_submission(settings: Settings, providers: Providers, turn_id: int) -> AfterSubmission:
    """Review one submitted turn (``review_turns``); a turn reviewed already is left alone, and one whose
    checks' spaCy pipeline is not installed waits for it (``reviews_wait_for_model``)."""
    if reviews_wait_for_model(settings):
        return AfterSubmission()
    return review_turns(settings, providers, [turn_id]).turns.get(turn_id, AfterSubmission())


def review_waiting(settings: Settings, providers: Providers, turn_id: Optional[int] = None) -> Reviews:
    """Review ``turn_id`` with every other turn waiting for its review (at most ``REVIEW_BATCH``, oldest
    first), so a burst of submissions costs one message, not one each; on SQLite ``REVIEW_TRANSACTION`` turns
    a transaction, so the writers waiting for its lock wait for a few turns' judging, not the burst's.

    A transaction that raises is done again turn by turn, each in its own transaction, so one turn whose
    review trips holds up no other (the reconciler's rule); the error of ``turn_id`` itself is raised after,
    for its message to be retried. Nothing is lost if the process dies half-way: the turns not committed are
    still waiting, for the next review or the reconciler. Without the content checks' spaCy pipeline every
    turn waits (``reviews_wait_for_model``), and nothing is raised: no message is retried for it."""
    if reviews_wait_for_model(settings):
        return Reviews()
    with session_scope(settings.database_url) as session:
        waiting = list(session.execute(_WAITING, {"limit": REVIEW_BATCH + 1}).scalars())
    turn_ids = ([turn_id] if turn_id is not None else []) + [t for t in waiting if t != turn_id]
    reviews = Reviews(more=len(turn_ids) > REVIEW_BATCH)
    turn_ids, failure = turn_ids[:REVIEW_BATCH], None
    step = REVIEW_TRANSACTION if settings.database_url.startswith("sqlite") else REVIEW_BATCH
    for start in range(0, len(turn_ids), step):
        part = turn_ids[start:start + step]
        if len(part) > 1:
            try:
                reviews.turns.update(review_turns(settings, providers, part).turns)
                continue
            except Exception:  # noqa: BLE001 - one turn's trouble must not stop the others' reviews
                log.warning("a review of %s turns failed; reviewing them one by one", len(part), exc_info=True)
        for one in part:  # a part of one turn is reviewed once, here
            try:
                reviews.turns.update(review_turns(settings, providers, [one]).turns)
            except Exception as exc:  # noqa: BLE001
                if len(turn_ids) == 1:
                    raise
                log.error("the review of turn %s failed (%s: %s)", one, type(exc).__name__, exc)
                failure = exc if one == turn_id else failure
    if failure is not None:
        raise failure
    return reviews


def reviews_wait_for_model(settings: Settings) -> bool:
    """Whether reviews must wait because the content checks' spaCy pipeline is not installed. The turns stay
    unreviewed, and the first review or reconciler sweep after it is installed reviews them; meanwhile the
    first review says so in one log line and a ``model_missing`` event (``checks.tell_model_missing``)."""
    try:
        checks.english(settings.spacy_model)
    except ModelMissing as missing:
        with session_scope(settings.database_url) as session:
            told = checks.tell_model_missing(session, missing, settings.spacy_model, utcnow())
        if told:
            log.warning("reviews wait until the model is installed: %s", missing)
        return True
    return False


def review_turns(settings: Settings, providers: Providers, turn_ids: list[int]) -> Reviews:
    """Flag the submissions' content and judge their writers and the authors of the turns they rate, each
    turn once, in one transaction.

    The Celery task and the reconciler's sweep may both get here for one turn (a redelivered message, a slow
    task): a turn is claimed as reviewed only if no one did first, and one claimed by another review is left
    to it, so flags, blocks and bonuses never double. The content checks only read, and run before the
    claim, so on SQLite the transaction takes its write lock only when it has the flags to write. A block is
    recorded in the worker's status with the decision; the platform is told after commit
    (``carry_out_status``), so no platform call holds the decision's locks, and a failed one loses nothing:
    the status is the durable intent the reconciler sweeps.
    """
    reviews, blocked = Reviews(), []
    if not turn_ids:
        return reviews
    policy, model = checks.CheckPolicy.of(settings), reliability.Model.of(settings)
    with session_scope(settings.database_url) as session:
        rows = session.execute(_REVIEWING, {"turns": turn_ids}).all()
        documents: dict[int, str] = {}
        found = {}
        with_agents = []  # turns of batches where agents play: their ratings may judge a judge (agents.judges)
        for turn, batch_id, task_id, protocol, typed_block, provider, kind, agents in rows:
            if turn.status == TurnStatus.submitted and turn.reviewed_at is None:
                place = checks.Place(batch_id, task_id, protocol)
                found[turn.id] = (turn, place, typed_block if kind == WorkerKind.person else 0,
                                  providers.get(provider), checks.turn_flags(session, turn, policy, place, documents),
                                  kind == WorkerKind.agent)
                if agents and kind == WorkerKind.person:
                    with_agents.append(turn.id)
        if not found:
            return reviews
        ratings = dict(session.execute(_RATINGS_BY, {"turns": list(found)}).all())
        claimed = set(session.execute(_CLAIM_REVIEWS, {"turns": list(found), "now": utcnow()}).scalars())
        for turn_id, (turn, place, typed_block, provider, flags, by_agent) in found.items():
            if turn_id not in claimed:
                continue  # another review has it
            result = reviews.turns[turn_id] = AfterSubmission(reviewed=True)
            result.flags = checks.record_flags(session, turn, flags, place)
            # The monitor's rule for machine-written turns reads only when the batch's policy has one.
            if typed_block and monitor.judge_writing(session, turn, settings.typed_keys_per_char):
                blocked.append(turn.worker_id)
            if registry.logged(place.protocol) and not by_agent:
                blocked += _judge(session, turn, "judged_turn", session, turn, protocol=place.protocol)
            evaluation = (monitor.evaluate_rating(session, ratings[turn_id], model)
                          if turn_id in ratings else None)
            events.record(session, "turn_reviewed", "system", conversation_id=turn.conversation_id,
                          turn_id=turn_id, worker_id=turn.worker_id, flags=result.flags)
            if evaluation is not None and evaluation.blocked:
                result.blocked_worker_id = evaluation.decision.worker_id
                blocked.append(result.blocked_worker_id)
            if evaluation is not None and evaluation.bonus and provider.calls_platform:
                result.bonus_ids.append(evaluation.bonus.id)
            elif evaluation is not None and evaluation.bonus:
                # A provider that calls no platform pays by recording (as it publishes a HIT in the opening's
                # transaction): paid with its decision, with no message of its own to the pay task.
                _pay(session, provider, evaluation.bonus)
        judging = [turn_id for turn_id in with_agents if turn_id in claimed]
        if judging:
            blocked += _record_signals(session, agent_judges.rating_signals(session, judging))
    _carry_out_blocks(settings, providers, blocked)
    return reviews


def _carry_out_blocks(settings: Settings, providers: Providers, blocked_ids: list[int]) -> None:
    for blocked_id in blocked_ids:
        try:
            carry_out_status(settings, providers, blocked_id)
        except ProviderError as exc:  # recorded already: the reconciler tells the platform when it answers
            log.warning("worker %s is blocked here; their platform could not be told yet (%s)", blocked_id, exc)


def _judge(session: Session, turn: Turn, part: str, *args: Any, protocol: Optional[str] = None) -> list[int]:
    """Pass what the turn's protocol says of its writers (its dialog module's ``part``, if it has one: STAR's
    ``judged_turn`` and ``judged_survey``) to the monitor as judged signals; the workers this blocked.
    ``protocol``: the turn's batch's, if read already."""
    if protocol is None:
        protocol = session.exec(select(Batch.protocol).join(Conversation, Conversation.batch_id == Batch.id)
                                .where(Conversation.id == turn.conversation_id)).one()
    judge = getattr(registry.parts(protocol), part, None) if registry.logged(protocol) else None
    return _record_signals(session, judge(*args) if judge else [])


def _record_signals(session: Session, signals: Any) -> list[int]:
    """Record judged signals (``turn``, ``ok``, ``kind``, ``evidence``) with the monitor; the workers blocked.
    An agent's turns are judged by the agents' report, never by the monitor (agents are never blocked)."""
    return [signal.turn.worker_id for signal in signals
            if session.get(Worker, signal.turn.worker_id).kind == WorkerKind.person
            and monitor.judge_signal(session, signal.turn, ok=signal.ok, kind=signal.kind, evidence=signal.evidence)]


def review_gold(settings: Settings, providers: Providers, unit_id: int) -> list[int]:
    """Judge every annotation of a turn the requester has just marked gold against it (the annotate protocol's
    ``judged_gold``; an annotation is judged against gold once); returns who was blocked."""
    with session_scope(settings.database_url) as session:
        blocked = _record_signals(session, registry.parts("annotate").judged_gold(session, unit_id))
    _carry_out_blocks(settings, providers, blocked)
    return blocked


def review_survey(settings: Settings, providers: Providers, conversation_id: int, worker_id: int) -> list[int]:
    """Judge the writers of the other role by a worker's end-of-dialog answers, once they are stored (STAR), and
    the worker by them where an agent played the other role (``agents.judges``: a claim against what is known),
    and record that they were (``surveys.JUDGED``), so the reconciler judges only answers whose message was
    lost; running it again records nothing. Returns who was blocked."""
    with session_scope(settings.database_url) as session:
        if not surveys.to_judge(session, conversation_id, worker_id):
            return []
        last = session.exec(select(Turn).where(Turn.conversation_id == conversation_id)
                            .order_by(col(Turn.index).desc()).limit(1)).first()
        blocked = _judge(session, last, "judged_survey", session, conversation_id, worker_id)
        blocked += _record_signals(session, agent_judges.survey_signals(session, conversation_id, worker_id))
        events.record(session, surveys.JUDGED, "system", conversation_id=conversation_id, worker_id=worker_id,
                      blocked=blocked)
    _carry_out_blocks(settings, providers, blocked)
    return blocked


def carry_out_status(settings: Settings, providers: Providers, worker_id: int) -> bool:
    """Make the worker's crowd platform reflect their status (a block list, a qualification, a worker
    block, or none of them) and record that it does; True once it does, False if the status changed
    meanwhile (the next call carries out the new one).

    Called after a status change commits: by the review that blocked, by the dashboard and the CLI right
    after a person's decision, and by the reconciler for every worker still out of step. The platform is
    asked while this transaction has only read, and the outcome written in a new one (on SQLite a read
    transaction that turns into a write fails if another write came between), so no lock is held while it
    answers; every platform's calls here are safe to repeat."""
    with session_scope(settings.database_url) as session:
        worker = session.get(Worker, worker_id)
        target = WorkerStatus(worker.status)
        if target == worker.platform_status:
            return True
        provider = providers.get(review.provider_name(session, worker, settings.provider))
        if target == WorkerStatus.active:
            provider.unblock(session, worker)
        elif target == WorkerStatus.blocked:
            provider.block_permanently(session, worker, reason=review.PERMANENT_BLOCK)
        else:
            provider.soft_block(session, worker, reason="low ratings")
    with session_scope(settings.database_url) as session:
        return session.execute(states.platform_follows(worker_id, target)).rowcount == 1


def pay_bonus(settings: Settings, providers: Providers, bonus_id: int) -> bool:
    """Pay a recorded bonus through its batch's provider, with any others the provider pays in the same
    call (Prolific pays a study's pending bonuses in bulk); True once it is paid (now or before)."""
    with session_scope(settings.database_url) as session:
        bonus = session.get(Bonus, bonus_id)
        if bonus.status == BonusStatus.paid:
            return True
        turn = session.get(Turn, bonus.turn_id)
        batch = session.get(Batch, session.get(Conversation, turn.conversation_id).batch_id)
        _pay(session, providers.get(batch.provider), bonus)
    return True


_WORKER_ROW = select(Worker.__table__).where(Worker.__table__.c.id == bindparam("id"))
_ASSIGNMENT_ROW = select(Assignment.__table__).where(Assignment.__table__.c.id == bindparam("id"))


def _pay(session: Session, provider: CrowdProvider, bonus: Bonus) -> None:
    """Pay a bonus through ``provider`` and record it paid, with any others the provider paid in the call. A
    provider that calls no platform only records (it pays in the review's transaction): it is given the
    worker and the assignment as plain rows, which it only reads, as the opening gives it the HIT it
    publishes; loading them as objects was a sixth of a review's CPU in process."""
    if provider.calls_platform:
        worker, assignment = session.get(Worker, bonus.worker_id), session.get(Assignment, bonus.assignment_id)
    else:
        connection = session.connection()
        worker = connection.execute(_WORKER_ROW, {"id": bonus.worker_id}).one()
        assignment = connection.execute(_ASSIGNMENT_ROW, {"id": bonus.assignment_id}).one()
    for paid_id in provider.pay_bonus(session, bonus, worker, assignment):
        _record_paid(session, paid_id)


_PAID = (states.update_to(Bonus, BonusStatus.paid).where(Bonus.id == bindparam("bonus"))
         .values(paid_at=bindparam("now")).returning(Bonus.turn_id, Bonus.worker_id, Bonus.amount_cents))
_PLACE_OF_TURN = (select(Turn.conversation_id, Conversation.batch_id)
                  .join(Conversation, Conversation.id == Turn.conversation_id).where(Turn.id == bindparam("turn")))


def _record_paid(session: Session, bonus_id: int) -> None:
    """The task and the reconciler's sweep may pay the same bonus at once; the provider never pays twice (a
    request token, or Prolific's claim), and only the run that moves the bonus from pending records it."""
    session.flush()  # then plain statements on its connection: the ORM's handling cost more than they do
    connection = session.connection()
    paid = connection.execute(_PAID, {"bonus": bonus_id, "now": utcnow()}).first()
    if paid is None:
        return
    place = connection.execute(_PLACE_OF_TURN, {"turn": paid.turn_id}).one()
    events.record(session, "bonus_paid", "provider", batch_id=place.batch_id,
                  conversation_id=place.conversation_id, turn_id=paid.turn_id, worker_id=paid.worker_id,
                  bonus_id=bonus_id, amount_cents=paid.amount_cents)


@dataclass
class Repairs:
    leases_released: int = 0
    conversations_advanced: list[int] = field(default_factory=list)
    hits_published: list[int] = field(default_factory=list)
    turns_reviewed: list[int] = field(default_factory=list)  # submitted turns whose review message was lost
    unpaid_bonuses: list[int] = field(default_factory=list)
    roles_stalled: list[tuple[int, str]] = field(default_factory=list)  # (batch, role) newly stalled
    assignments_approved: list[int] = field(default_factory=list)  # local turns whose review delay passed
    platform_statuses: list[int] = field(default_factory=list)  # workers whose block their platform now has
    surveys_judged: list[tuple[int, int]] = field(default_factory=list)  # (conversation, worker): message lost
    failed: list[tuple[str, int]] = field(default_factory=list)  # (step, item id) of repairs that raised


def reconcile(settings: Settings, providers: Providers, now: Optional[datetime] = None, *,
              stop_on: tuple[type[BaseException], ...] = ()) -> Repairs:
    """Repair what crashes and lost messages left: stale leases, stalled conversations, unpublished HITs,
    unreviewed turns, end-of-dialog answers nobody judged; and approve the local turns whose review delay has passed (nothing else approves them).

    Each item's repair is a unit of its own, in its own transactions: one that raises (a turn whose review
    trips on its row, a batch whose next turn cannot be opened) is logged, recorded once as a
    ``repair_failed`` event and tried again next run, while the sweep goes on with the rest; otherwise one
    bad turn would hold up every later repair, and the stall sweep, on every run. ``stop_on`` names the
    exceptions that end the whole sweep instead (the Celery task's soft time limit).
    """
    repairs = Repairs()
    now = now or utcnow()
    grace = now - timedelta(seconds=settings.stuck_after_seconds)
    # A lost opening is judged by its submitted turn's age, not by how long the conversation was idle: a turn
    # submitted reopen_after_seconds ago whose next turn is not open lost its message (the task takes
    # well under a second), while a conversation waiting for a worker has an open turn and is not stalled.
    reopen = now - timedelta(seconds=settings.reopen_after_seconds)
    review_before = now - timedelta(seconds=settings.review_after_seconds)
    with session_scope(settings.database_url) as session:
        repairs.leases_released = lifecycle.release_expired_leases(session, now)
        stalled = lifecycle.stalled_conversations(session, reopen)
        pending = [session.get(Hit, hit_id) for hit_id in lifecycle.unpublished_hits(session, grace)]
        unreviewed = lifecycle.unreviewed_turns(session, review_before)
        unjudged = surveys.unjudged(session, review_before)
        out_of_step = monitor.workers_out_of_step(session)
        repairs.unpaid_bonuses = monitor.unpaid_bonuses(session, grace)
        approvals = [(assignment_id, session.get(Hit, session.get(Assignment, assignment_id).hit_id).turn_id)
                     for assignment_id in providers.get("local").approvals_due(session, settings, now)]
    item = _Unit(settings, stop_on, repairs)
    for conversation_id in stalled:
        done, hit_id = item("opening", conversation_id,
                            partial(open_next_turn, settings, providers, conversation_id),
                            conversation_id=conversation_id)
        if done and hit_id is not None:
            repairs.conversations_advanced.append(conversation_id)
    for hit in pending:
        if item("publishing", hit.id, partial(publish, settings, providers, hit.id, hit.provider),
                turn_id=hit.turn_id)[0]:
            repairs.hits_published.append(hit.id)
    if unreviewed and reviews_wait_for_model(settings):
        unreviewed = []  # they wait for the model, not failed repairs to log and record each sweep
    for turn_id in unreviewed:
        done, outcome = item("review", turn_id, partial(review_submission, settings, providers, turn_id),
                             turn_id=turn_id)
        if done and outcome.reviewed:
            repairs.turns_reviewed.append(turn_id)
        if done:
            repairs.unpaid_bonuses.extend(outcome.bonus_ids)
    for conversation_id, worker_id in unjudged:
        if item("survey review", conversation_id,
                partial(review_survey, settings, providers, conversation_id, worker_id),
                conversation_id=conversation_id, worker_id=worker_id)[0]:
            repairs.surveys_judged.append((conversation_id, worker_id))
    for assignment_id, turn_id in approvals:
        if item("approval", assignment_id, partial(approve, settings, providers, assignment_id),
                turn_id=turn_id)[0]:
            repairs.assignments_approved.append(assignment_id)
    for worker_id in out_of_step:
        if item("platform status", worker_id, partial(carry_out_status, settings, providers, worker_id),
                worker_id=worker_id)[0]:
            repairs.platform_statuses.append(worker_id)
    with session_scope(settings.database_url) as session:
        changes = stall.sweep(session, now, timedelta(seconds=settings.stall_after_seconds))
        repairs.roles_stalled = [(s.batch_id, s.role) for s in changes.stalled]
    return repairs


class _Unit:
    """Runs one item's repair for ``reconcile``: returns ``(True, its result)``, or ``(False, None)`` after
    logging and recording a failure."""

    def __init__(self, settings: Settings, stop_on: tuple[type[BaseException], ...], repairs: Repairs):
        self.settings, self.stop_on, self.repairs = settings, stop_on, repairs

    def __call__(self, step: str, item_id: int, run: Callable[[], Any], *, conversation_id: Optional[int] = None,
                 turn_id: Optional[int] = None, worker_id: Optional[int] = None) -> tuple[bool, Any]:
        try:
            return True, run()
        except self.stop_on:
            raise
        except Exception as exc:  # noqa: BLE001 - one item's trouble must not stop the other repairs
            self.repairs.failed.append((step, item_id))
            self.failed(step, item_id, exc, conversation_id, turn_id, worker_id)
            return False, None

    def failed(self, step: str, item_id: int, exc: Exception, conversation_id: Optional[int],
               turn_id: Optional[int], worker_id: Optional[int]) -> None:
        """Log the failure, and record it as an event the first time this item's step fails: the reconciler
        tries again every run, and an item that keeps failing must not fill the event log."""
        what = f"conversation {conversation_id}" if turn_id is None else f"turn {turn_id}"
        if worker_id is not None:
            what = f"worker {worker_id}"
        if step in ("publishing", "approval"):
            what = f"{'HIT' if step == 'publishing' else 'assignment'} {item_id} ({what})"
        first = False
        try:
            with session_scope(self.settings.database_url) as session:
                if worker_id is not None:
                    same = Event.worker_id == worker_id
                elif turn_id is not None:
                    turn = session.get(Turn, turn_id)
                    conversation_id = turn.conversation_id if turn else None
                    same = Event.turn_id == turn_id
                else:
                    same = Event.conversation_id == conversation_id
                earlier = session.exec(select(Event.data).where(Event.kind == "repair_failed", same)).all()
                first = not any(data.get("step") == step and data.get("item_id") == item_id
                                for data in earlier)
                if first:
                    events.record(session, "repair_failed", "system", conversation_id=conversation_id,
                                  turn_id=turn_id, worker_id=worker_id, step=step, item_id=item_id,
                                  error=f"{type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001 - the database may be what failed; the log below still says what
            log.exception("reconciler: could not record that the %s of %s failed", step, what)
        log.error("reconciler: the %s of %s failed; the other repairs go on (%s: %s)", step, what,
                  type(exc).__name__, exc, exc_info=exc if first else None)


# ---- platforms whose own records are the truth about work done there (MTurk) ------------------------------


@dataclass
class PlatformRepairs:
    submissions_stored: list[int] = field(default_factory=list)  # turn ids
    assignments_settled: list[int] = field(default_factory=list)
    assignments_abandoned: list[int] = field(default_factory=list)
    hits_reopened: list[int] = field(default_factory=list)  # ids of the new HIT attempts, to publish
    unreadable: list[int] = field(default_factory=list)  # HITs whose submission there could not be stored
    failed: list[int] = field(default_factory=list)  # HITs the platform could not be asked about this round
    approvals_due: list[int] = field(default_factory=list)  # assignment ids for the approve task

    def __bool__(self) -> bool:
        return any((self.submissions_stored, self.assignments_settled, self.assignments_abandoned,
                    self.hits_reopened, self.unreadable, self.failed))


def reconcile_platform(settings: Settings, providers: Providers, name: str,
                       now: Optional[datetime] = None) -> PlatformRepairs:
    """Compare every open HIT of one platform with the platform's records, one HIT per transaction, and list
    what the caller queues: the stored submissions go to the same task a live submission goes to (open the
    next turn, then review), the reopened turns' HITs to the publish task, the due approvals to the approve
    task. Nothing after-submission runs here: one path for every submission, and a lost message is found
    again by ``reconcile`` (a conversation whose next turn is not open, a turn not reviewed, a HIT not
    published)."""
    now = now or utcnow()
    provider = providers.get(name)
    repairs = PlatformRepairs()
    with session_scope(settings.database_url) as session:
        hit_ids = provider.hits_to_check(session)
        repairs.approvals_due = provider.approvals_due(session, settings, now)
    for hit_id in hit_ids:
        try:
            with session_scope(settings.database_url) as session:
                hit = session.get(Hit, hit_id)
                found = provider.check_hit(session, hit, now) if hit.status == HitStatus.open else HitCheck()
        except Exception as exc:  # noqa: BLE001 - one HIT's trouble (a throttle) must not stop the round
            log.warning("%s reconciler: HIT %s skipped this round (%s)", name, hit_id, exc)
            repairs.failed.append(hit_id)
            continue
        repairs.assignments_settled += found.settled
        repairs.assignments_abandoned += found.abandoned
        if found.unreadable:
            repairs.unreadable.append(hit_id)
        if found.stored_turn_id is not None:
            repairs.submissions_stored.append(found.stored_turn_id)
        if found.reopened_hit_id is not None:
            repairs.hits_reopened.append(found.reopened_hit_id)
    return repairs


def approve(settings: Settings, providers: Providers, assignment_id: int) -> None:
    """Approve one submitted assignment through its platform (idempotent; a platform that decided already
    settles our record with its verdict)."""
    with session_scope(settings.database_url) as session:
        assignment = session.get(Assignment, assignment_id)
        providers.get(session.get(Hit, assignment.hit_id).provider).approve(session, assignment)


def expire(settings: Settings, providers: Providers, hit_id: int) -> None:
    """End one HIT at its platform now (its batch was cancelled, or its turn is written)."""
    with session_scope(settings.database_url) as session:
        hit = session.get(Hit, hit_id)
        providers.get(hit.provider).expire(session, hit)


# ---- agents in the loop (turkflow.agents) ------------------------------------------------------------------


@dataclass
class AgentAnswer:
    """What one run of an agent's turn did: how it ended (or that it is due again), the submitted turn and the
    turn opened after it in the same transaction (the caller sends an agent's to the agents queue and queues the
    review, as after a person's submit), and a HIT handed to people, already published."""

    status: Optional[str] = None  # None: nothing to do (not due, or another worker has it)
    submitted_turn_id: Optional[int] = None
    opened: Optional[lifecycle.Opened] = None
    handed_over_hit_id: Optional[int] = None
    reason: Optional[str] = None


def answer_agent_turn(settings: Settings, providers: Providers, turn_id: int) -> AgentAnswer:
    """Ask the agent that plays ``turn_id`` and store its answer through the turn's own submit (``agents.turns``),
    opening the turn after it: each step in its own short transaction, the agent asked with none open, so a slow
    model holds no lock.

    A failure (timeout, refused connection, 429, 5xx, an answer the protocol refuses, a context too long) is
    recorded and the turn is due again after a back-off, for beat's sweep to queue; out of attempts the
    conversation ends with the reason or the turn goes to people. An answer that comes after the conversation
    ended stores nothing. A worker that dies mid-call leaves the turn claimed until its claim lapses; the sweep
    then gives it to another."""
    with session_scope(settings.database_url) as session:
        claimed = agent_turns.claim(session, turn_id)
    if claimed is None:
        return AgentAnswer()
    try:
        player = agent_registry.player(claimed.agent)
    except AgentError as error:
        return _agent_failed(settings, providers, claimed, error, 0)
    steps: list[dict[str, Any]] = []
    for _ in range(agent_turns.MAX_STEPS):
        with session_scope(settings.database_url) as session:
            if not agent_turns.still_open(session, turn_id):
                agent_turns.cancelled(session, claimed, 0)
                return AgentAnswer(status=AgentTurnStatus.cancelled)
            try:
                view = agent_turns.view(session, claimed, steps)
            except InvalidInput as refused:  # an earlier step of this turn the protocol refuses
                session.rollback()
                invalid = AgentError("invalid", refused.message)
            else:
                invalid = None
            session.rollback()  # the earlier steps were taken to show their results; the answer stores them
        if invalid is not None:
            return _agent_failed(settings, providers, claimed, invalid, 0)
        called_at, started = utcnow(), time.monotonic()
        try:
            reply = player.answer(view)
        except AgentError as error:
            return _agent_failed(settings, providers, claimed, error, _ms(started), called_at)
        latency = _ms(started)
        if agent_turns.closes(claimed, reply.answer):
            rival = _rival_answer(settings, claimed, view)
            return _store_agent_answer(settings, providers, claimed, steps, reply, latency, called_at, rival)
        steps.append(reply.answer)
    return _agent_failed(settings, providers, claimed, AgentError(
        "invalid", f"no closing action after {agent_turns.MAX_STEPS} steps"), 0)


def _rival_answer(settings: Settings, claimed: agent_turns.Claim, view: Any) -> Optional[pairwise.Offer]:
    """Per-turn pairwise: the same view asked of the turn's rival agent (``agents.pairwise``), with no
    transaction open; None when the batch does not compare this role's agents turn by turn, or the rival gave
    nothing usable (its call is recorded, and the turn stays its own agent's)."""
    with session_scope(settings.database_url) as session:
        rival = pairwise.rival(session, claimed.turn_id, claimed.agent)
    if rival is None:
        return None
    called_at, started = utcnow(), time.monotonic()
    try:
        return pairwise.Offer(rival, agent_registry.player(rival).answer(view), _ms(started), called_at)
    except AgentError as error:
        with session_scope(settings.database_url) as session:
            pairwise.failed(session, claimed, rival, error, _ms(started), called_at)
        return None


def _store_agent_answer(settings: Settings, providers: Providers, claimed: agent_turns.Claim,
                        steps: list[dict[str, Any]], reply: Any, latency: int, called_at: datetime,
                        rival: Optional[pairwise.Offer] = None) -> AgentAnswer:
    """Store the answer (and a per-turn pairwise rival's) and open the turn after it in one transaction: the
    person whose turn follows waits for one commit, not for this one and then an opening's (on SQLite each a turn
    at the one write lock)."""
    try:
        with session_scope(settings.database_url) as session:
            if not agent_turns.still_open(session, claimed.turn_id):
                agent_turns.cancelled(session, claimed, latency, reply, called_at)
                return AgentAnswer(status=AgentTurnStatus.cancelled)
            ended = agent_turns.store(session, claimed, steps, reply.answer, reply, latency, called_at)
            agent_turns.remember_mode(session, claimed.agent.id, reply.structured)
            if rival is not None and ended.submitted_turn_id is not None:
                pairwise.record(session, claimed, rival)
            opened = _open_in(session, providers, ended.submitted_turn_id)
    except InvalidInput as refused:  # rolled back: the protocol refused the answer as it would a person's
        return _agent_failed(settings, providers, claimed, AgentError(
            "invalid", refused.message, structured=reply.structured), latency, called_at)
    except Conflict:  # rolled back: the turn was written or closed meanwhile
        with session_scope(settings.database_url) as session:
            agent_turns.cancelled(session, claimed, latency, reply, called_at)
        return AgentAnswer(status=AgentTurnStatus.cancelled)
    try:
        _publish_opened(settings, providers, _to_publish(opened))  # a platform's HIT: called after commit
    except ProviderError as exc:
        log.warning("turn %s opened after agent turn %s; its platform is told later (%s)", opened.turn_id,
                    claimed.turn_id, exc)
    return AgentAnswer(status=ended.status, submitted_turn_id=ended.submitted_turn_id, opened=opened)


def _open_in(session: Session, providers: Providers, turn_id: Optional[int]) -> Optional[lifecycle.Opened]:
    """The turn after ``turn_id``, opened in the caller's transaction; an opening that fails is rolled back alone
    (a savepoint), what the caller wrote stays, and the reconciler opens the turn later."""
    if turn_id is None:
        return None
    try:
        with savepoint(session):
            return lifecycle.open_turn_after(session, turn_id, providers)
    except Exception as exc:  # noqa: BLE001 - the answer is stored; the reconciler opens what follows it
        log.warning("turn %s stored; the turn after it is left to the reconciler (%s)", turn_id, exc)
        return None


def _agent_failed(settings: Settings, providers: Providers, claimed: agent_turns.Claim, error: AgentError,
                  latency: int, called_at: Optional[datetime] = None) -> AgentAnswer:
    with session_scope(settings.database_url) as session:
        ended = agent_turns.failed(session, settings, claimed, error, latency, called_at=called_at)
    log.log(logging.INFO if ended.status == AgentTurnStatus.waiting else logging.WARNING,
            "agent %s, turn %s, attempt %s: %s (%s)", claimed.agent.name, claimed.turn_id, claimed.attempt,
            error.outcome, ended.status)
    if ended.hit_id is not None:  # handed to people: published on the batch's platform now (else the reconciler)
        try:
            publish(settings, providers, ended.hit_id, ended.provider)
        except ProviderError as exc:
            log.warning("turn %s handed to people; its HIT %s is published later (%s)", claimed.turn_id,
                        ended.hit_id, exc)
    return AgentAnswer(status=ended.status, handed_over_hit_id=ended.hit_id, reason=f"{error.outcome}: {error.message}")


def sweep_agent_turns(settings: Settings) -> list[int]:
    """The agent turns due now (beat's sweep): the caller queues each for the agents queue."""
    with session_scope(settings.database_url) as session:
        return agent_turns.sweep(session, queued_for=timedelta(seconds=max(30, 5 * settings.agent_sweep_seconds)))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
