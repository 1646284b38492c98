"""Celery tasks. Each one parses its arguments, calls one domain function and enqueues follow-ups."""

from __future__ import annotations

import logging

from celery.exceptions import SoftTimeLimitExceeded

from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.quality import activity, review
from workers.app import celery_app, providers, settings

log = logging.getLogger("turkflow.tasks")

RETRY = {"autoretry_for": (Exception,), "retry_backoff": 2, "retry_backoff_max": 300, "max_retries": 20,
         "retry_jitter": True}


@celery_app.task(name="workers.tasks.turn_submitted", **RETRY)
def turn_submitted(turn_id: int) -> None:
    """A turn is stored: open the next HIT, then queue the review of the submission on the reviews queue,
    so workers waiting for their next turn never wait for the monitor."""
    opened = pipeline.open_after(settings(), providers(), turn_id)
    review_submission.delay(turn_id)
    log.info("turn %s submitted: opened hit %s", turn_id, opened)


@celery_app.task(name="workers.tasks.review_submission", **RETRY)
def review_submission(turn_id: int) -> None:
    """Judge the worker the submission rated, queue any bonus, and flag the submission's content."""
    result = pipeline.review_submission(settings(), providers(), turn_id)
    for bonus_id in result.bonus_ids:
        pay_bonus.delay(bonus_id)
    if result.reviewed:
        log.info("turn %s reviewed: blocked %s, bonuses %s, flags %s", turn_id, result.blocked_worker_id,
                 result.bonus_ids, result.flags)


@celery_app.task(name="workers.tasks.survey_answered", **RETRY)
def survey_answered(conversation_id: int, worker_id: int) -> None:
    """A worker's end-of-dialog answers are stored: judge the other role's writers by them."""
    blocked = pipeline.review_survey(settings(), providers(), conversation_id, worker_id)
    if blocked:
        log.info("survey of conversation %s by worker %s: blocked %s", conversation_id, worker_id, blocked)


@celery_app.task(name="workers.tasks.publish_hit", **RETRY)
def publish_hit(hit_id: int, provider: str) -> None:
    pipeline.publish(settings(), providers(), hit_id, provider)


@celery_app.task(name="workers.tasks.pay_bonus", **RETRY)
def pay_bonus(bonus_id: int) -> None:
    """Retries with backoff until the provider accepts the payment (e.g. the assignment is payable)."""
    pipeline.pay_bonus(settings(), providers(), bonus_id)


# A sweep that overruns its interval is cut short (the next one picks up where it stopped); the soft limit
# lets the current repair's transaction roll back cleanly first.
SWEEP_LIMITS = {"soft_time_limit": 50, "time_limit": 60}


@celery_app.task(name="workers.tasks.reconcile", **SWEEP_LIMITS)
def reconcile() -> None:
    """One reconciler sweep (beat). A repair that raises is logged and skipped by the sweep itself; the soft
    time limit is not such an error, and ends the sweep."""
    repairs = pipeline.reconcile(settings(), providers(), stop_on=(SoftTimeLimitExceeded,))
    for bonus_id in repairs.unpaid_bonuses:
        pay_bonus.delay(bonus_id)
    if (repairs.conversations_advanced or repairs.hits_published or repairs.leases_released
            or repairs.turns_reviewed):
        log.warning("reconciler repaired %s", repairs)


@celery_app.task(name="workers.tasks.daily_review", **RETRY)
def daily_review() -> None:
    """Build today's review queue of temporarily blocked workers and the raters' agreement (beat, daily)."""
    with session_scope(settings().database_url) as session:
        built = review.daily_review(session, review.ReviewPolicy.of(settings()))
    log.info("review queue for %s: %s workers; %s raters judged, %s outliers", built.day, len(built.entries),
             built.raters_judged, built.rater_outliers)


@celery_app.task(name="workers.tasks.refresh_activity", **SWEEP_LIMITS)
def refresh_activity() -> None:
    """Roll up the latest hours of work and recount running batches for the dashboard (beat, every few minutes)."""
    with session_scope(settings().database_url) as session:
        activity.refresh(session)
    with session_scope(settings().database_url) as session:
        activity.snapshot_batches(session)
