"""The quality monitor: every rating updates a judgement of the worker who wrote the rated turn.

For that author take the k most recent ratings their turns received (since their last unblock). If the
mean relevance or the mean usefulness is below p, block them temporarily; if both are above the bonus
threshold, the rated turn earns a bonus, once. A window shorter than k decides nothing: one unlucky rating
from a careless rater must not block an honest newcomer. The window is read through the
``(author_id, id)`` index, so the cost per rating does not grow with history.

That is the paper's rule (the named policy ``paper``). A batch may also pool the two means (block when
their average is below p) and put workers on probation: (k, p) judge a worker's first N rated turns, a
longer settled window (k2, p2) judges the rest. Written as text: ``pooled k=6,p=0.5 for 6, then k=20,p=0.4``.

``weighted`` pools the two means too, but counts each rating as much as its
rater is trusted (``turkflow.quality.reliability``: every rating also updates its rater's record): a rater
identified as careless or harsh stops counting at all, and the window holds the last k ratings that still
count. An identified rater earns no bonus. A policy may also judge how turns were written: with ``not
typed m of n``, a worker m of whose last n written turns carry the ``not_typed`` flag with a paste's
keystrokes (``machine_written``) is blocked temporarily and goes to the daily review, like one rated low
(``judge_writing``, run by the pipeline on every submitted turn).

``sprt k=20,a=0.05,b=0.05`` (the ``recommended`` policy's rule) replaces the windows by Wald's sequential
probability ratio test on the same trust-weighted ratings (``sequential_evidence``): each rating adds its
log-likelihood ratio of "the writer is a spammer" against "an honest writer", times its rater's trust, and
the writer is blocked as soon as the sum crosses log((1-b)/a), a the share of honest writers it may block
and b the share of spammers it may miss. So two (a=0.05) or three (a=0.01) no/no answers from trusted
raters block a spammer at that rating, and a no/no from a rater whose gold answers at onboarding showed
them careless (trust near 0) moves nothing. Bonuses are judged as the weighted rule judges them, over the
last ``SPRT_BONUS_RATINGS``.

Where no peer rates a turn, something else may judge its writer: the other role's answers at the end of a
STAR dialog, the wizard's agreement with the knowledge base, an annotator's agreement with the others. Each
such judgement is a ``JudgedSignal`` (ok or not, with its evidence) recorded by ``judge_signal``, and the
policy's ``judged m of n`` sends a worker m of whose last n signals of one kind are not ok to review.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any, Optional

from sqlalchemy import bindparam, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.db import savepoint
from turkflow.config import Settings, default
from turkflow.writing import recorded
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
    JudgedSignal,
    QualityDecision,
    Rating,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
    utcnow,
)
from turkflow.quality import NAMED_POLICIES, checks, reliability


# How a window's ratings are compared with p. EITHER is the paper's rule (block when the mean relevance or
# the mean usefulness is below p). POOLED blocks when the mean of both together is below p: twice the
# evidence per window, so a few noisy raters block far fewer honest workers (see bench/RESULTS.md).
EITHER = "either"
POOLED = "pooled"
WEIGHTED = "weighted"  # POOLED, each rating weighted by its rater's trust (turkflow.quality.reliability)
SPRT = "sprt"  # Wald's sequential test on trust-weighted ratings instead of a window's means
RULES = (EITHER, POOLED, WEIGHTED, SPRT)

_WINDOW = r"k\s*=\s*(\d+)\s*,\s*p\s*=\s*([0-9]*\.?[0-9]+)"
_POLICY_TEXT = re.compile(rf"^\s*(pooled\s+|weighted\s+)?{_WINDOW}\s*(?:for\s+(\d+)\s*,\s*then\s+{_WINDOW}\s*)?"
                          r"(?:[,;]\s*not\s+typed\s+(\d+)\s+of\s+(\d+)\s*)?$")
_SPRT_TEXT = re.compile(r"^\s*sprt\s+k\s*=\s*(\d+)\s*,\s*a\s*=\s*([0-9]*\.?[0-9]+)\s*,\s*b\s*=\s*([0-9]*\.?[0-9]+)\s*"
                        r"(?:[,;]\s*not\s+typed\s+(\d+)\s+of\s+(\d+)\s*)?$")
_JUDGED_TEXT = re.compile(r"(?:^|[,;])\s*judged\s+(?:(\d+)\s+of\s+(\d+)|off)\s*$")


class PolicyError(InvalidInput, ValueError):
    """A block policy's text or numbers make no sense (also a ValueError, which click callbacks catch)."""


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
    typed_block: int = 0  # m: block when m of the last n written turns are machine-written; 0: never
    typed_window: int = 0  # n
    judged_block: int = default("judged_block")  # m: block when m of the last n judged signals of a kind are
    judged_window: int = default("judged_window")  # not ok (judge_signal); 0: never
    sprt_alpha: float = 0.0  # the sprt rule: the share of honest writers it may block ...
    sprt_beta: float = 0.0  # ... and of spammers it may miss

    @classmethod
    def of(cls, batch: Batch) -> "Policy":
        """The policy a batch holds (a ``Batch`` or a row of its columns, as the monitor reads it)."""
        return cls(batch.quality_window, batch.block_below, batch.bonus_above, batch.bonus_cents, batch.block_rule,
                   batch.probation_rated_turns, batch.settled_window, batch.settled_block_below,
                   typed_block=batch.typed_block, typed_window=batch.typed_window,
                   judged_block=batch.judged_block, judged_window=batch.judged_window,
                   sprt_alpha=batch.sprt_alpha, sprt_beta=batch.sprt_beta)

    @classmethod
    def of_settings(cls, settings: Settings, bonus_cents: Optional[int] = None) -> "Policy":
        """The policy a batch launched with these settings gets (their bonus unless ``bonus_cents``)."""
        staged = {} if not settings.probation_turns else {
            "probation": settings.probation_turns, "settled_window": settings.settled_window,
            "settled_block_below": settings.settled_block_below}
        typed = {"typed_block": settings.typed_block, "typed_window": settings.typed_window}
        return cls(settings.quality_window, settings.block_below, settings.bonus_above,
                   settings.bonus_cents if bonus_cents is None else bonus_cents, settings.block_rule, **staged,
                   **(typed if settings.typed_block else {}), judged_block=settings.judged_block,
                   judged_window=settings.judged_window)

    @classmethod
    def parse(cls, text: str, bonus_above: float = default("bonus_above"),
              bonus_cents: int = default("bonus_cents")) -> "Policy":
        """A named policy (``paper``, ``probation``, ``recommended``), ``k=5,p=0.5``, ``none`` (never blocks),
        ``k=5,p=0.5 for 6, then k=20,p=0.4`` (probation), any of them ``pooled`` or ``weighted``,
        ``sprt k=20,a=0.01,b=0.05`` (the sequential test over the last k ratings), and any followed by ``, not typed 3 of 6`` and ``, judged 3 of 6`` or ``, judged off`` (without it:
        TURKFLOW_JUDGED_*; ``none`` alone judges nothing)."""
        judged_rule = _JUDGED_TEXT.search(text)
        judged = ({} if judged_rule is None else {"judged_block": 0} if judged_rule[1] is None
                  else {"judged_block": int(judged_rule[1]), "judged_window": int(judged_rule[2])})
        text = text[:judged_rule.start()] if judged_rule else text
        text = NAMED_POLICIES.get(text.strip(), text)
        if text.strip() == "none":
            policy = cls(block_below=0.0, bonus_above=bonus_above, bonus_cents=bonus_cents,
                         **(judged or {"judged_block": 0}))
            if policy.judged_block and not 1 <= policy.judged_block <= policy.judged_window:
                raise PolicyError(f"policy {policy.text!r}: judged m of n needs 1 <= m <= n")
            return policy
        sprt = _SPRT_TEXT.match(text)
        if sprt:
            k, alpha, beta, typed_m, typed_n = sprt.groups()
            typed = {} if typed_m is None else {"typed_block": int(typed_m), "typed_window": int(typed_n)}
            policy = cls(window=int(k), block_below=1.0, bonus_above=bonus_above, bonus_cents=bonus_cents,
                         rule=SPRT, sprt_alpha=float(alpha), sprt_beta=float(beta), **typed, **judged)
            policy.check()
            return policy
        match = _POLICY_TEXT.match(text)
        if not match:
            raise PolicyError(f"policy {text!r} is not {' or '.join(NAMED_POLICIES)} nor of the form k=5,p=0.5 "
                              "(or none, or k=5,p=0.4 for 6, then k=20,p=0.4, or pooled k=5,p=0.5, or weighted "
                              "k=6,p=0.5, or sprt k=20,a=0.01,b=0.05, any of them followed by , not typed 3 of 6, and by , judged 3 of 6)")
        rule, k1, p1, until, k2, p2, typed_m, typed_n = match.groups()
        staged = {} if until is None else {"probation": int(until), "settled_window": int(k2),
                                           "settled_block_below": float(p2)}
        typed = {} if typed_m is None else {"typed_block": int(typed_m), "typed_window": int(typed_n)}
        policy = cls(window=int(k1), block_below=float(p1), bonus_above=bonus_above, bonus_cents=bonus_cents,
                     rule=rule.strip() if rule else EITHER, **staged, **typed, **judged)
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
        if self.rule == SPRT and not (0 < self.sprt_alpha < 1 and 0 < self.sprt_beta < 1
                                      and self.sprt_alpha + self.sprt_beta < 1):
            raise PolicyError(f"policy {self.text!r}: the sequential test needs a and b in (0, 1), a + b < 1")
        if self.typed_block and not 1 <= self.typed_block <= self.typed_window:
            raise PolicyError(f"policy {self.text!r}: not typed m of n needs 1 <= m <= n")
        if self.judged_block and not 1 <= self.judged_block <= self.judged_window:
            raise PolicyError(f"policy {self.text!r}: judged m of n needs 1 <= m <= n")

    @property
    def text(self) -> str:
        if self.block_below == 0:
            return "none" + (f", {self.judged_text}" if self.judged_block else "")
        if self.rule == SPRT:
            text = f"sprt k={self.window},a={self.sprt_alpha:g},b={self.sprt_beta:g}"
        else:
            text = ("" if self.rule == EITHER else f"{self.rule} ") + f"k={self.window},p={self.block_below:g}"
        if self.probation:
            text += f" for {self.probation}, then k={self.settled_window},p={self.settled_block_below:g}"
        if self.typed_block:
            text += f", not typed {self.typed_block} of {self.typed_window}"
        if (self.judged_block, self.judged_window) != (default("judged_block"), default("judged_window")):
            text += f", {self.judged_text}"
        return text

    @property
    def judged_text(self) -> str:
        """The judged rule as the policy's text writes it (``judged off`` for a batch that judges nothing so,
        as every batch launched before the rule existed)."""
        return f"judged {self.judged_block} of {self.judged_window}" if self.judged_block else "judged off"

    @property
    def weighted(self) -> bool:
        """Whether ratings count by their rater's trust (and identified raters earn no bonus)."""
        return self.rule in (WEIGHTED, SPRT)

    @property
    def sprt_bounds(self) -> tuple[float, float]:
        """Wald's bounds on the sequential test's evidence: (log(b/(1-a)), log((1-b)/a))."""
        return (math.log(self.sprt_beta / (1 - self.sprt_alpha)), math.log((1 - self.sprt_beta) / self.sprt_alpha))

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
        return max(self.window, self.bonus_window, SPRT_BONUS_RATINGS if self.rule == SPRT else 0)

    def batch_fields(self) -> dict[str, object]:
        """The batch columns that hold this policy (``Policy.of`` reads them back)."""
        return {"quality_window": self.window, "block_below": self.block_below, "bonus_above": self.bonus_above,
                "bonus_cents": self.bonus_cents, "block_rule": self.rule, "probation_rated_turns": self.probation,
                "settled_window": self.settled_window, "settled_block_below": self.settled_block_below,
                "typed_block": self.typed_block, "typed_window": self.typed_window,
                "judged_block": self.judged_block, "judged_window": self.judged_window,
                "sprt_alpha": self.sprt_alpha, "sprt_beta": self.sprt_beta}


