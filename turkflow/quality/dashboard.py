"""What each page of the review dashboard shows, as plain reads over a session.

Every list is a keyset page (``before``/``after`` an id) over an index, and every page reads a bounded
number of rows: the newest N of something, a stored review entry, a conversation's own turns or a
batch's hourly rollups. No page counts or sorts a whole table, so they stay fast at a million turns.

Every read is for someone (``turkflow.access.Access``): a requester reads the batches they may see, the
workers who wrote in them and, of a worker, only what they did there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Optional

from sqlalchemy import func
from sqlmodel import Session, col, select

from turkflow import access as seen
from turkflow.access import Access
from turkflow.errors import NotFound
from turkflow.protocols import surveys
from turkflow.models import (
    Batch,
    BatchGrant,
    Bonus,
    Conversation,
    ConversationStatus,
    Event,
    QualityDecision,
    RaterAgreement,
    Rating,
    Requester,
    ReviewEntry,
    Task,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
)
from turkflow.protocols.questions import document_items
from turkflow.quality import activity, reliability, review, stall

PAGE = 20
BLOCK_EVENTS = ("worker_blocked", "worker_unblocked")


# ---- the review queue ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampledTurn:
    before: Optional[Turn]
    turn: Turn
    after: Optional[Turn]
    rating: Optional[Rating]  # what the next worker said about ``turn``


@dataclass(frozen=True)
class QueueItem:
    entry: ReviewEntry
    worker: Worker
    decision: Optional[QualityDecision]
    sample: list[SampledTurn]
    changeable: bool  # whether the reader may block or unblock the worker (``access.may_change_status``)


@dataclass(frozen=True)
class ReviewQueue:
    day: Optional[date]
    days: list[date]
    items: list[QueueItem]
    next_after: Optional[str]  # cursor to pass as ``after`` for the next page (``review.QueueCursor``)
    outliers: list[tuple[RaterAgreement, Worker]]
    raters: tuple[int, Optional[float]]  # raters judged on the latest run, their mean agreement
    blocked_not_queued: int  # temporarily blocked since the queue was built
    stalled: list[str] = field(default_factory=list)  # banners: batches whose role has nobody left
    identified: list[tuple[dict, Worker]] = field(default_factory=list)  # raters whose ratings stop counting


def review_queue(session: Session, access: Access, day: Optional[date], status: Optional[str],
                 after: Optional[str] = None, limit: int = PAGE) -> ReviewQueue:
    """A page of the review queue (``review.queue_page``: stalled roles first) with each entry's evidence: the
    workers ``access`` may see, each with their sampled turns of batches it may see."""
    days = review.queue_days(session)
    day = day or (days[0] if days else None)
    page = review.queue_page(session, day, access, status=status, after=after, limit=limit) if day else None
    entries = page.entries if page else []
    next_after = page.next if page else None
    workers = _workers(session, [e.worker_id for e in entries])
    ids = [i for e in entries for s in e.sample for i in (s["turn_id"], s.get("before_id"), s.get("after_id"))]
    turns = review.turns_by_id(session, ids, access)
    ratings = review.ratings_received(session, [s["turn_id"] for e in entries for s in e.sample])
    decisions = {d.id: d for d in session.exec(
        select(QualityDecision).where(col(QualityDecision.id).in_([e.decision_id for e in entries if e.decision_id]))
    )} if entries else {}
    items = [
        QueueItem(
            entry=e, worker=workers[e.worker_id], decision=decisions.get(e.decision_id),
            sample=[SampledTurn(turns.get(s.get("before_id")), turns[s["turn_id"]], turns.get(s.get("after_id")),
                                ratings.get(s["turn_id"])) for s in e.sample if s["turn_id"] in turns],
            changeable=seen.may_change_status(session, access, e.worker_id),
        )
        for e in entries
    ]
    latest = reliability.latest_day(session)
    outliers = reliability.outliers(session, latest, access) if latest else []
    rater_workers = _workers(session, [o.rater_id for o in outliers])
    queued = select(ReviewEntry.id).where(ReviewEntry.worker_id == Worker.id, ReviewEntry.day == day)
    waiting = session.exec(
        select(func.count()).select_from(Worker)
        .where(Worker.status == WorkerStatus.temporarily_blocked, ~queued.exists(), seen.of_workers(access, Worker.id))
    ).one()
    model = reliability.Model()
    found = reliability.identified(session, access, limit=PAGE)
    identified_workers = _workers(session, [r.rater_id for r in found])
    return ReviewQueue(
        day=day, days=days, items=items, next_after=next_after, stalled=stall.banners(session, access),
        identified=[({**reliability.evidence(model, reliability.record_of(r)), "identified_after": r.identified_after},
                     identified_workers[r.rater_id]) for r in found],
        outliers=[(o, rater_workers[o.rater_id]) for o in outliers],
        raters=reliability.summary(session, latest) if latest else (0, None),
        blocked_not_queued=waiting,
    )


def _workers(session: Session, ids: list[int]) -> dict[int, Worker]:
    if not ids:
        return {}
    return {w.id: w for w in session.exec(select(Worker).where(col(Worker.id).in_(set(ids))))}


# ---- workers ------------------------------------------------------------------------------------------


def workers(session: Session, access: Access, status: Optional[str], before_id: Optional[int],
            limit: int = 50) -> list[Worker]:
    query = select(Worker).where(seen.of_workers(access, Worker.id))
    if status:
        query = query.where(Worker.status == status)
    if before_id:
        query = query.where(Worker.id < before_id)
    return list(session.exec(query.order_by(col(Worker.id).desc()).limit(limit)))


SECTIONS = {
    "turns": "Turns written",
    "received": "Ratings received",
    "given": "Ratings given",
    "bonuses": "Bonuses",
    "decisions": "Quality decisions",
    "blocks": "Blocks and unblocks",
}


def worker_section(session: Session, access: Access, worker_id: int, section: str, before_id: Optional[int],
                   limit: int) -> list[Any]:
    """The newest rows of one kind about a worker, each list through a ``(worker, id)`` index: of what they
    did in batches ``access`` may see (their blocks are about them, in every batch)."""
    rated = select(Rating.id).where(Rating.id == QualityDecision.rating_id, seen.of_turns(access, Rating.rated_turn_id))
    newest_first = {
        "turns": (Turn, Turn.worker_id, seen.of_conversations(access, Turn.conversation_id)),
        "received": (Rating, Rating.author_id, seen.of_turns(access, Rating.rated_turn_id)),
        "given": (Rating, Rating.rater_id, seen.of_turns(access, Rating.rated_turn_id)),
        "bonuses": (Bonus, Bonus.worker_id, seen.of_turns(access, Bonus.turn_id)),
        "decisions": (QualityDecision, QualityDecision.worker_id, rated.exists()),
        "blocks": (Event, Event.worker_id, None),
    }
    if section not in newest_first:
        raise NotFound(f"no section {section!r}; choose one of {', '.join(SECTIONS)}")
    model, owner, visible = newest_first[section]
    query = select(model).where(owner == worker_id)
    if visible is not None and not access.admin:  # an admin's is the index's plain walk
        query = query.where(visible)
    if section == "turns":
        query = query.where(Turn.status == TurnStatus.submitted)
    if section == "blocks":
        query = query.where(col(Event.kind).in_(BLOCK_EVENTS))
    if before_id:
        query = query.where(model.id < before_id)
    return list(session.exec(query.order_by(col(model.id).desc()).limit(limit)))


@dataclass(frozen=True)
class WorkerPage:
    worker: Worker
    sections: dict[str, list[Any]]
    bonus_cents: int
    agreement: Optional[RaterAgreement]
    quality: list[tuple[int, float, float]]  # (decision id, mean relevance, mean usefulness), oldest first
    turns: dict[int, Turn]  # turns the rating rows point at, for their text
    changeable: bool  # whether the reader may block or unblock the worker (``access.may_change_status``)


def worker_page(session: Session, access: Access, worker_id: int, per_section: int = 10) -> WorkerPage:
    worker = seen.worker(session, access, worker_id)
    sections = {name: worker_section(session, access, worker_id, name, None, per_section) for name in SECTIONS}
    quality = worker_section(session, access, worker_id, "decisions", None, 50)
    agreement = session.exec(
        select(RaterAgreement).where(RaterAgreement.rater_id == worker_id)
        .order_by(col(RaterAgreement.day).desc()).limit(1)
    ).first()
    rated = [r.rated_turn_id for r in sections["received"] + sections["given"]]
    return WorkerPage(
        worker=worker, sections=sections,
        bonus_cents=session.exec(
            select(func.coalesce(func.sum(Bonus.amount_cents), 0)).where(Bonus.worker_id == worker_id,
                                                                          seen.of_turns(access, Bonus.turn_id))
        ).one(),
        agreement=agreement,
        quality=[(d.id, d.mean_relevance, d.mean_usefulness) for d in reversed(quality)],
        turns=review.turns_by_id(session, rated, access),
        changeable=seen.may_change_status(session, access, worker_id),
    )


# ---- batches ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchPage:
    batch: Batch
    progress: dict[str, Any]  # see ``activity.progress_record``
    counted_at: Optional[datetime]  # when the progress was counted (None: just now)
    activity: activity.BatchActivity
    stuck: list[Conversation]  # active and idle the longest, oldest first
    stuck_after: timedelta
    waiting: set[int]  # of those, conversations whose next turn is open (waiting for a worker)
    tasks: dict[int, Task] = field(default_factory=dict)
    stalled: list[str] = field(default_factory=list)  # banners: roles whose waiting turns have nobody left
    surveys: list[surveys.QuestionCounts] = field(default_factory=list)  # end-of-dialog answers, counted
    owner: Optional[str] = None  # the requester it belongs to (None: the operator's)
    granted: list[str] = field(default_factory=list)  # requesters it is also open to


def batches(session: Session, access: Access, before_id: Optional[int], limit: int = PAGE) -> list[Batch]:
    query = select(Batch).where(seen.of_batches(access, Batch.id))
    if before_id:
        query = query.where(Batch.id < before_id)
    return list(session.exec(query.order_by(col(Batch.id).desc()).limit(limit)))


def batch_page(session: Session, access: Access, batch_id: int, now: datetime, stuck_after: timedelta) -> BatchPage:
    batch = seen.batch(session, access, batch_id)
    progress, counted_at = activity.batch_numbers(session, batch_id, now)
    stuck = list(session.exec(
        select(Conversation).where(Conversation.batch_id == batch_id, Conversation.status == ConversationStatus.active,
                                   Conversation.updated_at < now - stuck_after)
        .order_by(Conversation.updated_at).limit(PAGE)
    ))
    waiting = set(session.exec(
        select(Turn.conversation_id).where(col(Turn.conversation_id).in_([c.id for c in stuck]),
                                           Turn.status == TurnStatus.open)
    )) if stuck else set()
    return BatchPage(batch=batch, progress=progress, counted_at=counted_at,
                     activity=activity.batch_activity(session, batch_id, now), stuck=stuck,
                     stuck_after=stuck_after, waiting=waiting, tasks=_tasks(session, [c.task_id for c in stuck]),
                     stalled=stall.banners(session, access, batch_id), surveys=surveys.distribution(session, batch_id),
                     owner=session.get(Requester, batch.requester_id).username if batch.requester_id else None,
                     granted=list(session.exec(select(Requester.username).join(
                         BatchGrant, BatchGrant.requester_id == Requester.id).where(BatchGrant.batch_id == batch_id)
                         .order_by(Requester.username))))


def _tasks(session: Session, ids: list[int]) -> dict[int, Task]:
    if not ids:
        return {}
    return {t.id: t for t in session.exec(select(Task).where(col(Task.id).in_(set(ids))))}


@dataclass(frozen=True)
class ConversationList:
    batch: Batch
    conversations: list[Conversation]
    tasks: dict[int, Task]
    next_before: Optional[int]


def batch_conversations(session: Session, access: Access, batch_id: int, status: Optional[str],
                        before_id: Optional[int], limit: int = 50) -> ConversationList:
    batch = seen.batch(session, access, batch_id)
    query = select(Conversation).where(Conversation.batch_id == batch_id)
    if status:
        query = query.where(Conversation.status == status)
    if before_id:
        query = query.where(Conversation.id < before_id)
    rows = list(session.exec(query.order_by(col(Conversation.id).desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return ConversationList(batch=batch, conversations=rows, tasks=_tasks(session, [c.task_id for c in rows]),
                            next_before=rows[-1].id if more else None)


# ---- a conversation -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatTurn:
    turn: Turn
    worker: Optional[Worker]
    rating: Optional[Rating]  # what the next worker said about this turn
    shared: list[dict[str, Any]]  # document items the teacher showed with this turn
    danger: list[dict[str, Any]]  # shared items the student marked as dangerous


@dataclass(frozen=True)
class ConversationPage:
    conversation: Conversation
    batch: Batch
    task: Task
    items: list[dict[str, Any]]
    turns: list[ChatTurn]
    surveys: dict[str, list]  # role -> its end-of-dialog answers ({"Question", "Answer"}), once given


def conversation_page(session: Session, access: Access, conversation_id: int) -> ConversationPage:
    """The chat as workers saw it: every turn (bounded by the batch's max turns) with labels and ratings."""
    conversation = seen.conversation(session, access, conversation_id)
    task = session.get(Task, conversation.task_id)
    items = document_items(task)
    by_id = {item["id"]: item for item in items}
    turns = list(session.exec(select(Turn).where(Turn.conversation_id == conversation_id).order_by(Turn.index)))
    authors = _workers(session, [t.worker_id for t in turns if t.worker_id])
    ratings = review.ratings_received(session, [t.id for t in turns])
    return ConversationPage(
        conversation=conversation, batch=session.get(Batch, conversation.batch_id), task=task, items=items,
        turns=[
            ChatTurn(turn=t, worker=authors.get(t.worker_id), rating=ratings.get(t.id),
                     shared=[by_id[i] for i in t.answers.get("shared", []) if i in by_id],
                     danger=[by_id[i] for i in t.answers.get("danger", []) if i in by_id])
            for t in turns
        ],
        surveys=surveys.questionnaires(session, [conversation_id])[conversation_id],
    )
