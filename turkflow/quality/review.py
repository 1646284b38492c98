"""The daily review: a human looks at every temporarily blocked worker and blocks them for good or lets
them back in.

The monitor blocks on numbers; a person decides on evidence. Once a day (Celery beat) the queue is built
and stored: one ``ReviewEntry`` per temporarily blocked worker with a sample of their turns (the
low-rated ones from the blocking window first, then flagged, then recent ones, each with the turn before
and after it), their rating history and their flags. Building costs a few indexed reads per blocked
worker, never a scan of all turns, so the dashboard reads a handful of rows however big the data grows.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import date
from typing import Any, Iterable, Optional

from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.access import Access, of_conversations, of_workers
from turkflow.config import Settings
from turkflow.errors import InvalidInput
from turkflow.models import (
    Batch,
    Conversation,
    Event,
    QualityDecision,
    Rating,
    ReviewEntry,
    ReviewStatus,
    Role,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
    utcnow,
)
from turkflow.quality import monitor, reliability, stall

RATING_HISTORY = 20  # ratings received shown with each entry
FLAG_HISTORY = 50  # recent turns whose flags are counted


@dataclass(frozen=True)
class ReviewPolicy:
    sample_turns: int = 5
    reliability_ratings: int = 50_000
    reliability_min_ratings: int = 10
    reliability_floor: float = 0.6

    @classmethod
    def of(cls, settings: Settings) -> "ReviewPolicy":
        return cls(settings.review_sample_turns, settings.reliability_ratings, settings.reliability_min_ratings,
                   settings.reliability_floor)


@dataclass(frozen=True)
class DailyReview:
    day: date
    entries: list[ReviewEntry]
    raters_judged: int
    rater_outliers: int


def daily_review(session: Session, policy: ReviewPolicy, day: Optional[date] = None,
                 actor: str = "system") -> DailyReview:
    """Build (or refresh) the day's review queue and the raters' agreement; safe to run any number of times."""
    day = day or utcnow().date()
    entries = build_queue(session, day, sample_turns=policy.sample_turns)
    agreements = reliability.record_agreements(session, day, ratings=policy.reliability_ratings,
                                               min_ratings=policy.reliability_min_ratings,
                                               floor=policy.reliability_floor)
    built = DailyReview(day=day, entries=entries, raters_judged=len(agreements),
                        rater_outliers=sum(1 for a in agreements if a.outlier))
    events.record(session, "review_built", actor, day=day.isoformat(), workers=len(entries),
                  raters_judged=built.raters_judged, rater_outliers=built.rater_outliers)
    return built


def build_queue(session: Session, day: date, *, sample_turns: int) -> list[ReviewEntry]:
    """One pending entry per temporarily blocked worker for ``day``, with fresh evidence.

    Entries already resolved today stay resolved unless the worker was blocked again since.
    """
    existing = {e.worker_id: e for e in session.exec(select(ReviewEntry).where(ReviewEntry.day == day))}
    entries = []
    for worker in session.exec(
        select(Worker).where(Worker.status == WorkerStatus.temporarily_blocked).order_by(Worker.id)
    ):
        entry = existing.get(worker.id) or ReviewEntry(day=day, worker_id=worker.id)
        decision = _blocking_decision(session, worker.id)
        states.move(entry, ReviewStatus.pending)
        entry.resolved_by = entry.resolved_at = None
        entry.note = ""
        entry.decision_id = decision.id if decision else None
        entry.reason = _block_reason(session, worker.id)
        entry.sample = _sample(session, worker.id, decision, sample_turns)
        entry.ratings = _rating_history(session, worker.id)
        entry.flags = _flag_counts(session, worker.id)
        session.add(entry)
        entries.append(entry)
    session.flush()
    return entries


def _blocking_decision(session: Session, worker_id: int) -> Optional[QualityDecision]:
    return session.exec(
        select(QualityDecision).where(QualityDecision.worker_id == worker_id, QualityDecision.outcome == "block")
        .order_by(col(QualityDecision.id).desc()).limit(1)
    ).first()


def _block_reason(session: Session, worker_id: int) -> str:
    event = session.exec(
        select(Event).where(Event.worker_id == worker_id, Event.kind == "worker_blocked")
        .order_by(col(Event.id).desc()).limit(1)
    ).first()
    return event.data.get("reason", "") if event else ""


def _recent_turns(session: Session, worker_id: int, limit: int) -> list[Turn]:
    return list(session.exec(
        select(Turn).where(Turn.worker_id == worker_id, Turn.status == TurnStatus.submitted)
        .order_by(col(Turn.id).desc()).limit(limit)
    ))


def _sample(session: Session, worker_id: int, decision: Optional[QualityDecision], size: int) -> list[dict]:
    recent = _recent_turns(session, worker_id, FLAG_HISTORY)
    chosen: list[int] = [w["turn_id"] for w in (decision.window if decision else []) if not (w["relevant"] and w["useful"])]
    chosen += [t.id for t in recent if t.flags]
    chosen += [t.id for t in recent]
    picked = list(dict.fromkeys(chosen))[:size]
    return [{"turn_id": turn_id, **_neighbours(session, turn_id)} for turn_id in picked]


def _neighbours(session: Session, turn_id: int) -> dict[str, Optional[int]]:
    """The turns before and after, found through the ``(conversation_id, index)`` unique index."""
    turn = session.get(Turn, turn_id)

    def at(index: int) -> Optional[int]:
        return session.exec(
            select(Turn.id).where(Turn.conversation_id == turn.conversation_id, Turn.index == index,
                                  Turn.status == TurnStatus.submitted)
        ).first()

    return {"before_id": at(turn.index - 1), "after_id": at(turn.index + 1)}


def _rating_history(session: Session, worker_id: int) -> dict[str, Any]:
    ratings = list(session.exec(
        select(Rating).where(Rating.author_id == worker_id).order_by(col(Rating.id).desc()).limit(RATING_HISTORY)
    ))
    count = len(ratings)
    return {
        "count": count,
        "mean_relevance": sum(r.relevant for r in ratings) / count if count else None,
        "mean_usefulness": sum(r.useful for r in ratings) / count if count else None,
        "recent": [{"rating_id": r.id, "turn_id": r.rated_turn_id, "rater_id": r.rater_id,
                    "relevant": r.relevant, "useful": r.useful, "at": r.created_at.isoformat()} for r in ratings],
    }


def _flag_counts(session: Session, worker_id: int) -> dict[str, int]:
    return dict(Counter(flag for turn in _recent_turns(session, worker_id, FLAG_HISTORY) for flag in turn.flags))


# ---- reading the queue --------------------------------------------------------------------------------


def queue_days(session: Session, limit: int = 14) -> list[date]:
    return list(session.exec(
        select(ReviewEntry.day).distinct().order_by(col(ReviewEntry.day).desc()).limit(limit)
    ))


def entries(session: Session, day: date, access: Access, *, status: Optional[str] = ReviewStatus.pending,
            after_id: int = 0, limit: int = 20, roles: Optional[Iterable[str]] = None,
            other_roles: bool = False) -> list[ReviewEntry]:
    """A page of the day's queue in id order (keyset pagination on the ``(day, status, id)`` index), of the
    workers ``access`` may see with one of ``roles`` (or, with ``other_roles``, of none of them)."""
    query = select(ReviewEntry).where(ReviewEntry.day == day, ReviewEntry.id > after_id,
                                      of_workers(access, ReviewEntry.worker_id))
    if status:
        query = query.where(ReviewEntry.status == status)
    if roles is not None:
        of_role = select(Worker.id).where(Worker.id == ReviewEntry.worker_id, col(Worker.role).in_(list(roles)))
        query = query.where(~of_role.exists() if other_roles else of_role.exists())
    return list(session.exec(query.order_by(ReviewEntry.id).limit(limit)))


_CURSOR = re.compile(r"([so])(\d{1,18}):([a-z,]{0,100})")


@dataclass(frozen=True)
class QueueCursor:
    """Where a walk through the queue stands. It carries the roles that were stalled when the walk began,
    so the order stays the same on every page even if a stall clears or begins meanwhile: no entry is
    skipped or shown twice. As text (the dashboard's ``after``): ``s12:student`` is "in the stalled roles'
    part, after entry 12", ``o40:student`` "in the rest, after entry 40", ``o40:`` "nothing was stalled"."""

    roles: tuple[str, ...]
    in_stalled: bool
    after_id: int

    def __str__(self) -> str:
        return f"{'s' if self.in_stalled else 'o'}{self.after_id}:{','.join(self.roles)}"

    @classmethod
    def parse(cls, text: str) -> "QueueCursor":
        match = _CURSOR.fullmatch(text)
        roles = tuple(r for r in match.group(3).split(",") if r) if match else ()
        known = {r.value for r in Role}
        if match is None or not set(roles) <= known or (match.group(1) == "s" and not roles):
            raise InvalidInput(f"not a place in the review queue: {text[:40]!r}", "after")
        return cls(roles=roles, in_stalled=match.group(1) == "s", after_id=int(match.group(2)))


@dataclass(frozen=True)
class QueuePage:
    entries: list[ReviewEntry]
    stalled: frozenset[str]  # the roles put first (stalled in some batch when the walk began)
    next: Optional[str]  # the cursor of the next page, None on the last page


def queue_page(session: Session, day: date, access: Access, *, status: Optional[str] = ReviewStatus.pending,
               after: Optional[str] = None, limit: int = 20) -> QueuePage:
    """One page of the day's queue in its one order: the workers of roles stalled in some batch first
    (unblocking one of them moves a batch again), then everyone else, each part in entry id order.

    Every page is at most two keyset reads over the ``(day, status, id)`` index; ``after`` is the
    previous page's ``next`` (``QueueCursor``). Only the workers ``access`` may see are listed."""
    if after:
        cursor = QueueCursor.parse(after)
    else:
        roles = tuple(sorted(stall.stalled_roles(session)))
        cursor = QueueCursor(roles=roles, in_stalled=bool(roles), after_id=0)
    rows: list[tuple[bool, ReviewEntry]] = []
    if cursor.in_stalled:
        rows = [(True, e) for e in entries(session, day, access, status=status, after_id=cursor.after_id,
                                           limit=limit + 1, roles=cursor.roles)]
    if len(rows) <= limit:
        rows += [(False, e) for e in entries(session, day, access, status=status,
                                             after_id=0 if cursor.in_stalled else cursor.after_id,
                                             limit=limit + 1 - len(rows), roles=cursor.roles or None,
                                             other_roles=True)]
    more = len(rows) > limit
    rows = rows[:limit]
    last = QueueCursor(cursor.roles, rows[-1][0], rows[-1][1].id) if more else None
    return QueuePage(entries=[e for _, e in rows], stalled=frozenset(cursor.roles),
                     next=str(last) if last else None)


def turns_by_id(session: Session, ids: Iterable[Optional[int]], access: Access) -> dict[int, Turn]:
    """The turns of these ids that ``access`` may see (of its batches)."""
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    return {t.id: t for t in session.exec(select(Turn).where(col(Turn.id).in_(wanted),
                                                             of_conversations(access, Turn.conversation_id)))}


def ratings_received(session: Session, turn_ids: Iterable[int]) -> dict[int, Rating]:
    """The rating each turn received (from the next turn), keyed by the rated turn."""
    wanted = set(turn_ids)
    if not wanted:
        return {}
    return {r.rated_turn_id: r for r in session.exec(select(Rating).where(col(Rating.rated_turn_id).in_(wanted)))}


# ---- deciding -----------------------------------------------------------------------------------------


PERMANENT_BLOCK = "blocked permanently after review"


def provider_name(session: Session, worker: Worker, default: str) -> str:
    """The crowd provider a worker works through: that of the batch of their latest turn."""
    name = session.exec(
        select(Batch.provider).join(Conversation, Conversation.batch_id == Batch.id)
        .join(Turn, Turn.conversation_id == Conversation.id)
        .where(Turn.worker_id == worker.id).order_by(col(Turn.id).desc()).limit(1)
    ).first()
    return name or default


def block_permanently(session: Session, worker: Worker, *, actor: str, note: str = "") -> bool:
    """Block a worker for good; False if they already were (a double click). The platform is told after
    this commits (``pipeline.carry_out_status``)."""
    if worker.status == WorkerStatus.blocked:
        return False
    monitor.block_worker(session, worker, permanent=True, actor=actor, reason=PERMANENT_BLOCK, note=note)
    _resolve(session, worker, ReviewStatus.blocked, actor, note)
    return True


def unblock(session: Session, worker: Worker, *, actor: str, note: str = "") -> bool:
    """Let a worker take turns again with a fresh quality window; False if they were not blocked. The
    platform is told after this commits (``pipeline.carry_out_status``)."""
    if worker.status == WorkerStatus.active:
        return False
    monitor.unblock_worker(session, worker, actor=actor, note=note)
    _resolve(session, worker, ReviewStatus.unblocked, actor, note)
    return True


def _resolve(session: Session, worker: Worker, status: ReviewStatus, actor: str, note: str) -> None:
    """Close every open entry of the worker, whichever day's queue it sits in."""
    session.execute(
        states.update_to(ReviewEntry, status).where(ReviewEntry.worker_id == worker.id)
        .values(resolved_by=actor, resolved_at=utcnow(), note=note)
    )