# The weighted rule decides on a window only if its ratings' trust adds up to this share of k: a window of
# mostly untrusted ratings waits for more.
WEIGHED_SHARE = 0.5

# The sprt rule judges a bonus over this many of the last ratings (the paper's k).
SPRT_BONUS_RATINGS = 5


def sequential_evidence(policy: Policy, relevance: list[bool], usefulness: list[bool], trust: list[float],
                        model: reliability.Model = reliability.Model()) -> float:
    """The sprt rule's evidence that the author is a spammer, over their last k ratings (oldest first): each
    rating's ``reliability.spammer_evidence`` times its rater's trust, summed as Wald's test sums it, never
    below the lower bound (where the test would accept "honest" and start again), so an honest record buys
    no credit a writer who turns to spam could spend."""
    low, _ = policy.sprt_bounds
    evidence = 0.0
    for relevant, useful, weight in list(zip(relevance, usefulness, trust))[-policy.window:]:
        evidence = max(low, evidence + weight * reliability.spammer_evidence(
            model, reliability.answer_of(relevant, useful)))
    return evidence


def decide(policy: Policy, relevance: list[bool], usefulness: list[bool],
           trust: Optional[list[float]] = None,
           model: reliability.Model = reliability.Model()) -> tuple[str, float, float]:
    """The pure rule: (outcome, mean relevance, mean usefulness over the window) for an author's ratings,
    oldest first; only the last ``policy.reads`` matter. ``trust``: each rating's rater's trust, for the
    weighted rule: each rating counts as much as its rater is trusted (an identified rater's not at all), and
    a full window decides only if it holds at least WEIGHED_SHARE of k trusted ratings. The sprt rule blocks
    once ``sequential_evidence`` reaches its upper bound, however few ratings."""
    weights = trust if policy.weighted and trust is not None else [1.0] * len(relevance)
    counted = list(zip(relevance, usefulness, weights))
    if policy.rule == SPRT:
        if sequential_evidence(policy, relevance, usefulness, weights, model) >= policy.sprt_bounds[1]:
            return ("block", *reliability.weighted_means(counted[-policy.window:])[:2])
        policy = replace(policy, window=SPRT_BONUS_RATINGS, block_below=0.0)  # only a bonus is left to judge
    window = counted[-policy.window:]
    mean_rel, mean_use, weight = reliability.weighted_means(window)
    if not weight:
        return "none", 0.0, 0.0
    if len(window) == policy.window and weight >= (policy.window * WEIGHED_SHARE if policy.weighted else 0):
        if policy.rule == EITHER:
            low = mean_rel < policy.block_below or mean_use < policy.block_below
        else:
            low = (mean_rel + mean_use) / 2 < policy.block_below
        if low:
            return "block", mean_rel, mean_use
    k = policy.bonus_window or policy.window
    if len(counted) >= k:
        bonus_rel, bonus_use, bonus_weight = reliability.weighted_means(counted[-k:])
        if bonus_weight and bonus_rel > policy.bonus_above and bonus_use > policy.bonus_above:
            return "bonus", mean_rel, mean_use
    return "none", mean_rel, mean_use


