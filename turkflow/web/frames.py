"""Frames' worker pages: the user's turn page (the goal, the chat, a message that may end the dialog) and the
wizard's (the chat, the search form over the database's searchable fields and the sort, every search's
results and suggestions, the reply).

A Frames turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). While
the wizard holds it, each search is a small POST that ``turkflow.frames_dialog`` validates, runs and logs;
the closing message submits the paid turn through ``lifecycle.submit_turn``. The worker whose turn ends the
dialog goes on to its questions (``worker.survey``); the last wizard finds them at the top of their queue.
The pages work without scripts: every form posts and the page is shown again.

Routes (``Accept: application/json`` gives the JSON variant; POSTs carry the CSRF token as the worker pages'
forms do, or as ``X-CSRFToken``):
``GET|POST /frames/turn/<assignment_id>`` (the page; submit the turn),
``POST /frames/turn/<assignment_id>/action`` (a search: ``kb-<field>`` or ``kb-<field>.at_least`` form
fields, or JSON ``constraints``; ``sort``, ``descending``).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import Blueprint, Response, jsonify, make_response, redirect, render_template, url_for
from flask_wtf.csrf import generate_csrf
from sqlmodel import Session

from turkflow import frames_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, NotFound
from turkflow.hits import lifecycle
from turkflow.models import Assignment, AssignmentStatus, Hit, Turn, Worker
from turkflow.protocol import FRAMES
from turkflow.web import wants_json
from turkflow.web.star import action_body
from turkflow.web.worker import (
    _current_worker, _own_assignment, _settings, queue_next_turn, turn_json, worker_page_headers,
)

bp = Blueprint("frames", __name__, url_prefix="/frames")


@bp.after_request
def frames_page_headers(response: Response) -> Response:
    return worker_page_headers(response)


def _held(session: Session, assignment_id: str) -> tuple[Worker, Assignment, Hit, Turn]:
    """The signed-in worker's own assignment of a Frames turn (anybody else's is a 403)."""
    worker = _current_worker(session)
    assignment, hit, turn = _own_assignment(session, worker, assignment_id)
    if lifecycle.batch_of_hit(session, hit).protocol != FRAMES.name:
        raise NotFound("this turn is not part of a Frames dialog")
    return worker, assignment, hit, turn


def _data(session: Session, turn: Turn, worker: Worker) -> dict[str, Any]:
    """The role's own part of the page: the user's goal, or the wizard's search (never the other's)."""
    if turn.role == "user":
        return {"user": frames_dialog.user_view(session, turn)}
    return {"wizard": frames_dialog.wizard_view(session, turn, worker_id=worker.id)}


def _page(assignment_id: str, *, error: Optional[InvalidInput] = None, typed: str = "",
          status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        worker, assignment, hit, turn = _held(session, assignment_id)
        view = lifecycle.turn_view(session, turn)
        data = _data(session, turn, worker)
        if wants_json():
            return jsonify({**turn_json(view, assignment, hit), "frames": data})
        if assignment.status != AssignmentStatus.accepted:  # already submitted: back to the queue
            return redirect(url_for("worker.queue", submitted=turn.id), 303)
        template = "frames_user.html" if turn.role == "user" else "frames_wizard.html"
        page = render_template(
            template, view=view, form=FRAMES.form(turn.role), frames=data, typed=typed, error=error,
            submit_url=url_for("frames.submit", assignment_id=assignment_id),
            action_url=url_for("frames.action", assignment_id=assignment_id),
            hidden={"csrf_token": generate_csrf()}, lease_expires_at=hit.lease_expires_at, worker=worker,
            max_chars=FRAMES.max_response_chars)
    return make_response(page, status)


def _typed(body: dict[str, Any]) -> str:
    text = body.get("text")
    return text[:FRAMES.max_response_chars] if isinstance(text, str) else ""


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    return _page(assignment_id)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """A search inside the turn. JSON clients get what it logged and the wizard's data again; the page
    without scripts is shown again at the results."""
    body = action_body()
    name = body.pop("action", None)
    try:
        with session_scope(_settings().database_url) as session:
            worker, _, _, held = _held(session, assignment_id)
            written = frames_dialog.take_action(session, held, worker, name, body)
            logged = [{"action": e.action, "agent": e.agent, **e.data} for e in written]
            data = _data(session, held, worker)
    except InvalidInput as error:
        if wants_json():
            raise
        return _page(assignment_id, error=error, typed=_typed(body), status=400)
    if wants_json():
        return jsonify(logged=logged, **data)
    return redirect(url_for("frames.turn", assignment_id=assignment_id) + "#searches", 303)


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn with its message and submit it. The worker whose turn ends the dialog goes on to its
    questions."""
    body = action_body()
    try:
        with session_scope(_settings().database_url) as session:
            worker, _, _, _ = _held(session, assignment_id)
            submission = frames_dialog.submit_turn(session, assignment_id, worker, body)
            turn_id, created = submission.turn.id, submission.created
            conversation_id, text = submission.turn.conversation_id, submission.turn.text
            ended = lifecycle.ends_conversation(session, submission.turn)
    except InvalidInput as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            raise
        return _page(assignment_id, error=error, typed=_typed(body), status=400)
    if created:
        queue_next_turn(turn_id, worker)
    survey_url = url_for("worker.survey", conversation_id=conversation_id) if ended else None
    if wants_json():
        return jsonify(turn_id=turn_id, created=created, text=text, survey_url=survey_url)
    return redirect(survey_url or url_for("worker.queue", submitted=turn_id), 303)
