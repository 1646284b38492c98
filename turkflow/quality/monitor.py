"""The quality monitor: every rating updates a judgement of the worker who wrote the rated turn.

For that author take the k most recent ratings their turns received (since their last unblock). If the
mean relevance or the mean usefulness is below p, block them temporarily; if both are above the bonus
threshold, the rated turn earns a bonus, once. A window shorter than k decides nothing: one unlucky rating
from a careless rater must not block an honest newcomer. The window is read through the
``(author_id, id)`` index, so the cost per rating does not grow with history.

That is the paper's rule and the default. A batch may also pool the two means (block when their average
is below p) and put workers on probation: (k, p) judge a worker's first N rated turns, a longer settled
window (k2, p2) judges the rest. Written as text: ``pooled k=6,p=0.5 for 6, then k=20,p=0.4``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Optional

from sqlalchemy import bindparam, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.db import savepoint
from turkflow.config import Settings, default
from turkflow.errors import InvalidInput
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    Bonus,
    BonusStatus,
    Conversation,
    Hit,
    HitStatus,
    QualityDecision,
    Rating,
    Turn,
    Worker,
    WorkerStatus,
)


# How a window's ratings are compared with p. EITHER is the paper's rule (block when the mean relevance or
# the mean usefulness is below p). POOLED blocks when the mean of both together is below p: twice the
# evidence per window, so a few noisy raters block far fewer honest workers (see bench/RESULTS.md).
EITHER = "either"
POOLED = "pooled"
RULES = (EITHER, POOLED)

_WINDOW = r"k\s*=\s*(\d+)\s*,\s*p\s*=\s*([0-9]*\.?[0-9]+)"
_POLICY_TEXT = re.compile(rf"^\s*(pooled\s+)?{_WINDOW}\s*(?:for\s+(\d+)\s*,\s*then\s+{_WINDOW}\s*)?$")


class PolicyError(InvalidInput, ValueError):
    """A block policy's text or numbers make no sense (also a ValueError, which click callbacks catch)."""


# Policies a requester can name. ``paper`` is the Wizard of Tasks heuristic; with a quarter of raters
# answering at random it blocks most honest workers over a long batch and can stall it. ``probation`` is
# the one the crowd simulator found to catch >=90% of spammers within 6 rated turns while blocking <=3% of
# honest workers (bench/RESULTS.md, Quality policies).
NAMED_POLICIES = {
    "paper": "k=5,p=0.5",
    "probation": "pooled k=6,p=0.5 for 6, then k=20,p=0.4",
}


@dataclass(frozen=True)
class Policy:
    window: int = default("quality_window")
    block_below: float = default("block_below")
    bonus_above: float = default("bonus_above")
    bonus_cents: int = default("bonus_cents")
    rule: str = default("block_rule")
    probation: int = 0  # rated turns judged by (window, block_below); 0: all of them
    settled_window: int = 0  # judges the rated turns after probation
    settled_block_below: float = 0.0
    bonus_window: int = 0  # ratings a bonus is judged over; 0: the window's (after probation: k, not k2)

    @classmethod
    def of(cls, batch: Batch) -> "Policy":
        return cls(batch.quality_window, batch.block_below, batch.bonus_above, batch.bonus_cents, batch.block_rule,
                   batch.probation_rated_turns, batch.settled_window, batch.settled_block_below)

    @classmethod
    def of_settings(cls, settings: Settings, bonus_cents: Optional[int] = None) -> "Policy":
        """The policy a batch launched with these settings gets (their bonus unless ``bonus_cents``)."""
        staged = {} if not settings.probation_turns else {
            "probation": settings.probation_turns, "settled_window": settings.settled_window,
            "settled_block_below": settings.settled_block_below}
        return cls(settings.quality_window, settings.block_below, settings.bonus_above,
                   settings.bonus_cents if bonus_cents is None else bonus_cents, settings.block_rule, **staged)

    @classmethod
    def parse(cls, text: str, bonus_above: float = default("bonus_above"),
              bonus_cents: int = default("bonus_cents")) -> "Policy":
        """A named policy (``paper``, ``probation``), ``k=5,p=0.5``, ``none`` (never blocks),
        ``k=5,p=0.5 for 6, then k=20,p=0.4`` (probation), any of the rules ``pooled``."""
        text = NAMED_POLICIES.get(text.strip(), text)
        if text.strip() == "none":
            return cls(block_below=0.0, bonus_above=bonus_above, bonus_cents=bonus_cents)
        match = _POLICY_TEXT.match(text)
        if not match:
            raise PolicyError(f"policy {text!r} is not {' or '.join(NAMED_POLICIES)} nor of the form k=5,p=0.5 "
                              "(or none, or k=5,p=0.4 for 6, then k=20,p=0.4, or pooled k=5,p=0.5)")
        pooled, k1, p1, until, k2, p2 = match.groups()
        staged = {} if until is None else {"probation": int(until), "settled_window": int(k2),
                                           "settled_block_below": float(p2)}
        policy = cls(window=int(k1), block_below=float(p1), bonus_above=bonus_above, bonus_cents=bonus_cents,
                     rule=POOLED if pooled else EITHER, **staged)
        policy.check()
        return policy

    def check(self) -> None:
        windows = [(self.window, self.block_below)]
        if self.probation:
            windows.append((self.settled_window, self.settled_block_below))
        if self.rule not in RULES:
            raise PolicyError(f"block rule {self.rule!r} is not one of {', '.join(RULES)}")
        if self.probation < 0 or any(k < 1 or not 0 < p <= 1 for k, p in windows):
            raise PolicyError(f"policy {self.text!r}: k must be at least 1, p in (0, 1] and probation not negative")

    @property
    def text(self) -> str:
        if self.block_below == 0:
            return "none"
        text = ("pooled " if self.rule == POOLED else "") + f"k={self.window},p={self.block_below:g}"
        if self.probation:
            text += f" for {self.probation}, then k={self.settled_window},p={self.settled_block_below:g}"
        return text

    def stage(self, rated_turns: int) -> "Policy":
        """The single-window policy that judges an author who has received ``rated_turns`` ratings."""
        if self.probation and rated_turns > self.probation:
            return replace(self, window=self.settled_window, block_below=self.settled_block_below, probation=0,
                           bonus_window=self.bonus_window or self.window)
        return replace(self, probation=0)

    @property
    def name(self) -> str:
        """The policy's name if it is a named one, else its text."""
        for name, text in NAMED_POLICIES.items():
            if Policy.parse(text, self.bonus_above, self.bonus_cents) == replace(self, bonus_window=0):
                return name
        return self.text

    @property
    def reads(self) -> int:
        """How many of an author's most recent ratings a decision reads."""
        return max(self.window, self.bonus_window)

    def batch_fields(self) -> dict[str, object]:
        """The batch columns that hold this policy (``Policy.of`` reads them back)."""
        return {"quality_window": self.window, "block_below": self.block_below, "bonus_above": self.bonus_above,
                "bonus_cents": self.bonus_cents, "block_rule": self.rule, "probation_rated_turns": self.probation,
                "settled_window": self.settled_window, "settled_block_below": self.settled_block_below}


