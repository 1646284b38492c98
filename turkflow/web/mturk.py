"""The MTurk entry to the turn page: ``/mturk/turn``, the ExternalURL of every turn HIT.

MTurk opens it in an iframe on its worker site with ``assignmentId``, ``hitId``, ``workerId`` and
``turkSubmitTo`` added to our ``h`` token. While a worker only previews the HIT, ``assignmentId`` is
``ASSIGNMENT_ID_NOT_AVAILABLE``: the page is shown read-only. Once accepted, the same page is the form;
a submission is verified with MTurk (``CrowdProvider.verify_submission``) and by the signed form token this
page issued for exactly these ids, stored in one transaction, and only then does the page post MTurk's
externalSubmit form, so MTurk never counts a turn we have not stored. The page is rendered by the worker
blueprint's ``render_turn``; no cookie is needed, because third-party cookies are unreliable in iframes.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Optional

from flask import Blueprint, Response, current_app, make_response, render_template, request
from sqlmodel import select

from turkflow import reports
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import Conflict, Forbidden, InvalidAnswer, ServiceUnavailable
from turkflow.hits import lifecycle
from turkflow.hits.mturk import pages
from turkflow.hits.mturk.answers import ANSWERS_FIELD, form_answers
from turkflow.hits.mturk.assignments import accept_assignment
from turkflow.hits.provider import CrowdProvider
from turkflow.models import Assignment, AssignmentStatus, Batch, Conversation, Turn, Worker
from turkflow.web.http import retry_after
from turkflow.web.worker import CONTENT_SECURITY_POLICY as WORKER_POLICY, render_turn, worker_page_headers

bp = Blueprint("mturk", __name__, url_prefix="/mturk")
log = logging.getLogger("turkflow.web.mturk")

FORM_TOKEN = "turkflow_form"


# The worker pages' policy, but MTurk shows this page in an iframe on its worker sites and the finished
# assignment is posted to MTurk's externalSubmit (``pages.SUBMIT_SITES``).
CONTENT_SECURITY_POLICY = WORKER_POLICY.replace(
    "form-action 'self'", " ".join(["form-action 'self'", *pages.SUBMIT_SITES[False], *pages.SUBMIT_SITES[True]])
).replace("frame-ancestors 'none'", "frame-ancestors https://workersandbox.mturk.com https://worker.mturk.com")


@bp.after_request
def mturk_page_headers(response: Response) -> Response:
    """The worker pages' headers, with MTurk's framing and submit sites."""
    worker_page_headers(response).headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return response


def _settings() -> Settings:
    return current_app.config["TURKFLOW_SETTINGS"]


def _provider() -> CrowdProvider:
    return current_app.config["TURKFLOW_PROVIDERS"].get("mturk")


def _ids() -> tuple[str, Optional[str], Optional[str], Optional[str]]:
    args = request.args
    return args.get("h", ""), args.get("hitId"), args.get("assignmentId"), args.get("workerId")


def _submit_site(live: bool) -> str:
    """MTurk's site to post the finished assignment to; anything else in ``turkSubmitTo`` is refused,
    since the form carries the worker's answers."""
    given = (request.args.get("turkSubmitTo") or "").rstrip("/")
    if given not in pages.SUBMIT_SITES[live]:
        raise Forbidden("the turkSubmitTo address is not an MTurk worker site")
    return given


@bp.get("/turn")
def turn() -> Any:
    settings = _settings()
    token, hit_external_id, assignment_id, worker_id = _ids()
    with session_scope(settings.database_url) as session:
        hit = pages.hit_for_page(session, settings.secret_key, token, hit_external_id)
        view = lifecycle.turn_view(session, session.get(Turn, hit.turn_id))
        if assignment_id in (None, "", pages.PREVIEW_ASSIGNMENT):
            return render_turn(view, mode="preview")
        pages.check_mturk_ids(assignment_id, worker_id)
        submit_site = _submit_site(view.batch.live)
        known = session.exec(select(Assignment).where(Assignment.external_id == assignment_id)).first()
        if known is None or known.status == AssignmentStatus.accepted:
            _provider().verify_submission(session, hit, assignment_id, worker_id)
        assignment = accept_assignment(session, hit, assignment_id, worker_id)
        if assignment.status == AssignmentStatus.abandoned:
            raise Conflict("this assignment was returned or ran out of time; please return the HIT")
        if assignment.status != AssignmentStatus.accepted:  # stored already: finish the MTurk side again
            return _external_submit(submit_site, assignment_id, view.turn.answers)
        hit_id = hit.id
        earned = reports.earned_cents(session, assignment.worker_id, view.batch.currency)
    return render_turn(view, form_action=request.full_path, earned=earned,
                       hidden={FORM_TOKEN: pages.assignment_token(settings.secret_key, hit_id, assignment_id,
                                                                       worker_id)})


