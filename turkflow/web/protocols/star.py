"""STAR's worker pages: the wizard's and the user's turn pages, their in-turn actions, the task's flow
chart image (the end-of-dialog questionnaires are every protocol's: ``turkflow.web.worker``).

A STAR turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). While
the worker holds it, each action is a small POST that ``turkflow.protocols.star.dialog`` validates and logs as one
``DialogEvent``; the closing one (the wizard's picked or written reply, the user's message, perhaps ending
the dialog) submits the paid turn through ``lifecycle.submit_turn`` and the same Celery task as every
other turn. The worker who ends the dialog answers its questions at once; the last worker of the other
role finds them at the top of their queue.

Routes (``Accept: application/json`` gives the JSON variant; POSTs carry the CSRF token as the worker pages'
forms do, or as ``X-CSRFToken``):
``GET|POST /star/turn/<assignment_id>`` (the page, ``?query=<id>&position=<n>`` showing a query's n-th
match, from 0, ``?older=<n>`` the queries from the n-th newest; submit the turn),
``POST /star/turn/<assignment_id>/action`` (one action: query, select_primary, select_secondary,
request_suggestions, select_task, ...),
``GET /star/image/<task_id>`` (the flow chart).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import Response, request, send_file
from sqlmodel import Session

from turkflow.protocols.star import dialog as star_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, NotFound, ServiceUnavailable
from turkflow.hits import lifecycle
from turkflow.models import AssignmentStatus, Task, Turn, Worker
from turkflow.protocols.questions import STAR
from turkflow.web.http import wants_json
from turkflow.web.protocols.logged import (
    Acted, Held, close_turn, held_turn, logged_blueprint, older_arg, render_turn, show_turn, take_action,
)
from turkflow.web.worker import _settings

bp = logged_blueprint(STAR)
PAGES = {"user": "star_user.html", "wizard": "star_wizard.html"}
MAX_DRAFT = 500  # of a draft carried in the page's address (the no-script "Suggest")


# ---- the turn page ----------------------------------------------------------------------------------


def star_turn_data(session: Session, turn: Turn, worker: Worker, draft: str = "",
                   browse: Optional[tuple[int, int]] = None, *, read_args: bool = True) -> dict[str, Any]:
    """What the role's page shows besides the chat: the user's scenario and instructions, or the
    wizard's tasks, chart, knowledge base (``browse``: a query's id and the match to show; else the
    request's ``query`` and ``position`` arguments, on every entry route, and ``older``, the page of older
    queries) and suggestions. The user's never holds the knowledge base."""
    if turn.role == "user":
        return {"user": star_dialog.user_view(session, turn)}
    older = older_arg() if read_args else 0
    return {"wizard": star_dialog.wizard_view(session, turn, draft, worker_id=worker.id,
                                              browse=browse or (browsed() if read_args else None), older=older)}


def browsed() -> Optional[tuple[int, int]]:
    """The match a GET asks to show (``?query=<event id>&position=<n>``), or none."""
    if request.method != "GET" or "query" not in request.args:
        return None
    found = []
    for name, default in (("query", None), ("position", "0")):
        value = request.args.get(name, default)
        if not (value.isascii() and value.isdigit() and len(value) <= 12):
            raise InvalidInput("expected a whole number", name)
        found.append(int(value))
    return found[0], found[1]


def render_star_turn(view: lifecycle.TurnView, data: dict[str, Any], *, draft: str = "",
                     **where: Any) -> Response:
    """The STAR turn page, for any entry route that gives it where to post (``render_turn``)."""
    return render_turn(view, data, PAGES, draft=draft, **where)


def _page(assignment_id: str, *, error: Optional[InvalidInput | ServiceUnavailable] = None, draft: str = "",
          status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        held = held_turn(session, STAR, assignment_id)
        if held.assignment.status == AssignmentStatus.accepted and held.turn.role == "user":
            star_dialog.give_nudges(session, held.turn)  # once each, before the user writes
        try:
            data = star_turn_data(session, held.turn, held.worker, draft)
        except InvalidInput as refused:  # a match to show that is not there: the page as it is, saying so
            if wants_json() or error is not None or "query" not in request.args:
                raise
            data, error, status = star_turn_data(session, held.turn, held.worker, draft, read_args=False), refused, 400
        return show_turn(session, held, data, PAGES, error=error, draft=draft, status=status)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    draft = request.args.get("draft", "")[:MAX_DRAFT]
    return _page(assignment_id, draft=draft)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """One action inside the turn. JSON clients get what it logged (a query's answer with it) and, for a
    wizard, the page's data ranked again; the page without scripts is shown again at the suggestions."""
    return take_action(STAR, assignment_id, _act, _shown_again, "#suggestions")


def _act(session: Session, held: Held, body: dict[str, Any]) -> Acted:
    name = body.pop("action", None)
    written = star_dialog.take_action(session, held.turn, held.worker, name, body)
    draft = written[0].data.get("Text", "") if name == "request_suggestions" else ""
    # a selected item stays in view: the page shows its query at its position again
    browse = (written[0].data["Query"], written[0].data["Position"]) if name in star_dialog.SELECTIONS else None
    data = star_turn_data(session, held.turn, held.worker, draft, browse) if held.turn.role == "wizard" else {}
    args = {"draft": draft[:MAX_DRAFT]} if draft else {}
    if browse is not None:
        args = {"query": str(browse[0]), "position": str(browse[1])}
    return Acted(written, data, args)


def _shown_again(assignment_id: str, error: InvalidInput | ServiceUnavailable,
                 body: dict[str, Any]) -> Response:
    """The page again after a refused action or submit, with the message typed."""
    text = body.get("text")
    draft = text[:MAX_DRAFT] if isinstance(text, str) else ""
    return _page(assignment_id, error=error, draft=draft, status=error.status)


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn (the reply, given here or logged before) and submit it (``close_turn``)."""
    return close_turn(STAR, assignment_id, _shown_again)


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
