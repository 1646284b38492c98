"""Celery tasks. Each one parses its arguments, calls one domain function and enqueues follow-ups."""

from __future__ import annotations

import logging
from typing import Any, Optional

from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import task_failure

from turkflow import events, pipeline
from turkflow.db import session_scope
from turkflow.errors import InvalidInput
from turkflow.hits.lifecycle import Opened
from turkflow.hits.provider import AGENT
from turkflow.quality import activity, review
from turkflow.workers.app import broker_redis, celery_app, providers, review_mark, settings

log = logging.getLogger("turkflow.tasks")

# Retried with back-off: a database or a platform that is down comes back. Arguments that can never be right
# (a forged message: an id that is no number or beyond any id, an unknown provider) are an InvalidInput, never
# retried: the task fails at once and the refusal is recorded (``record_refusal``).
RETRY = {"autoretry_for": (Exception,), "dont_autoretry_for": (InvalidInput,), "retry_backoff": 2,
         "retry_backoff_max": 300, "max_retries": 20, "retry_jitter": True}
MAX_ID = 2**31 - 1  # ids are INTEGER columns: 32 bits on PostgreSQL


def ids(**named: Any) -> None:
    """A task's id arguments: whole numbers from 1 to ``MAX_ID``, as every message the system sends holds
    (None where the task takes none); anything else is an ``InvalidInput`` naming the argument."""
    for name, value in named.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
            raise InvalidInput(f"expected an id from 1 to {MAX_ID}, got {str(value)[:40]!r}", name)


@task_failure.connect
def record_refusal(sender: Any = None, task_id: Optional[str] = None, exception: Optional[BaseException] = None,
                   args: Any = None, kwargs: Any = None, **_: Any) -> None:
    """A task refused for its arguments: logged, and recorded in the event log (kind ``task_refused``) with
    the task, what it was given and why, so a forged or corrupted message is seen and never tried again."""
    if not isinstance(exception, InvalidInput):
        return
    retries = getattr(getattr(sender, "request", None), "retries", 0)
    log.error("task %s %s refused: %s (arguments %.200r %.200r)", getattr(sender, "name", sender), task_id,
              exception, args, kwargs)
    try:
        with session_scope(settings().database_url) as session:
            events.record(session, "task_refused", "system", task=getattr(sender, "name", str(sender)),
                          task_id=task_id, arguments=repr(args)[:200], keywords=repr(kwargs)[:200],
                          reason=str(exception)[:300], retries=retries)
    except Exception as error:  # noqa: BLE001 - the log line above says it already
        log.warning("task %s refused but not recorded (%s)", task_id, error)


@celery_app.task(name="workers.tasks.turn_submitted", **RETRY)
def turn_submitted(turn_id: int) -> None:
    """A turn is stored: open the next HIT, then queue the review of the submission on the reviews queue,
    so workers waiting for their next turn never wait for the monitor."""
    ids(turn_id=turn_id)
    opened = follow(turn_id)
    # Logged at INFO only when no turn followed (the conversation ended, its batch paused, or a redelivered
    # message found the next turn open): an opening is every turn's routine, and Celery logs each task run.
    log.log(logging.DEBUG if opened is not None else logging.INFO, "turn %s submitted: opened hit %s", turn_id,
            opened.hit_id if opened is not None else None)


def follow(turn_id: int) -> Optional[Opened]:
    """What follows a stored turn: its next turn opened (an agent's sent to the agents queue), its review queued."""
    opened = pipeline.opening_after(settings(), providers(), turn_id)
    return _queue_after(turn_id, opened)


def _queue_after(turn_id: int, opened: Optional[Opened]) -> Optional[Opened]:
    if opened is not None and opened.provider == AGENT:  # an agent plays the next turn: the agents queue asks it
        answer_agent_turn.delay(opened.turn_id)
    queue_review(turn_id)
    return opened


# A review starts this long after it is queued, and takes every turn submitted meanwhile: the submissions of
# one second cost one message and one review, not one each (nobody waits for a review; workers wait for
# their next turn, which the turns task opens first).
REVIEW_GATHER_SECONDS = 1.0


