"""STAR's worker pages: the wizard's and the user's turn pages, their in-turn actions, the task's flow
chart image (the end-of-dialog questionnaires are every protocol's: ``turkflow.web.worker``).

A STAR turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). While
the worker holds it, each action is a small POST that ``turkflow.star_dialog`` validates and logs as one
``DialogEvent``; the closing one (the wizard's picked or written reply, the user's message, perhaps ending
the dialog) submits the paid turn through ``lifecycle.submit_turn`` and the same Celery task as every
other turn. The worker who ends the dialog answers its questions at once; the last worker of the other
role finds them at the top of their queue.

Routes (``Accept: application/json`` gives the JSON variant; POSTs carry the CSRF token as the worker pages'
forms do, or as ``X-CSRFToken``):
``GET|POST /star/turn/<assignment_id>`` (the page; submit the turn),
``POST /star/turn/<assignment_id>/action`` (one action: query, request_suggestions, select_task, ...),
``GET /star/image/<task_id>`` (the flow chart).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import (
    Blueprint, Response, jsonify, make_response, redirect, render_template, request, send_file, url_for,
)
from flask_wtf.csrf import generate_csrf
from sqlmodel import Session

from turkflow import star_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, NotFound
from turkflow.hits import lifecycle
from turkflow.models import Assignment, AssignmentStatus, Hit, Task, Turn, Worker
from turkflow.protocol import STAR
from turkflow.web import wants_json
from turkflow.web.worker import (
    _current_worker, _own_assignment, _settings, queue_next_turn, turn_json, worker_page_headers,
)

bp = Blueprint("star", __name__, url_prefix="/star")
MAX_DRAFT = 500  # of a draft carried in the page's address (the no-script "Suggest")


@bp.after_request
def star_page_headers(response: Response) -> Response:
    return worker_page_headers(response)


def action_body() -> dict[str, Any]:
    """A JSON object, or the form's fields (``kb-<Field>`` fields make the query's ``form``; ``options``
    is a list; any other field sent twice stays a list, which the action refuses naming it). Every entry
    route to STAR's pages reads its POSTs with it (the Prolific one pops its form token first)."""
    if request.is_json:
        try:
            body = request.get_json(silent=True)
        except RecursionError:
            body = None
        if not isinstance(body, dict):
            raise InvalidInput("send one JSON object", "body")
        return body
    body: dict[str, Any] = {}
    form: dict[str, Any] = {}
    for name, values in request.form.lists():
        if name == "csrf_token":
            continue
        value = values if name == "options" or len(values) > 1 else values[0]
        if name.startswith("kb-"):
            form[name[3:]] = value
        else:
            body[name] = value
    if form:
        body["form"] = form
    return body


def _held(session: Session, assignment_id: str) -> tuple[Worker, Assignment, Hit, Turn]:
    """The signed-in worker's own assignment of a STAR turn (anybody else's is a 403)."""
    worker = _current_worker(session)
    assignment, hit, turn = _own_assignment(session, worker, assignment_id)
    if lifecycle.batch_of_hit(session, hit).protocol != STAR.name:
        raise NotFound("this turn is not part of a STAR dialog")
    return worker, assignment, hit, turn


# ---- the turn page ----------------------------------------------------------------------------------


def star_turn_data(session: Session, turn: Turn, worker: Worker, draft: str = "") -> dict[str, Any]:
    """What the role's page shows besides the chat: the user's scenario and instructions, or the
    wizard's tasks, chart, knowledge base and suggestions. The user's never holds the knowledge base."""
    if turn.role == "user":
        return {"user": star_dialog.user_view(session, turn)}
    return {"wizard": star_dialog.wizard_view(session, turn, draft, worker_id=worker.id)}


def render_star_turn(view: lifecycle.TurnView, data: dict[str, Any], *, submit_url: str, action_url: str,
                     hidden: dict[str, str], lease_expires_at: Any = None, worker: Optional[Worker] = None,
                     error: Optional[InvalidInput] = None, draft: str = "", status: int = 200) -> Response:
    """The STAR turn page, for any entry route that gives it where to post (``hidden`` adds the fields a
    provider's route needs, e.g. the CSRF token)."""
    template = "star_user.html" if view.turn.role == "user" else "star_wizard.html"
    page = render_template(template, view=view, form=view.protocol.form(view.turn.role), star=data,
                           submit_url=submit_url, action_url=action_url, hidden=hidden,
                           lease_expires_at=lease_expires_at, worker=worker, error=error, draft=draft,
                           max_chars=view.protocol.max_response_chars)
    return worker_page_headers(make_response(page, status))


