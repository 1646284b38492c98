"""What happens after a submission, as plain functions the Celery tasks call.

Each step runs in its own short transaction so the next turn's HIT opens as soon as possible and a slow
provider call never holds a database lock. Every step is safe to run twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Optional

from turkflow import events
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.hits.provider import Providers
from sqlmodel import select

from turkflow.models import Assignment, Batch, Bonus, BonusStatus, Conversation, Hit, Rating, Turn, Worker, utcnow
from turkflow.quality import checks, monitor


@dataclass
class AfterSubmission:
    opened_hit_id: Optional[int] = None
    blocked_worker_id: Optional[int] = None
    bonus_ids: list[int] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def open_next_turn(settings: Settings, providers: Providers, conversation_id: int) -> Optional[int]:
    """Advance the conversation and publish the new turn's HIT; returns the HIT id if one was opened."""
    with session_scope(settings.database_url) as session:
        hit = lifecycle.advance_conversation(session, conversation_id)
        hit_id = hit.id if hit else None
        provider_name = hit.provider if hit else None
    if hit_id is not None:
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
    with session_scope(settings.database_url) as session:
        conversation_id = session.get(Turn, turn_id).conversation_id
    return open_next_turn(settings, providers, conversation_id)


def review_submission(settings: Settings, providers: Providers, turn_id: int) -> AfterSubmission:
    """Judge the author of the turn a submission rated, then flag the submission's content for review."""
    result = AfterSubmission()
    with session_scope(settings.database_url) as session:
        rating = session.exec(select(Rating).where(Rating.rater_turn_id == turn_id)).first()
        rating_id = rating.id if rating else None
    if rating_id is not None:
        judge(settings, providers, rating_id, result)
    result.flags = check_content(settings, turn_id)
    return result


def check_content(settings: Settings, turn_id: int) -> list[str]:
    """Flag the submitted turn for review (near-empty, repeated, copied, not English); returns new flags."""
    with session_scope(settings.database_url) as session:
        return checks.check_turn(session, turn_id, checks.CheckPolicy.of(settings))


def judge(settings: Settings, providers: Providers, rating_id: int, result: AfterSubmission) -> None:
    """Run the quality monitor on one rating and carry out a new block through the provider."""
    with session_scope(settings.database_url) as session:
        evaluation = monitor.evaluate_rating(session, rating_id)
        if evaluation is None:
            return
        if evaluation.blocked:
            author = session.get(Worker, evaluation.decision.worker_id)
            provider_name = monitor.batch_of_rating(session, rating_id).provider
            providers.get(provider_name).block(session, author, reason="low ratings", permanent=False)
            result.blocked_worker_id = author.id
        if evaluation.bonus:
            result.bonus_ids.append(evaluation.bonus.id)


def pay_bonus(settings: Settings, providers: Providers, bonus_id: int) -> bool:
    """Pay a recorded bonus through its batch's provider; True once it is paid (now or before)."""
    with session_scope(settings.database_url) as session:
        bonus = session.get(Bonus, bonus_id)
        if bonus.status == BonusStatus.paid:
            return True
        turn = session.get(Turn, bonus.turn_id)
        batch = session.get(Batch, session.get(Conversation, turn.conversation_id).batch_id)
        providers.get(batch.provider).pay_bonus(
            session, bonus, session.get(Worker, bonus.worker_id), session.get(Assignment, bonus.assignment_id)
        )
        bonus.status = BonusStatus.paid
        bonus.paid_at = utcnow()
        session.add(bonus)
        events.record(session, "bonus_paid", "provider", batch_id=batch.id, conversation_id=turn.conversation_id,
                      turn_id=turn.id, worker_id=bonus.worker_id, bonus_id=bonus.id, amount_cents=bonus.amount_cents)
    return True


@dataclass
class Repairs:
    leases_released: int = 0
    conversations_advanced: list[int] = field(default_factory=list)
    hits_published: list[int] = field(default_factory=list)
    ratings_judged: list[int] = field(default_factory=list)
    unpaid_bonuses: list[int] = field(default_factory=list)


def reconcile(settings: Settings, providers: Providers) -> Repairs:
    """Repair what crashes and lost messages left: stale leases, stalled conversations, unpublished HITs."""
    repairs = Repairs()
    now = utcnow()
    grace = now - timedelta(seconds=settings.stuck_after_seconds)
    with session_scope(settings.database_url) as session:
        repairs.leases_released = lifecycle.release_expired_leases(session, now)
        stalled = lifecycle.stalled_conversations(session, grace)
        pending = [(hit_id, session.get(Hit, hit_id).provider) for hit_id in lifecycle.unpublished_hits(session, grace)]
        unjudged = monitor.unjudged_ratings(session, grace)
        repairs.unpaid_bonuses = monitor.unpaid_bonuses(session, grace)
    for conversation_id in stalled:
        hit_id = open_next_turn(settings, providers, conversation_id)
        if hit_id is not None:
            repairs.conversations_advanced.append(conversation_id)
    for hit_id, provider_name in pending:
        publish(settings, providers, hit_id, provider_name)
        repairs.hits_published.append(hit_id)
    for rating_id in unjudged:
        outcome = AfterSubmission()
        judge(settings, providers, rating_id, outcome)
        repairs.ratings_judged.append(rating_id)
        repairs.unpaid_bonuses.extend(outcome.bonus_ids)
    return repairs