def machine_written(turn_flags: list[str], text: str, signals: dict[str, Any], keys_per_char: float) -> bool:
    """Whether a turn counts against its writer as machine-written: it carries ``not_typed`` and its page saw
    fewer keystrokes than ``keys_per_char`` a character (a paste's handful, not a phone keyboard's word
    completion, which the flag also catches and a person should not be sent to review for)."""
    if checks.NOT_TYPED not in turn_flags or not recorded(signals) or not text:
        return False
    return signals.get("keys", 0) < keys_per_char * len(text)


def judge_typing(policy: Policy, written: list[bool]) -> bool:
    """The pure rule: block when ``typed_block`` of the last ``typed_window`` written turns (oldest first,
    True for machine-written) are machine-written."""
    return bool(policy.typed_block) and sum(written[-policy.typed_window:]) >= policy.typed_block


# How many of the author's most recent other ratings say how good their turns are, when a rating teaches
# about its rater (the author's record as the other raters show it).
LEARN_FROM = 20


@dataclass(frozen=True)
class Evaluation:
    decision: QualityDecision
    blocked: bool  # this evaluation newly blocked the author
    bonus: Optional[Bonus]  # the bonus this evaluation recorded (pay it with the provider)


# Built once: every submission that rates a turn runs them (building a statement costs more than running it),
# on the tables rather than the mapped classes: they read plain rows, no ORM objects to build.
_POLICY_COLUMNS = tuple(Policy().batch_fields())  # the batch columns Policy.of reads
_RATINGS, _BATCHES, _WORKERS, _TURNS = Rating.__table__, Batch.__table__, Worker.__table__, Turn.__table__
_CONVERSATIONS, _DECISIONS = Conversation.__table__, QualityDecision.__table__
_JUDGING = (  # the rating with its author, the rated turn's conversation and the batch's policy; a decision if
    select(_RATINGS.c.id, _RATINGS.c.rated_turn_id, _RATINGS.c.rater_id,  # taken
           _RATINGS.c.author_id, _RATINGS.c.relevant, _RATINGS.c.useful,
           _WORKERS.c.window_after_rating_id, _WORKERS.c.status.label("author_status"), _TURNS.c.conversation_id,
           _BATCHES.c.id.label("batch_id"), *(_BATCHES.c[name] for name in _POLICY_COLUMNS),
           _DECISIONS.c.id.label("decided"))
    .join(_WORKERS, _WORKERS.c.id == _RATINGS.c.author_id)
    .join(_TURNS, _TURNS.c.id == _RATINGS.c.rated_turn_id)
    .join(_CONVERSATIONS, _CONVERSATIONS.c.id == _TURNS.c.conversation_id)
    .join(_BATCHES, _BATCHES.c.id == _CONVERSATIONS.c.batch_id)
    .outerjoin(_DECISIONS, _DECISIONS.c.rating_id == _RATINGS.c.id)
    .where(_RATINGS.c.id == bindparam("rating"))
)
_RECEIVED = (_RATINGS.c.author_id == bindparam("author"), _RATINGS.c.id > bindparam("after"),
             _RATINGS.c.id <= bindparam("rating"))
