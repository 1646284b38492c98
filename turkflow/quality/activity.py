"""Hourly activity and quality per batch, and snapshots of each batch's progress and money.

The dashboard's charts (turns per hour, quality over time, intent distribution) read these rollups, a
few rows per batch-hour, instead of counting a million turns on every page view. A refresh recomputes
the hours since the last rolled-up hour (one hour back, for transactions that committed late) from the
``submitted_at`` index and replaces them, so running it twice, or concurrently with itself, never counts
a turn twice. Progress and money (``turkflow.reports.batch_progress``, seconds at a million turns) are
counted by the same periodic task and stored as a ``BatchSnapshot``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Optional

from sqlalchemy import delete, func
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from turkflow.models import Batch, BatchHour, BatchSnapshot, BatchStatus, Conversation, Rating, Turn, utcnow
from turkflow.reports import BatchProgress, batch_progress


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def refresh(session: Session, since: Optional[datetime] = None) -> int:
    """Recompute the rollups from ``since`` (default: the last rolled-up hour minus one); returns rows written."""
    if since is None:
        last = session.exec(select(func.max(BatchHour.hour))).one()
        since = last - timedelta(hours=1) if last else None
    start = _hour(since) if since else None
    rated = aliased(Turn)
    query = (
        select(Conversation.batch_id, Turn.role, Turn.label, Turn.submitted_at, rated.role, Rating.relevant,
               Rating.useful)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .outerjoin(Rating, Rating.rater_turn_id == Turn.id)
        .outerjoin(rated, rated.id == Rating.rated_turn_id)
        .where(col(Turn.submitted_at).is_not(None))
    )
    if start is not None:
        query = query.where(Turn.submitted_at >= start)
    rows: dict[tuple[int, datetime, str], BatchHour] = {}

    def row(batch_id: int, hour: datetime, role: str) -> BatchHour:
        key = (batch_id, hour, role)
        if key not in rows:
            rows[key] = BatchHour(batch_id=batch_id, hour=hour, role=role, labels={})
        return rows[key]

    for batch_id, role, label, submitted_at, rated_role, relevant, useful in session.execute(
        query.execution_options(yield_per=5000)
    ):
        hour = _hour(submitted_at)
        mine = row(batch_id, hour, role)
        mine.turns += 1
        if label:
            mine.labels[label] = mine.labels.get(label, 0) + 1
        if rated_role is not None:
            theirs = row(batch_id, hour, rated_role)
            theirs.rated += 1
            theirs.relevant += int(relevant)
            theirs.useful += int(useful)
    stale = delete(BatchHour)
    if start is not None:
        stale = stale.where(BatchHour.hour >= start)
    session.execute(stale)
    session.add_all(rows.values())
    session.flush()
    return len(rows)


@dataclass
class BatchActivity:
    """What the batch page charts: per-hour turns, per-day quality by role, label counts by role."""

    hours: list[tuple[datetime, int]] = field(default_factory=list)
    quality: dict[str, list[tuple[date, float, float, int]]] = field(default_factory=dict)
    labels: dict[str, Counter] = field(default_factory=dict)
    as_of: Optional[datetime] = None


def batch_activity(session: Session, batch_id: int, now: datetime, hours: int = 48) -> BatchActivity:
    """Read a batch's rollups (one indexed range on ``(batch_id, hour, role)``) into chart series."""
    since = _hour(now) - timedelta(hours=hours - 1)
    per_hour: Counter = Counter()
    per_day: dict[str, dict[date, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    labels: dict[str, Counter] = defaultdict(Counter)
    as_of = None
    for r in session.exec(select(BatchHour).where(BatchHour.batch_id == batch_id).order_by(BatchHour.hour)):
        as_of = r.hour
        if r.hour >= since:
            per_hour[r.hour] += r.turns
        labels[r.role].update(r.labels)
        day = per_day[r.role][r.hour.date()]
        day[0] += r.rated
        day[1] += r.relevant
        day[2] += r.useful
    activity = BatchActivity(
        hours=[(since + timedelta(hours=i), per_hour.get(since + timedelta(hours=i), 0)) for i in range(hours)],
        labels=dict(labels), as_of=as_of,
    )
    for role, days in per_day.items():
        activity.quality[role] = [(d, rel / n, use / n, n) for d, (n, rel, use) in sorted(days.items()) if n]
    return activity


FINISHED = (BatchStatus.completed, BatchStatus.cancelled)


def progress_record(progress: BatchProgress) -> dict[str, Any]:
    """A batch's progress as plain values (what a snapshot stores and the batch page shows)."""
    spend = progress.spend
    return {
        "conversations": progress.conversations, "completed": progress.completed, "active": progress.active,
        "cancelled": progress.cancelled, "turns_submitted": progress.turns_submitted,
        "hits_open": progress.hits_open, "hits_taken": progress.hits_taken, "hits_pending": progress.hits_pending,
        "committed_cents": progress.committed_cents,
        "spend": {"rewards_cents": spend.rewards_cents, "bonuses_cents": spend.bonuses_cents,
                  "fees_cents": spend.fees_cents, "pending_cents": spend.pending_cents,
                  "total_cents": spend.total_cents},
    }


def snapshot_batches(session: Session, now: Optional[datetime] = None) -> list[int]:
    """Count every batch still running, and each finished one once more; returns the batches counted."""
    now = now or utcnow()
    known = {s.batch_id: s for s in session.exec(select(BatchSnapshot))}
    counted = []
    for batch in session.exec(select(Batch).order_by(Batch.id)):
        snapshot = known.get(batch.id)
        if snapshot is not None and batch.status in FINISHED and snapshot.status == batch.status:
            continue
        count_batch(session, batch, now, snapshot)
        counted.append(batch.id)
    session.flush()
    return counted


def count_batch(session: Session, batch: Batch, now: datetime, snapshot: Optional[BatchSnapshot] = None) -> None:
    """Count ``batch``'s progress now into its snapshot (the dashboard's "Count now", and beat's sweep)."""
    snapshot = snapshot or session.get(BatchSnapshot, batch.id) or BatchSnapshot(batch_id=batch.id,
                                                                                 status=batch.status)
    snapshot.at, snapshot.status = now, batch.status
    snapshot.progress = progress_record(batch_progress(session, batch.id, now))
    session.add(snapshot)


def batch_numbers(session: Session, batch_id: int, now: datetime) -> tuple[dict[str, Any], Optional[datetime]]:
    """The batch's progress and when it was counted: the snapshot, or counted now if there is none yet."""
    snapshot = session.get(BatchSnapshot, batch_id)
    if snapshot is not None:
        return snapshot.progress, snapshot.at
    return progress_record(batch_progress(session, batch_id, now)), None
