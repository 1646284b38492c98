"""Read-only summaries for people: how far a batch has come, what each worker did, which tasks are used.

Money comes from ``turkflow.hits.money`` so every view of a batch agrees on what "spent" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from turkflow.errors import NotFound
from turkflow.hits.lifecycle import committed_cents
from turkflow.hits.money import Spend, spend
from turkflow.quality import stall
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Conversation,
    ConversationStatus,
    Hit,
    HitStatus,
    Task,
    Turn,
    TurnStatus,
    Worker,
    utcnow,
)


@dataclass(frozen=True)
class BatchProgress:
    batch: Batch
    conversations: int
    completed: int
    active: int
    cancelled: int
    turns_submitted: int
    hits_open: int  # published and waiting for a worker, or held by one
    hits_taken: int  # of those, held by a worker right now (an accepted assignment, lease not run out)
    hits_pending: int  # written but not yet published (the reconciler publishes them)
    spend: Spend
    committed_cents: int  # what the batch is bound to pay, the figure the budget is checked against
    stalled: tuple[str, ...] = ()  # one message per stalled role (turkflow.quality.stall)
    stalled_roles: tuple[str, ...] = ()  # those roles, in the same order

    @property
    def finished(self) -> bool:
        return self.batch.status in (BatchStatus.completed, BatchStatus.cancelled)


def batch_progress(session: Session, batch_id: int, now: Optional[datetime] = None) -> BatchProgress:
    now = now or utcnow()
    batch = session.get(Batch, batch_id)
    if batch is None:
        raise NotFound(f"batch {batch_id} does not exist")
    by_status = dict(session.exec(
        select(Conversation.status, func.count()).where(Conversation.batch_id == batch_id)
        .group_by(Conversation.status)
    ).all())
    in_batch = col(Turn.conversation_id).in_(select(Conversation.id).where(Conversation.batch_id == batch_id))
    submitted = session.exec(
        select(func.count()).select_from(Turn).where(in_batch, Turn.status == TurnStatus.submitted)
    ).one()
    hits = dict(session.exec(
        select(Hit.status, func.count()).join(Turn, Turn.id == Hit.turn_id).where(in_batch).group_by(Hit.status)
    ).all())
    stalls = stall.stalls(session, batch_id)
    held = select(Assignment.id).where(Assignment.hit_id == Hit.id, Assignment.status == AssignmentStatus.accepted)
    taken = session.exec(
        select(func.count()).select_from(Hit).join(Turn, Turn.id == Hit.turn_id)
        .where(in_batch, Hit.status == HitStatus.open, held.exists(),
               or_(col(Hit.lease_expires_at).is_(None), col(Hit.lease_expires_at) >= now))
    ).one()
    return BatchProgress(
        batch=batch,
        conversations=sum(by_status.values()),
        completed=by_status.get(ConversationStatus.completed, 0),
        active=by_status.get(ConversationStatus.active, 0),
        cancelled=by_status.get(ConversationStatus.cancelled, 0),
        turns_submitted=submitted,
        hits_open=hits.get(HitStatus.open, 0),
        hits_taken=taken,
        hits_pending=hits.get(HitStatus.pending, 0),
        spend=spend(session, batch_id=batch_id),
        committed_cents=committed_cents(session, batch_id),
        stalled=tuple(stall.describe(s.role, s.workers, s.waiting) for s in stalls),
        stalled_roles=tuple(s.role for s in stalls),
    )


def recent_batches(session: Session, limit: int = 20) -> list[Batch]:
    """Newest first: the batches a requester is most likely asking about."""
    return list(session.exec(select(Batch).order_by(col(Batch.id).desc()).limit(limit)))


@dataclass(frozen=True)
class WorkerActivity:
    worker: Worker
    turns_submitted: int
    last_turn_at: Optional[datetime]


def worker_activity(session: Session, role: Optional[str] = None, status: Optional[str] = None) -> list[WorkerActivity]:
    """Workers (optionally of one role or status) with how many turns they wrote and when they last did."""
    turns = (
        select(Turn.worker_id, func.count().label("n"), func.max(Turn.submitted_at).label("last"))
        .where(Turn.status == TurnStatus.submitted).group_by(Turn.worker_id).subquery()
    )
    query = select(Worker, turns.c.n, turns.c.last).outerjoin(turns, turns.c.worker_id == Worker.id)
    if role:
        query = query.where(Worker.role == role)
    if status:
        query = query.where(Worker.status == status)
    return [WorkerActivity(worker, n or 0, last) for worker, n, last in session.exec(query.order_by(Worker.id))]


@dataclass(frozen=True)
class TaskUsage:
    task: Task
    conversations: int


def task_usage(session: Session) -> list[TaskUsage]:
    """Every loaded task document with the number of conversations about it."""
    used = (
        select(Conversation.task_id, func.count().label("n")).group_by(Conversation.task_id).subquery()
    )
    rows = session.exec(select(Task, used.c.n).outerjoin(used, used.c.task_id == Task.id).order_by(Task.key))
    return [TaskUsage(task, n or 0) for task, n in rows]


# ---- what a worker's pages say of pay and time, as a crowd platform's study page does ------------------


@dataclass(frozen=True)
class PayTerms:
    """A batch's pay for one turn, in the words a worker's page shows: the reward, and the bonus with its rule
    (the monitor's: over the writer's last ``window`` rated turns, both shares at or above ``above``)."""

    reward_cents: int
    bonus_cents: int
    above: float
    window: int
    currency: str


def pay_terms(session: Session, conversation_ids: list[int]) -> dict[int, PayTerms]:
    """Each conversation's pay terms (those of its batch)."""
    if not conversation_ids:
        return {}
    rows = session.exec(select(Conversation.id, Batch.reward_cents, Batch.bonus_cents, Batch.bonus_above,
                               Batch.quality_window, Batch.currency)
                        .join(Batch, Batch.id == Conversation.batch_id)
                        .where(col(Conversation.id).in_(conversation_ids))).all()
    return {row[0]: PayTerms(*row[1:]) for row in rows}


# How many of a role's latest turns say how long a turn takes to write.
PACE_TURNS = 100


def minutes_to_write(session: Session, role: str) -> Optional[float]:
    """The median minutes from taking a turn of ``role`` to submitting it, over its latest ``PACE_TURNS``
    turns; None before five of them exist (the page then shows the study's estimate)."""
    spans = session.exec(
        select(Assignment.accepted_at, Assignment.submitted_at).join(Hit, Hit.id == Assignment.hit_id)
        .join(Turn, Turn.id == Hit.turn_id)
        .where(Turn.role == role, col(Assignment.submitted_at).is_not(None))
        .order_by(col(Assignment.id).desc()).limit(PACE_TURNS)).all()
    if len(spans) < 5:
        return None
    minutes = sorted((submitted - accepted).total_seconds() / 60 for accepted, submitted in spans)
    return minutes[len(minutes) // 2]


def earned_cents(session: Session, worker_id: int, currency: str) -> int:
    """What the worker has earned in ``currency``, a batch's (Prolific pays in its workspace's, GBP or USD):
    rewards approved and bonuses paid (``money.spend`` without the fees), in the batches paid in it."""
    paid = spend(session, worker_id=worker_id, currency=currency)
    return paid.rewards_cents + paid.bonuses_cents