_RECEIVED_COUNT = select(func.count()).select_from(
    select(_RATINGS.c.id).where(*_RECEIVED).limit(bindparam("upto")).subquery())
_WINDOW = (select(_RATINGS.c.id, _RATINGS.c.rated_turn_id, _RATINGS.c.rater_id, _RATINGS.c.relevant,
                  _RATINGS.c.useful)
           .where(*_RECEIVED).order_by(_RATINGS.c.id.desc()).limit(bindparam("reads")))
_ASSIGNMENTS, _HITS, _BONUSES = Assignment.__table__, Hit.__table__, Bonus.__table__


def _insert_once(table: Any) -> dict[str, Any]:
    """``INSERT … ON CONFLICT DO NOTHING RETURNING id`` for each backend: a row another evaluation wrote first
    (the same rating judged twice at once, a redelivered review) is simply not written again, and nothing
    returned, without the savepoint an IntegrityError would need."""
    return {name: dialect.insert(table).on_conflict_do_nothing().returning(table.c.id)
            for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))}


_DECIDE = _insert_once(_DECISIONS)  # unique per rating (rating_id)
_NEW_BONUS = _insert_once(_BONUSES)  # unique per turn and kind, and per request token
_KEPT_ASSIGNMENT = (  # the rated turn's assignment by its author, if the turn is kept (``KEPT``)
    select(_ASSIGNMENTS.c.id).select_from(_ASSIGNMENTS.join(_HITS, _HITS.c.id == _ASSIGNMENTS.c.hit_id))
    .where(_HITS.c.turn_id == bindparam("turn"), _HITS.c.status == HitStatus.submitted,
           _ASSIGNMENTS.c.worker_id == bindparam("author"), _ASSIGNMENTS.c.status.in_(bindparam("kept", expanding=True)))
    .limit(1)
)