def queue_review(turn_id: Optional[int], gather: float = REVIEW_GATHER_SECONDS) -> None:
    """Queue a review, ``gather`` seconds from now, unless one is queued and has not started yet: that one
    reviews this turn too (a review takes the turns waiting when it starts). The mark that a review is
    queued lapses after ``review_after_seconds``: a lost message holds reviews back no longer than the
    reconciler, which reviews any turn waiting that long, would."""
    mark = review_mark()
    if not broker_redis().set(mark, turn_id or 0, nx=True, ex=max(1, settings().review_after_seconds)):
        return
    try:
        review_submission.apply_async((turn_id,), countdown=gather)
    except Exception:
        broker_redis().delete(mark)  # not queued: the next submission queues one
        raise


@celery_app.task(name="workers.tasks.review_submission", **RETRY)
def review_submission(turn_id: Optional[int] = None) -> None:
    """Review the turn, and every other turn waiting (``pipeline.review_waiting``): judge the workers the
    submissions rated, queue any bonus, flag the submissions' content."""
    if turn_id is not None:
        ids(turn_id=turn_id)
    broker_redis().delete(review_mark())  # from now on a submission queues a review of its own
    reviews = pipeline.review_waiting(settings(), providers(), turn_id)
    for bonus_id in reviews.bonus_ids:
        pay_bonus.delay(bonus_id)
    if reviews.more:
        queue_review(None, gather=0)  # more waited than one review takes: the next starts at once
    for reviewed, result in reviews.turns.items():  # at INFO only the reviews that found something
        told = result.blocked_worker_id is not None or result.bonus_ids or result.flags
        log.log(logging.INFO if told else logging.DEBUG, "turn %s reviewed: blocked %s, bonuses %s, flags %s",
                reviewed, result.blocked_worker_id, result.bonus_ids, result.flags)


@celery_app.task(name="workers.tasks.survey_answered", **RETRY)
def survey_answered(conversation_id: int, worker_id: int) -> None:
    """A worker's end-of-dialog answers are stored: judge the other role's writers by them."""
    ids(conversation_id=conversation_id, worker_id=worker_id)
    blocked = pipeline.review_survey(settings(), providers(), conversation_id, worker_id)
    if blocked:
        log.info("survey of conversation %s by worker %s: blocked %s", conversation_id, worker_id, blocked)


@celery_app.task(name="workers.tasks.publish_hit", **RETRY)
def publish_hit(hit_id: int, provider: str) -> None:
    ids(hit_id=hit_id)
    if not isinstance(provider, str) or provider not in providers().factories:
        raise InvalidInput(f"no crowd provider {str(provider)[:40]!r}", "provider")
    pipeline.publish(settings(), providers(), hit_id, provider)


@celery_app.task(name="workers.tasks.pay_bonus", **RETRY)
def pay_bonus(bonus_id: int) -> None:
    """Retries with backoff until the provider accepts the payment (e.g. the assignment is payable)."""
    ids(bonus_id=bonus_id)
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
            or repairs.turns_reviewed or repairs.surveys_judged):
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


# ---- the agents queue: a slow model never delays people's turns ---------------------------------------------


@celery_app.task(name="workers.tasks.answer_agent_turn")
def answer_agent_turn(turn_id: int) -> None:
    """Ask the turn's agent, store its answer and open the next turn (one transaction), then send that turn to the
    agents queue if an agent plays it and queue the review, as the turns task does after a person's submit: the
    turns queue serves people's submissions alone. No Celery retry: a failed call is recorded and the turn is due
    again after a back-off kept in the database, which beat's sweep queues (``sweep_agent_turns``); a message run
    twice finds the turn claimed or answered."""
    ids(turn_id=turn_id)
    done = pipeline.answer_agent_turn(settings(), providers(), turn_id)
    if done.submitted_turn_id is not None:
        try:
            _queue_after(done.submitted_turn_id, done.opened)
        except Exception as exc:  # noqa: BLE001 - stored and opened: beat's sweeps ask an agent and review the turn
            log.warning("agent turn %s stored; what follows it is left to beat's sweeps (%s)", turn_id, exc)
    log.log(logging.DEBUG if done.status in (None, "answered") else logging.INFO, "agent turn %s: %s %s",
            turn_id, done.status, done.reason or "")


@celery_app.task(name="workers.tasks.sweep_agent_turns", **SWEEP_LIMITS)
def sweep_agent_turns() -> None:
    """Queue the agent turns due again: a back-off over, a worker lost mid-call (beat, every few seconds)."""
    for turn_id in pipeline.sweep_agent_turns(settings()):
        answer_agent_turn.delay(turn_id)
