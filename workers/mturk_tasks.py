"""Celery tasks for Mechanical Turk; each one calls one step of ``turkflow.pipeline``."""

from __future__ import annotations

import logging

from turkflow import pipeline
from turkflow.hits.mturk import NotPayableYet
from turkflow.workers.app import celery_app, providers, settings
from turkflow.workers.tasks import RETRY, SWEEP_LIMITS, ids, publish_hit, turn_submitted

log = logging.getLogger("turkflow.tasks.mturk")


@celery_app.task(name="workers.mturk_tasks.approve_assignment")
def approve_assignment(assignment_id: int) -> None:
    """Approval is due (TURKFLOW_MTURK_APPROVE_AFTER_SECONDS after submission). Not retried here: the MTurk
    reconciler lists every approval still due on each round, so a failed one is simply tried again."""
    ids(assignment_id=assignment_id)
    try:
        pipeline.approve(settings(), providers(), assignment_id)
    except NotPayableYet as exc:
        log.info("assignment %s: %s; trying again next round", assignment_id, exc)


@celery_app.task(name="workers.mturk_tasks.expire_hit", **RETRY)
def expire_hit(hit_id: int) -> None:
    ids(hit_id=hit_id)
    pipeline.expire(settings(), providers(), hit_id)


@celery_app.task(name="workers.mturk_tasks.reconcile_mturk", **SWEEP_LIMITS)
def reconcile_mturk() -> None:
    """Beat: compare open HITs with MTurk, repair, and queue what it found: a missed submission goes the way
    of a live one (``turn_submitted``), a reopened turn is published, a due approval approved."""
    repairs = pipeline.reconcile_platform(settings(), providers(), "mturk")
    for turn_id in repairs.submissions_stored:
        turn_submitted.delay(turn_id)
    for hit_id in repairs.hits_reopened:
        publish_hit.delay(hit_id, "mturk")
    for assignment_id in repairs.approvals_due:
        approve_assignment.delay(assignment_id)
    if repairs:
        log.warning("MTurk reconciler repaired %s", repairs)