def evaluate_rating(session: Session, rating_id: int,
                    model: reliability.Model = reliability.Model()) -> Optional[Evaluation]:
    """Judge the author of the rated turn, and learn from the rating about its rater; running it twice for
    one rating changes nothing (the decision row is unique per rating, and the rater learns only with it)."""
    session.flush()  # the reads below are plain (no autoflush): they must see, e.g., a block not yet flushed
    rating = session.execute(_JUDGING, {"rating": rating_id}).first()
    if rating is None or rating.decided is not None:
        return None
    policy = Policy.of(rating)
    received = {"author": rating.author_id, "after": rating.window_after_rating_id, "rating": rating.id}
    if policy.probation:  # still on probation? count no further than needed to know (cost stays flat)
        policy = policy.stage(session.execute(_RECEIVED_COUNT, {**received, "upto": policy.probation + 1})
                              .scalar_one())
    window = session.execute(_WINDOW, {**received, "reads": max(policy.reads, LEARN_FROM)}).all()
    oldest_first = window[::-1]
    records = reliability.records(session, {r.rater_id for r in window} | {rating.author_id})
    before = records[rating.rater_id]
    # What the rating says of its rater, against the author's record as the other raters show it.
    quality = reliability.author_quality(model, [
        (reliability.answer_of(r.relevant, r.useful), records[r.rater_id].trust(model))
        for r in oldest_first[-LEARN_FROM - 1:-1]])
    records[rating.rater_id] = reliability.learn(model, before, reliability.answer_of(rating.relevant, rating.useful),
                                                 quality)
    judged = oldest_first[-policy.reads:]
    trust = [records[r.rater_id].trust(model) for r in judged]
    outcome, mean_rel, mean_use = decide(policy, [r.relevant for r in judged], [r.useful for r in judged], trust,
                                         model)
    if outcome == "bonus" and policy.weighted and records[rating.author_id].verdict:
        outcome = "none"  # an identified rater earns no bonus
    decision = QualityDecision(
        worker_id=rating.author_id, rating_id=rating.id, outcome=outcome, mean_relevance=mean_rel,
        mean_usefulness=mean_use, created_at=utcnow(),
        window=[{"rating_id": r.id, "turn_id": r.rated_turn_id, "rater_id": r.rater_id,
                 "relevant": r.relevant, "useful": r.useful,
                 **({"trust": round(t, 3)} if policy.weighted else {})} for r, t in zip(judged, trust)][::-1],
    )
    connection = session.connection()
    decision.id = connection.execute(_DECIDE[connection.dialect.name], decision.model_dump(exclude={"id"})).scalar()
    if decision.id is None:
        return None  # a concurrent evaluation of the same rating won
    if reliability.add_rating(session, rating.rater_id, before, records[rating.rater_id]):
        identified = records[rating.rater_id]
        events.record(session, "rater_identified", "system", batch_id=rating.batch_id, worker_id=rating.rater_id,
                      rating_id=rating.id, **reliability.evidence(model, identified))
    events.record(session, "quality_decision", "system", batch_id=rating.batch_id,
                  conversation_id=rating.conversation_id, turn_id=rating.rated_turn_id, worker_id=rating.author_id,
                  outcome=outcome, mean_relevance=mean_rel,
                  mean_usefulness=mean_use, window=policy.window, policy=asdict(policy))
    blocked = False
    if outcome == "block" and rating.author_status == WorkerStatus.active:
        block_worker(session, session.get(Worker, rating.author_id), permanent=False, actor="system", reason=_block_reason(
            policy, model, mean_rel, mean_use, [r.relevant for r in judged], [r.useful for r in judged], trust))
        blocked = True
    bonus = _record_bonus(session, policy, rating, decision) if outcome == "bonus" else None
    return Evaluation(decision=decision, blocked=blocked, bonus=bonus)