@bp.post("/turn")
def submit() -> Any:
    settings = _settings()
    token, hit_external_id, assignment_id, worker_id = _ids()
    raw = request.form.to_dict(flat=False)
    form_token = (raw.pop(FORM_TOKEN, None) or [""])[0]
    try:
        with session_scope(settings.database_url) as session:
            hit = pages.hit_for_page(session, settings.secret_key, token, hit_external_id)
            pages.check_mturk_ids(assignment_id, worker_id)
            pages.check_assignment_token(settings.secret_key, form_token, hit.id, assignment_id, worker_id)
            live = session.get(Batch, session.get(Conversation, session.get(Turn, hit.turn_id).conversation_id)
                               .batch_id).live
            submit_site = _submit_site(live)
            _provider().verify_submission(session, hit, assignment_id, worker_id)
            assignment = accept_assignment(session, hit, assignment_id, worker_id)
            worker = session.get(Worker, assignment.worker_id)
            submission = lifecycle.submit_turn(session, assignment_id, worker, raw)
            turn_id, created, answers, hit_id = (submission.turn.id, submission.created, submission.turn.answers,
                                                 hit.id)
    except (InvalidAnswer, ServiceUnavailable) as error:  # rolled back: nothing of this submission is stored
        return _refused(error, raw, form_token)
    if created:
        _queue_after_submission(turn_id, hit_id, worker.id)
    return _external_submit(submit_site, assignment_id, answers)


def _refused(error: InvalidAnswer | ServiceUnavailable, raw: dict[str, Any], form_token: str) -> Response:
    """The page again with what the worker wrote: beside the answer refused, or under a note that storage
    took nothing (a 503 with Retry-After: the same submit later stores it)."""
    settings = _settings()
    token, hit_external_id, assignment_id, _ = _ids()
    with session_scope(settings.database_url) as session:
        hit = pages.hit_for_page(session, settings.secret_key, token, hit_external_id)
        view = lifecycle.turn_view(session, session.get(Turn, hit.turn_id))
        held = session.exec(select(Assignment).where(Assignment.external_id == assignment_id)).first()
        earned = reports.earned_cents(session, held.worker_id, view.batch.currency) if held else None
    page = render_turn(view, form_action=request.full_path, earned=earned,
                       errors={error.field: error.reason} if isinstance(error, InvalidAnswer) else {},
                       retry=isinstance(error, ServiceUnavailable), answers=raw, hidden={FORM_TOKEN: form_token},
                       status=error.status)
    page.headers.update(retry_after(error))
    return page


def _queue_after_submission(turn_id: int, hit_id: int, worker_id: int) -> None:
    """Ask Celery to open the next turn, then to expire the answered HIT (were its worker to return it
    instead of finishing on MTurk, MTurk would list it again; expiring does not affect the worker holding
    it). The turn is committed: a broker outage only delays the next turn until the reconciler runs."""
    from turkflow.workers import mturk_tasks, tasks

    try:
        tasks.turn_submitted.apply_async((turn_id,), link=mturk_tasks.expire_hit.si(hit_id))
    except Exception as exc:  # noqa: BLE001 - any broker failure is repaired by the reconciler
        log.warning("turn %s by worker %s stored but not queued (%s); the reconciler will advance it",
                    turn_id, worker_id, exc)


def _external_submit(site: str, assignment_id: str, answers: dict[str, Any]) -> Response:
    """The page that posts the finished assignment to MTurk, with a copy of the answers: if our record
    were ever lost, the reconciler can store the turn from MTurk's (``answers.parse_answers`` in the MTurk
    folder)."""
    page = render_template("mturk_submit.html", action=f"{site}/mturk/externalSubmit", assignment_id=assignment_id,
                           answers_field=ANSWERS_FIELD,
                           answers=json.dumps(form_answers(answers), sort_keys=True))
    return make_response(page, 200)
