"""The Prolific entry to the turn page, ``/prolific/turn``, to a role's onboarding quiz,
``/prolific/onboarding``, and Prolific's webhook, ``/prolific/webhook``.

A study's URL is ``/prolific/turn?b=<batch>&r=<role>`` with Prolific's ``PROLIFIC_PID``, ``STUDY_ID`` and
``SESSION_ID`` added. A new submission is checked with Prolific before anything is stored; it then takes
the next waiting turn of the study's role, and the page carries a token signed for that participant and
submission (no cookie is needed). The answers go through ``lifecycle.submit_turn`` and the same Celery
task as every other turn, and the participant is sent back to Prolific with the study's completion code.
The steps are ``turkflow.hits.prolific.pages``; the page is the worker blueprint's ``render_turn``.
Programs (the crowd simulator's participants) asking for JSON get the turn as ``turn_json`` with the
form's token, and a refused answer as JSON naming its field, as on the worker pages.

An onboarding study's URL is ``/prolific/onboarding?r=<role>`` with the same three ids: the role's quiz
(the one local workers take), graded once, then back to Prolific with the passing code, whose action adds
the participant to the group the role's turn studies admit, or the failing one, which does not.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, redirect, render_template, request
from sqlmodel import Session

from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import Forbidden, InvalidAnswer, InvalidInput, NotFound
from turkflow.hits import lifecycle, onboarding
from turkflow.hits.prolific import api, pages, sync
from turkflow.models import Assignment, AssignmentStatus, Hit, Turn, Worker
from turkflow.web import id_arg, wants_json
from turkflow.web.worker import queue_next_turn, render_turn, turn_json, worker_page_headers

bp = Blueprint("prolific", __name__, url_prefix="/prolific")
log = logging.getLogger("turkflow.web.prolific")

FORM_TOKEN = "turkflow_form"


@bp.after_request
def prolific_page_headers(response: Response) -> Response:
    return worker_page_headers(response)


def _settings() -> Settings:
    return current_app.config["TURKFLOW_SETTINGS"]


def _provider() -> Any:
    return current_app.config["TURKFLOW_PROVIDERS"].get(pages.PROVIDER)


def _link() -> tuple[Any, str, str, str, str]:
    """The link's batch and role, and Prolific's participant, study and submission ids (checked)."""
    args = request.args
    participant_id, study_id = args.get("PROLIFIC_PID"), args.get("STUDY_ID")
    submission_id = args.get("SESSION_ID")
    pages.check_ids(participant_id, study_id, submission_id)
    return id_arg("b"), args.get("r", ""), participant_id, study_id, submission_id


@bp.get("/turn")
def turn() -> Any:
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    with session_scope(settings.database_url) as session:
        study = pages.study_of_link(session, batch_id, role, study_id)
        known = pages.assignment_of(session, study, submission_id, participant_id)
        done = known is not None and known.status in (AssignmentStatus.submitted, AssignmentStatus.approved)
    if done:
        return _back_to_prolific(batch_id, role)
    _provider().check_submission(study_id, submission_id, participant_id)
    with session_scope(settings.database_url) as session:
        assignment = pages.assignment_of(session, study, submission_id, participant_id)
        taken = assignment is None
        if taken:
            worker = pages.participant(session, participant_id, role, _provider().vouched_by_group(role))
            assignment = pages.take_next_turn(session, worker, batch_id, role, submission_id,
                                              settings.prolific_max_minutes * 60)
        if assignment is None:
            return _please_return("No turn is waiting for you right now",
                                  f"Every {role} turn of this study has just been taken by someone else.")
        if assignment.status != AssignmentStatus.accepted:
            return _please_return("This turn is no longer yours", "Your time on it ran out, or the "
                                  "submission was returned, and the turn went to someone else.")
        view = _turn_view(session, assignment)
        token = pages.page_token(settings.secret_key, assignment, participant_id)
        page = {**turn_json(view, assignment, session.get(Hit, assignment.hit_id)),
                FORM_TOKEN: token} if wants_json() else None
    if taken:
        _after_taking(batch_id, role, assignment.worker_id)
    if page is not None:
        return jsonify(page)
    return render_turn(view, form_action=request.full_path, hidden={FORM_TOKEN: token})


def _after_taking(batch_id: int, role: str, worker_id: int) -> None:
    """The study's places follow its waiting turns and the participant joins their role's group, off the
    request. A broker outage only delays the first (the poller does it too); the second is a convenience
    for the participant, since this page refuses the other role's turns anyway."""
    from workers import prolific_tasks

    try:
        prolific_tasks.turn_taken.delay(batch_id, role, worker_id)
    except Exception as exc:  # noqa: BLE001 - any broker failure is repaired by the poller
        log.warning("batch %s %s study not brought in step now (%s); the poller will", batch_id, role, exc)


@bp.post("/turn")
def submit() -> Any:
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    raw = request.form.to_dict(flat=False)
    token = (raw.pop(FORM_TOKEN, None) or [""])[0]
    with session_scope(settings.database_url) as session:
        study = pages.study_of_link(session, batch_id, role, study_id)
        assignment = pages.assignment_of(session, study, submission_id, participant_id)
        if assignment is None:
            raise Forbidden("this submission holds no turn here; open the study again from Prolific")
        pages.check_page_token(settings.secret_key, token, assignment, participant_id)
        pending = assignment.status == AssignmentStatus.accepted
    if pending:
        _provider().check_submission(study_id, submission_id, participant_id)
    try:
        with session_scope(settings.database_url) as session:
            worker = session.get(Worker, assignment.worker_id)
            submission = lifecycle.submit_turn(session, submission_id, worker, raw)
            turn_id, created = submission.turn.id, submission.created
    except InvalidAnswer as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            return jsonify(error=str(error), field=error.field), 400
        with session_scope(settings.database_url) as session:
            view = _turn_view(session, assignment)
        return render_turn(view, form_action=request.full_path, errors={error.field: error.reason},
                           answers=raw, hidden={FORM_TOKEN: token}, status=400)
    if created:
        queue_next_turn(turn_id, worker)
    return _back_to_prolific(batch_id, role)


