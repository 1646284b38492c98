"""Celery tasks for Prolific; each one calls one domain function in ``turkflow.hits.prolific.sync`` or the
pipeline."""

from __future__ import annotations

import logging

from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.hits.prolific import sync
from turkflow.hits.prolific.provider import PROVIDER, BonusOutcomeUnknown
from turkflow.models import Batch, Worker
from turkflow.workers.app import celery_app, providers, settings
from turkflow.workers.tasks import RETRY, SWEEP_LIMITS, ids, pay_bonus

log = logging.getLogger("turkflow.tasks.prolific")


@celery_app.task(name="workers.prolific_tasks.poll_prolific", **SWEEP_LIMITS)
def poll_prolific() -> None:
    """Beat: follow the running studies' submissions on Prolific (what webhooks would say, without a
    public address), keep their places in step, pay the kept turns whose submission ended unpaid, ask for
    due approvals, and settle claimed bonuses."""
    if not settings().prolific_token:
        return
    found = sync.poll(settings(), providers().get(PROVIDER))
    for bonus_id in found.reward_bonuses:  # kept turns whose submission ended unpaid: their reward
        pay_bonus.delay(bonus_id)
    for bonus_id in found.claimed_bonuses:
        settle_bonus.delay(bonus_id)
    if found:
        log.warning("Prolific poller: %s", found)


@celery_app.task(name="workers.prolific_tasks.settle_bonus")
def settle_bonus(bonus_id: int) -> None:
    """A claimed bonus is settled from the submission's payments, never paid again. Not retried here: an
    outcome still unknown is asked about again by the next round."""
    ids(bonus_id=bonus_id)
    try:
        pipeline.pay_bonus(settings(), providers(), bonus_id)
    except BonusOutcomeUnknown as exc:
        log.info("bonus %s: %s", bonus_id, exc)


@celery_app.task(name="workers.prolific_tasks.turn_taken", **RETRY)
def turn_taken(batch_id: int, role: str, worker_id: int) -> None:
    """A participant took a turn of the study: keep a spare place (a study with no free place and nothing in
    progress drops to AWAITING REVIEW) and pause it if no other turn waits, before the poller comes round;
    and put the participant in their role's group, which the other roles' studies keep out."""
    ids(batch_id=batch_id, worker_id=worker_id)
    provider = providers().get(PROVIDER)
    with session_scope(settings().database_url) as session:
        provider.keep_in_step(session, session.get(Batch, batch_id), role)
        provider.join_role(session.get(Worker, worker_id))