def _block_reason(policy: Policy, model: reliability.Model, mean_rel: float, mean_use: float,
                  relevance: list[bool], usefulness: list[bool], trust: list[float]) -> str:
    if policy.rule == SPRT:
        evidence = sequential_evidence(policy, relevance, usefulness, trust, model)
        return (f"sequential test: evidence {evidence:.2f} that the writer is a spammer reached "
                f"{policy.sprt_bounds[1]:.2f} over the last {min(len(trust), policy.window)} trust-weighted ratings "
                f"(mean relevance {mean_rel:.2f}, usefulness {mean_use:.2f})")
    what = "trust-weighted " if policy.weighted else ""
    return (f"{what}mean relevance {mean_rel:.2f}, usefulness {mean_use:.2f} over the last {policy.window} rated "
            f"turns (threshold {policy.block_below})")


_WRITTEN = (select(Turn.text, Turn.flags, Turn.signals, Turn.id)
            .where(Turn.worker_id == bindparam("worker"), Turn.status == TurnStatus.submitted,
                   Turn.id <= bindparam("turn"))
            .order_by(col(Turn.id).desc()).limit(bindparam("reads")))


def judge_writing(session: Session, turn: Turn, keys_per_char: float = default("typed_keys_per_char")) -> bool:
    """Send the writer of a just-checked turn to review (a temporary block) when their batch's policy says
    enough of their last written turns were machine-written; True if this blocked them. The last n turns
    are read through the ``(worker_id, id)`` index, so the cost per submission stays flat."""
    batch = session.exec(select(Batch).join(Conversation, Conversation.batch_id == Batch.id)
                         .where(Conversation.id == turn.conversation_id)).one()
    policy = Policy.of(batch)
    worker = session.get(Worker, turn.worker_id) if turn.worker_id else None
    if not policy.typed_block or worker is None or worker.status != WorkerStatus.active:
        return False
    recent = session.execute(_WRITTEN, {"worker": worker.id, "turn": turn.id,
                                        "reads": policy.typed_window}).all()
    written = [machine_written(flags, text or "", signals, keys_per_char) for text, flags, signals, _ in recent]
    if not judge_typing(policy, written[::-1]):
        return False
    machine = [turn_id for (_, _, _, turn_id), m in zip(recent, written) if m]
    block_worker(session, worker, permanent=False, actor="system",
                 reason=f"{len(machine)} of the last {len(recent)} written turns machine-written "
                        f"(not_typed, under {keys_per_char:g} keystrokes a character): turns "
                        f"{', '.join(map(str, sorted(machine)))}")
    events.record(session, "machine_written", "system", batch_id=batch.id, conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=worker.id, turns=sorted(machine), read=len(recent))
    return True


