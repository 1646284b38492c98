"""Celery tasks for Prolific; each one calls one domain function in ``turkflow.hits.prolific.sync`` or the
pipeline."""

from __future__ import annotations

import logging

from turkflow import pipeline
from turkflow.hits.prolific import sync
from turkflow.hits.prolific.provider import PROVIDER, BonusOutcomeUnknown
from workers.app import celery_app, providers, settings
from workers.tasks import SWEEP_LIMITS

log = logging.getLogger("turkflow.tasks.prolific")


@celery_app.task(**SWEEP_LIMITS)
def poll_prolific() -> None:
    """Beat: follow every running study's submissions on Prolific (what webhooks would say, without a
    public address), keep its places in step, ask for due approvals, and settle claimed bonuses."""
    if not settings().prolific_token:
        return
    found = sync.poll(settings(), providers().get(PROVIDER))
    for bonus_id in found.claimed_bonuses:
        settle_bonus.delay(bonus_id)
    if found:
        log.warning("Prolific poller: %s", found)


@celery_app.task
def settle_bonus(bonus_id: int) -> None:
    """A claimed bonus is settled from the submission's payments, never paid again. Not retried here: an
    outcome still unknown is asked about again by the next round."""
    try:
        pipeline.pay_bonus(settings(), providers(), bonus_id)
    except BonusOutcomeUnknown as exc:
        log.info("bonus %s: %s", bonus_id, exc)