def decide(policy: Policy, relevance: list[bool], usefulness: list[bool]) -> tuple[str, float, float]:
    """The pure rule: (outcome, mean relevance, mean usefulness over the window) for an author's ratings,
    oldest first; only the last ``policy.reads`` matter."""
    rel, use = relevance[-policy.window:], usefulness[-policy.window:]
    if not rel:
        return "none", 0.0, 0.0
    mean_rel, mean_use = _mean(rel), _mean(use)
    if len(rel) == policy.window:
        if policy.rule == POOLED:
            low = (mean_rel + mean_use) / 2 < policy.block_below
        else:
            low = mean_rel < policy.block_below or mean_use < policy.block_below
        if low:
            return "block", mean_rel, mean_use
    k = policy.bonus_window or policy.window
    if (len(relevance) >= k and _mean(relevance[-k:]) > policy.bonus_above
            and _mean(usefulness[-k:]) > policy.bonus_above):
        return "bonus", mean_rel, mean_use
    return "none", mean_rel, mean_use


def _mean(values: list[bool]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True)
class Evaluation:
    decision: QualityDecision
    blocked: bool  # this evaluation newly blocked the author
    bonus: Optional[Bonus]  # the bonus this evaluation recorded (pay it with the provider)


# Built once: every submission that rates a turn runs them (building a statement costs more than running it).
_JUDGING = (  # the rating with its author, the rated turn, its conversation and batch; a decision if taken
    select(Rating, Worker, Turn, Conversation, Batch, QualityDecision.id)
    .join(Worker, Worker.id == Rating.author_id).join(Turn, Turn.id == Rating.rated_turn_id)
    .join(Conversation, Conversation.id == Turn.conversation_id).join(Batch, Batch.id == Conversation.batch_id)
    .outerjoin(QualityDecision, QualityDecision.rating_id == Rating.id)
    .where(Rating.id == bindparam("rating"))
)
_RECEIVED = (Rating.author_id == bindparam("author"), Rating.id > bindparam("after"), Rating.id <= bindparam("rating"))
_RECEIVED_COUNT = select(func.count()).select_from(
    select(Rating.id).where(*_RECEIVED).limit(bindparam("upto")).subquery())
_WINDOW = select(Rating).where(*_RECEIVED).order_by(col(Rating.id).desc()).limit(bindparam("reads"))