_JUDGED = (select(JudgedSignal.ok, JudgedSignal.turn_id, JudgedSignal.evidence)
           .where(JudgedSignal.worker_id == bindparam("worker"), JudgedSignal.kind == bindparam("kind"),
                  JudgedSignal.id <= bindparam("signal"))
           .order_by(col(JudgedSignal.id).desc()).limit(bindparam("reads")))


def judge_signal(session: Session, turn: Turn, *, ok: bool, kind: str, evidence: dict[str, Any]) -> bool:
    """Record a judgement of ``turn``'s writer that is not a peer rating, and send the writer to review (a
    temporary block) when their batch's policy says ``judged_block`` of their last ``judged_window`` signals
    of this ``kind`` were not ok; True if this blocked them.

    Any protocol may call it: ``kind`` names what judged (``star_survey``, ``star_kb_agreement``, an
    annotation's agreement) and ``evidence`` (JSON) is what a reviewer needs to check the judgement; the
    block's reason quotes the evidence of every signal that was not ok. One turn is judged once per kind:
    a second call for it records nothing and decides nothing, so a redelivered task cannot count twice. The
    writer's last n signals are read through the ``(worker_id, kind, id)`` index, so the cost stays flat.
    """
    if turn.worker_id is None:
        return False
    signal = JudgedSignal(worker_id=turn.worker_id, turn_id=turn.id, kind=kind, ok=ok, evidence=evidence)
    try:
        with savepoint(session):
            session.add(signal)
            session.flush()
    except IntegrityError:
        return False  # judged already (this kind, this turn)
    batch = session.exec(select(Batch).join(Conversation, Conversation.batch_id == Batch.id)
                         .where(Conversation.id == turn.conversation_id)).one()
    events.record(session, "signal_judged", "system", batch_id=batch.id, conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=turn.worker_id, signal=kind, ok=ok, evidence=evidence)
    policy = Policy.of(batch)
    worker = session.get(Worker, turn.worker_id)
    if not policy.judged_block or worker.status != WorkerStatus.active:
        return False
    recent = session.execute(_JUDGED, {"worker": worker.id, "kind": kind, "signal": signal.id,
                                       "reads": policy.judged_window}).all()
    if not judge_judged(policy, [row.ok for row in reversed(recent)]):
        return False
    failed = [(row.turn_id, row.evidence) for row in reversed(recent) if not row.ok]
    block_worker(session, worker, permanent=False, actor="system",
                 reason=f"{len(failed)} of the last {len(recent)} {kind} signals not ok: "
                        + "; ".join(f"turn {turn_id}: {_shown(evidence)}" for turn_id, evidence in failed))
    return True


