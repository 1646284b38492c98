"""MEEP's worker pages: the user's (the goal, the chat, a message) and the agent's, where every act is a click.

A MEEP turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). The
agent's page shows the user's messages as words to click, the APIs with a slot per argument, the results
panel and the templates with a slot per blank. A slot holds clicks in MEEP's names (``u2_5 u2_6``: words 5
and 6 of user message 2; ``v1.name``: a result field); with scripts a click on a word or a field fills the
slot last chosen, without them the agent types those names. Each API call and each template picked is a
POST that ``turkflow.meep_dialog`` checks and logs; sending submits the paid turn through
``lifecycle.submit_turn`` and the same Celery task as every other turn. The user who ends the dialog goes
on to its end-of-dialog question.

Routes (``Accept: application/json`` gives JSON; POSTs carry the CSRF token as the forms do, or as
``X-CSRFToken``): ``GET|POST /meep/turn/<assignment_id>`` (the page; submit the turn: the user's ``text``
and ``complete``, the agent's ``action=send``) and ``POST /meep/turn/<assignment_id>/action`` (a click:
``call_api`` with ``api`` and ``arguments``, ``pick_template`` with ``template`` and ``fillers``, as
``turkflow.meep.clicks`` reads them, or the forms' ``arg-<name>`` and ``filler-<n>`` slots).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import Blueprint, Response, jsonify, make_response, redirect, render_template, url_for
from flask_wtf.csrf import generate_csrf
from sqlmodel import Session

from turkflow import meep_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, NotFound
from turkflow.hits import lifecycle
from turkflow.models import Assignment, AssignmentStatus, Hit, Turn, Worker
from turkflow.protocol import MEEP
from turkflow.web import wants_json
from turkflow.web.star import action_body
from turkflow.web.worker import (
    _current_worker, _own_assignment, _settings, queue_next_turn, turn_json, worker_page_headers,
)

bp = Blueprint("meep", __name__, url_prefix="/meep")


@bp.after_request
def meep_page_headers(response: Response) -> Response:
    return worker_page_headers(response)


def _held(session: Session, assignment_id: str) -> tuple[Worker, Assignment, Hit, Turn]:
    """The signed-in worker's own assignment of a MEEP turn (anybody else's is a 403)."""
    worker = _current_worker(session)
    assignment, hit, turn = _own_assignment(session, worker, assignment_id)
    if lifecycle.batch_of_hit(session, hit).protocol != MEEP.name:
        raise NotFound("this turn is not part of a MEEP dialog")
    return worker, assignment, hit, turn


def _data(session: Session, turn: Turn, worker: Worker) -> dict[str, Any]:
    if turn.role == "user":
        return {"user": meep_dialog.user_view(session, turn)}
    return {"agent": meep_dialog.agent_view(session, turn, worker_id=worker.id)}


def _page(assignment_id: str, *, error: Optional[InvalidInput] = None, typed: Optional[dict] = None,
          status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        worker, assignment, hit, turn = _held(session, assignment_id)
        view = lifecycle.turn_view(session, turn)
        data = _data(session, turn, worker)
        if wants_json():
            return jsonify({**turn_json(view, assignment, hit), "meep": data})
        if assignment.status != AssignmentStatus.accepted:  # already submitted: back to the queue
            return redirect(url_for("worker.queue", submitted=turn.id), 303)
        template = "meep_user.html" if turn.role == "user" else "meep_agent.html"
        page = render_template(
            template, view=view, form=MEEP.form(turn.role), meep=data, error=error, typed=typed or {},
            submit_url=url_for("meep.submit", assignment_id=assignment_id),
            action_url=url_for("meep.action", assignment_id=assignment_id),
            hidden={"csrf_token": generate_csrf()}, lease_expires_at=hit.lease_expires_at, worker=worker,
            max_chars=MEEP.max_response_chars)
    return worker_page_headers(make_response(page, status))


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    return _page(assignment_id)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """One click: an API call or a template picked. JSON clients get what it logged and the agent's page
    data; the page without scripts is shown again."""
    body = action_body()
    try:
        with session_scope(_settings().database_url) as session:
            worker, _, _, turn = _held(session, assignment_id)
            fields = meep_dialog.form_click(body)
            name = fields.pop("action", None)
            written = meep_dialog.record_action(session, turn, worker, name, fields)
            logged = [{"action": e.action, "agent": e.agent, **e.data} for e in written]
            data = _data(session, turn, worker)
    except InvalidInput as error:
        if wants_json():
            raise
        return _page(assignment_id, error=error, typed=body, status=400)
    if wants_json():
        return jsonify(logged=logged, **data)
    return redirect(url_for("meep.turn", assignment_id=assignment_id) + "#message", 303)


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn (the user's message, the agent's send) and submit it, once: a second send of the
    same turn returns the stored one. The user whose message ends the dialog goes on to its question."""
    body = action_body()
    try:
        with session_scope(_settings().database_url) as session:
            worker, _, _, _ = _held(session, assignment_id)
            submission = meep_dialog.submit_turn(session, assignment_id, worker, body)
            turn_id, created = submission.turn.id, submission.created
            conversation_id, text = submission.turn.conversation_id, submission.turn.text
            ended = lifecycle.ends_conversation(session, submission.turn)
    except InvalidInput as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            raise
        return _page(assignment_id, error=error, typed=body, status=400)
    if created:
        queue_next_turn(turn_id, worker)
    survey_url = url_for("worker.survey", conversation_id=conversation_id) if ended else None
    if wants_json():
        return jsonify(turn_id=turn_id, created=created, text=text, survey_url=survey_url)
    return redirect(survey_url or url_for("worker.queue", submitted=turn_id), 303)