def evaluate_rating(session: Session, rating_id: int) -> Optional[Evaluation]:
    """Judge the author of the rated turn; running it twice for one rating changes nothing."""
    row = session.execute(_JUDGING, {"rating": rating_id}).first()
    if row is None or row[-1] is not None:
        return None
    rating, author, rated, conversation, batch, _ = row
    policy = Policy.of(batch)
    received = {"author": author.id, "after": author.window_after_rating_id, "rating": rating.id}
    if policy.probation:  # still on probation? count no further than needed to know (cost stays flat)
        policy = policy.stage(session.execute(_RECEIVED_COUNT, {**received, "upto": policy.probation + 1})
                              .scalar_one())
    window = list(session.execute(_WINDOW, {**received, "reads": policy.reads}).scalars())
    oldest_first = window[::-1]
    outcome, mean_rel, mean_use = decide(policy, [r.relevant for r in oldest_first],
                                         [r.useful for r in oldest_first])
    decision = QualityDecision(
        worker_id=author.id, rating_id=rating.id, outcome=outcome, mean_relevance=mean_rel,
        mean_usefulness=mean_use,
        window=[{"rating_id": r.id, "turn_id": r.rated_turn_id, "rater_id": r.rater_id,
                 "relevant": r.relevant, "useful": r.useful} for r in window],
    )
    try:
        with savepoint(session):
            session.add(decision)
            session.flush()
    except IntegrityError:
        return None  # a concurrent evaluation of the same rating won
    events.record(session, "quality_decision", "system", batch_id=batch.id, conversation_id=conversation.id,
                  turn_id=rated.id, worker_id=author.id, outcome=outcome, mean_relevance=mean_rel,
                  mean_usefulness=mean_use, window=policy.window, policy=asdict(policy))
    blocked = False
    if outcome == "block" and author.status == WorkerStatus.active:
        block_worker(session, author, permanent=False, actor="system",
                     reason=f"mean relevance {mean_rel:.2f}, usefulness {mean_use:.2f} over the last "
                            f"{policy.window} rated turns (threshold {policy.block_below})")
        blocked = True
    bonus = _record_bonus(session, policy, batch, rated, author, decision) if outcome == "bonus" else None
    return Evaluation(decision=decision, blocked=blocked, bonus=bonus)


def _record_bonus(session: Session, policy: Policy, batch: Batch, turn: Turn, author: Worker,
                  decision: QualityDecision) -> Optional[Bonus]:
    assignment = session.exec(
        select(Assignment).join(Hit, Hit.id == Assignment.hit_id)
        .where(Hit.turn_id == turn.id, Hit.status == HitStatus.submitted, Assignment.worker_id == author.id,
               col(Assignment.status).in_([AssignmentStatus.submitted, AssignmentStatus.approved]))
    ).first()
    if assignment is None:
        return None
    bonus = Bonus(turn_id=turn.id, worker_id=author.id, assignment_id=assignment.id, decision_id=decision.id,
                  amount_cents=policy.bonus_cents, request_token=f"turkflow-bonus-turn-{turn.id}")
    try:
        with savepoint(session):
            session.add(bonus)
            session.flush()
    except IntegrityError:
        return None  # this turn already earned its bonus
    events.record(session, "bonus_recorded", "system", batch_id=batch.id, conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=author.id, amount_cents=bonus.amount_cents, bonus_id=bonus.id)
    return bonus


def block_worker(session: Session, worker: Worker, *, permanent: bool, actor: str, reason: str,
                 note: str = "") -> None:
    """Record a block in the worker's status; the caller tells the provider (it may call the network)."""
    states.move(worker, WorkerStatus.blocked if permanent else WorkerStatus.temporarily_blocked)
    session.add(worker)
    events.record(session, "worker_blocked", actor, worker_id=worker.id, permanent=permanent, reason=reason,
                  note=note)


def unblock_worker(session: Session, worker: Worker, *, actor: str, note: str = "") -> None:
    """Let a worker work again with a fresh quality window, so the old ratings do not re-block them."""
    latest = session.exec(
        select(Rating.id).where(Rating.author_id == worker.id).order_by(col(Rating.id).desc()).limit(1)
    ).first()
    states.move(worker, WorkerStatus.active)
    worker.window_after_rating_id = latest or 0
    session.add(worker)
    events.record(session, "worker_unblocked", actor, worker_id=worker.id, note=note)


def workers_out_of_step(session: Session, limit: int = 500) -> list[int]:
    """Workers whose crowd platform does not reflect their status yet: a block or unblock whose platform
    call failed or never ran (a crash after the decision committed)."""
    return list(session.exec(
        select(Worker.id).where(Worker.status != Worker.platform_status).order_by(Worker.id).limit(limit)
    ))


def batch_of_rating(session: Session, rating_id: int) -> Batch:
    rated = session.get(Turn, session.get(Rating, rating_id).rated_turn_id)
    return session.get(Batch, session.get(Conversation, rated.conversation_id).batch_id)


def unpaid_bonuses(session: Session, older_than: datetime, limit: int = 500) -> list[int]:
    """Bonuses to pay (again); one claimed for a non-idempotent pay (Prolific) is settled by its platform's
    poller from the platform's records instead."""
    return list(session.exec(
        select(Bonus.id).where(Bonus.status == BonusStatus.pending, Bonus.created_at < older_than,
                               col(Bonus.pay_claimed_at).is_(None))
        .order_by(Bonus.id).limit(limit)
    ))