def judge_judged(policy: Policy, ok: list[bool]) -> bool:
    """The pure rule: block when ``judged_block`` of the last ``judged_window`` signals (oldest first) are
    not ok."""
    return bool(policy.judged_block) and ok[-policy.judged_window:].count(False) >= policy.judged_block


def _shown(evidence: dict[str, Any]) -> str:
    """Evidence as one line of a block's reason (``key=value, ...``)."""
    return ", ".join(f"{key}={value}" for key, value in evidence.items())


# A turn we keep, whatever became of its submission: one that ended unpaid on the platform (Prolific: timed
# out or returned after the turn was stored) is still paid its reward, and its quality bonus too.
KEPT = (AssignmentStatus.submitted, AssignmentStatus.approved, AssignmentStatus.unpaid, AssignmentStatus.compensated)


def _record_bonus(session: Session, policy: Policy, rating: Any, decision: QualityDecision) -> Optional[Bonus]:
    """The rated turn's bonus (``rating``: a row of ``_JUDGING``), once per turn: written as a plain row, and
    returned as an object of no session (its payment goes by its id)."""
    turn_id, author_id = rating.rated_turn_id, rating.author_id
    connection = session.connection()
    assignment_id = connection.execute(_KEPT_ASSIGNMENT, {"turn": turn_id, "author": author_id,
                                                          "kept": list(KEPT)}).scalar()
    if assignment_id is None:
        return None
    bonus = Bonus(turn_id=turn_id, worker_id=author_id, assignment_id=assignment_id, decision_id=decision.id,
                  amount_cents=policy.bonus_cents, request_token=f"turkflow-bonus-turn-{turn_id}")
    bonus.id = connection.execute(_NEW_BONUS[connection.dialect.name], bonus.model_dump(exclude={"id"})).scalar()
    if bonus.id is None:
        return None  # this turn already earned its bonus
    events.record(session, "bonus_recorded", "system", batch_id=rating.batch_id,
                  conversation_id=rating.conversation_id, turn_id=turn_id, worker_id=author_id,
                  amount_cents=bonus.amount_cents, bonus_id=bonus.id)
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