@bp.get("/onboarding")
def onboarding_quiz() -> Any:
    """The role's onboarding quiz, reached from the role's onboarding study (``turkflow prolific
    onboarding``): the submission is checked with Prolific before the quiz is shown, as a turn's is."""
    settings = _settings()
    role, participant_id, study_id, submission_id = _onboarding_link()
    with session_scope(settings.database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id)
        passed = pages.onboarding_outcome(session, participant_id, role)
    if passed is not None:
        return _onboarding_done(role, passed)
    _provider().check_submission(study_id, submission_id, participant_id)
    token = pages.onboarding_token(settings.secret_key, participant_id, submission_id, role)
    return render_template("onboarding.html", quiz=onboarding.quiz_for(role), answers={}, result=None,
                           form_action=request.full_path, hidden={FORM_TOKEN: token})


@bp.post("/onboarding")
def onboarding_grade() -> Any:
    """Graded once; the participant goes back to Prolific with the passing code (which adds them to the
    role's group) or the other one."""
    settings = _settings()
    role, participant_id, study_id, submission_id = _onboarding_link()
    answers = {name: value for name, value in request.form.items() if name != FORM_TOKEN}
    pages.check_onboarding_token(settings.secret_key, request.form.get(FORM_TOKEN, ""), participant_id,
                                 submission_id, role)
    with session_scope(settings.database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id)
        passed = pages.onboarding_outcome(session, participant_id, role)
    if passed is None:
        _provider().check_submission(study_id, submission_id, participant_id)
        with session_scope(settings.database_url) as session:
            passed = pages.grade_onboarding(session, participant_id, role, answers,
                                            settings.onboarding_pass_percent)
    return _onboarding_done(role, passed)


def _onboarding_link() -> tuple[str, str, str, str]:
    """The quiz link's role, and Prolific's participant, study and submission ids (checked)."""
    role = request.args.get("r", "")
    if role not in onboarding.QUIZZES:
        raise InvalidInput(f"expected one of {', '.join(onboarding.QUIZZES)}, got {role[:40]!r}", "r")
    args = request.args
    participant_id, study_id = args.get("PROLIFIC_PID"), args.get("STUDY_ID")
    submission_id = args.get("SESSION_ID")
    pages.check_ids(participant_id, study_id, submission_id)
    return role, participant_id, study_id, submission_id


def _onboarding_done(role: str, passed: bool) -> Response:
    return redirect(api.completion_url(_provider().onboarding_code(role, passed)), 303)


def _please_return(headline: str, reason: str) -> Response:
    """A participant with no turn to write: Prolific counts a returned submission against nobody."""
    page = render_template("prolific_return.html", headline=headline, reason=reason)
    return worker_page_headers(Response(page, 409))


def _confirm_subscription(hook_secret: str) -> Response:
    """A new subscription's handshake: Prolific enables it once we send its secret back through the API (a
    made-up secret enables nothing)."""
    if not _provider().confirm_webhook(hook_secret):
        raise Forbidden("no subscription of ours is waiting for this secret")
    return Response(status=200, headers={api.HOOK_SECRET_HEADER: hook_secret})


def _turn_view(session: Session, assignment: Assignment) -> lifecycle.TurnView:
    return lifecycle.turn_view(session, session.get(Turn, session.get(Hit, assignment.hit_id).turn_id))


def _back_to_prolific(batch_id: int, role: str) -> Response:
    """The turn is stored: the participant finishes the submission on Prolific with the study's code."""
    return redirect(api.completion_url(_provider().completion_code(batch_id, role)), 303)


@bp.post("/webhook")
def webhook() -> Any:
    """Prolific's ``submission.status.change`` events, signed with the workspace's webhook secret.

    An unsigned, wrongly signed or stale request is refused and changes nothing; a repeated event finds
    the change made already (``sync.apply_status`` is idempotent); other events are acknowledged only. A
    new subscription's handshake (``X-Hook-Secret``, unsigned) is confirmed through the API.
    """
    settings = _settings()
    handshake = request.headers.get(api.HOOK_SECRET_HEADER)
    if handshake and api.SIGNATURE_HEADER not in request.headers:
        return _confirm_subscription(handshake)
    if not settings.prolific_webhook_secret:
        raise NotFound("Prolific webhooks are not set up here (TURKFLOW_PROLIFIC_WEBHOOK_SECRET)")
    body = request.get_data()
    try:
        api.verify_webhook(settings.prolific_webhook_secret, request.headers, body)
    except api.InvalidSignature as exc:
        raise Forbidden(f"not signed by Prolific: {exc}") from None
    try:
        event = json.loads(body)
    except ValueError:
        raise InvalidInput("the body is not JSON", "body") from None
    if not isinstance(event, dict) or event.get("event_type") != "submission.status.change":
        return Response(status=204)
    submission_id, status = event.get("resource_id"), event.get("status")
    if not isinstance(submission_id, str) or not isinstance(status, str):
        raise InvalidInput("a submission event names its submission (resource_id) and status", "resource_id")
    with session_scope(settings.database_url) as session:
        sync.apply_status(session, submission_id, status, sync.ProlificRound())
    return Response(status=204)