def _page(assignment_id: str, *, error: Optional[InvalidInput] = None, draft: str = "",
          status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        worker, assignment, hit, turn = _held(session, assignment_id)
        if assignment.status == AssignmentStatus.accepted and turn.role == "user":
            star_dialog.give_nudges(session, turn)  # once each, before the user writes
        view = lifecycle.turn_view(session, turn)
        data = star_turn_data(session, turn, worker, draft)
        if wants_json():
            return jsonify({**turn_json(view, assignment, hit), "star": data})
        if assignment.status != AssignmentStatus.accepted:  # already submitted: back to the queue
            return redirect(url_for("worker.queue", submitted=turn.id), 303)
        return render_star_turn(
            view, data, submit_url=url_for("star.submit", assignment_id=assignment_id),
            action_url=url_for("star.action", assignment_id=assignment_id),
            hidden={"csrf_token": generate_csrf()}, lease_expires_at=hit.lease_expires_at, worker=worker,
            error=error, draft=draft, status=status)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    draft = request.args.get("draft", "")[:MAX_DRAFT]
    return _page(assignment_id, draft=draft)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """One action inside the turn. JSON clients get what it logged (a query's answer with it) and, for a
    wizard, the page's data ranked again; the page without scripts is shown again."""
    body = action_body()
    name = body.pop("action", None)
    try:
        with session_scope(_settings().database_url) as session:
            worker, _, _, turn = _held(session, assignment_id)
            written = star_dialog.take_action(session, turn, worker, name, body)
            logged = [{"action": e.action, "agent": e.agent, **e.data} for e in written]
            draft = written[0].data.get("Text", "") if name == "request_suggestions" else ""
            data = star_turn_data(session, turn, worker, draft) if turn.role == "wizard" else {}
    except InvalidInput as error:
        if wants_json():
            raise
        return _page(assignment_id, error=error, draft=_typed(body), status=400)
    if wants_json():
        return jsonify(logged=logged, **data)
    args = {"draft": draft[:MAX_DRAFT]} if draft else {}
    return redirect(url_for("star.turn", assignment_id=assignment_id, **args) + "#suggestions", 303)


def _typed(body: dict[str, Any]) -> str:
    text = body.get("text")
    return text[:MAX_DRAFT] if isinstance(text, str) else ""


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn (the reply, given here or logged before) and submit it. The worker whose turn ends
    the dialog goes on to its questions."""
    body = action_body()
    try:
        with session_scope(_settings().database_url) as session:
            worker, _, _, _ = _held(session, assignment_id)
            submission = star_dialog.submit_turn(session, assignment_id, worker, body)
            turn_id, created = submission.turn.id, submission.created
            conversation_id, text = submission.turn.conversation_id, submission.turn.text
            ended = lifecycle.ends_conversation(session, submission.turn)
    except InvalidInput as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            raise
        return _page(assignment_id, error=error, draft=_typed(body), status=400)
    if created:
        queue_next_turn(turn_id, worker)
    survey_url = url_for("worker.survey", conversation_id=conversation_id) if ended else None
    if wants_json():
        return jsonify(turn_id=turn_id, created=created, text=text, survey_url=survey_url)
    return redirect(survey_url or url_for("worker.queue", submitted=turn_id), 303)


# ---- the flow chart's image -----------------------------------------------------------------------------


@bp.get("/image/<int:task_id>")
def image(task_id: int) -> Any:
    """The image the task's schema names, from the folder the task was loaded from (nothing else)."""
    with session_scope(_settings().database_url) as session:
        task = session.get(Task, task_id)
        path = star_dialog.flow_chart_image(task) if task is not None else None
    if path is None:
        raise NotFound("this task has no flow-chart image")
    return send_file(path, max_age=3600)
