"""Frames' worker pages: the user's turn page (the goal, the chat, a message that may end the dialog) and the
wizard's (the chat, the search form over the database's searchable fields and the sort, every search's
results and suggestions, the reply).

A Frames turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). While
the wizard holds it, each search is a small POST that ``turkflow.protocols.frames.dialog`` validates, runs and logs;
the closing message submits the paid turn through ``lifecycle.submit_turn``. The worker whose turn ends the
dialog goes on to its questions (``worker.survey``); the last wizard finds them at the top of their queue.
The pages work without scripts: every form posts and the page is shown again.

Routes (``Accept: application/json`` gives the JSON variant; POSTs carry the CSRF token as the worker pages'
forms do, or as ``X-CSRFToken``):
``GET|POST /frames/turn/<assignment_id>`` (the page; submit the turn),
``POST /frames/turn/<assignment_id>/action`` (a search: ``kb-<field>`` or ``kb-<field>.at_least`` form
fields, or JSON ``constraints``; ``sort``, ``descending``, ``flexible`` days; or ``book`` with the item's
``id``, which ends the dialog with this turn).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import Response
from sqlmodel import Session

from turkflow.protocols.frames import dialog as frames_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, ServiceUnavailable
from turkflow.models import DialogEvent, Turn, Worker
from turkflow.protocols.questions import FRAMES
from turkflow.web.protocols.logged import (
    Acted, Entry, Held, close_turn, held_turn, logged_blueprint, older_arg, show_turn, take_action,
)
from turkflow.web.worker import _settings

bp = logged_blueprint(FRAMES)
PAGES = {"user": "frames_user.html", "wizard": "frames_wizard.html"}


def turn_data(session: Session, turn: Turn, worker: Worker, form: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The role's own part of the page: the user's goal, or the wizard's search (never the other's), its
    form filled with ``form`` (a refused search's fields) if given, its searches from the page a GET asks for
    (``older_arg``, on every entry route)."""
    if turn.role == "user":
        return {"user": frames_dialog.user_view(session, turn)}
    return {"wizard": frames_dialog.wizard_view(session, turn, worker_id=worker.id, typed=form, older=older_arg())}


def typed_of(body: dict[str, Any]) -> tuple[str, Optional[dict[str, Any]]]:
    """What a refused action or submit had typed: the message, and a search's form fields."""
    text, form = body.get("text"), body.get("form")
    return (text[:FRAMES.max_response_chars] if isinstance(text, str) else "",
            form if isinstance(form, dict) and body.get("action") == "search" else None)


def _page(assignment_id: str, *, error: Optional[InvalidInput | ServiceUnavailable] = None, typed: str = "",
          form: Optional[dict[str, Any]] = None, status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        held = held_turn(session, FRAMES, assignment_id)
        data = turn_data(session, held.turn, held.worker, form)
        return show_turn(session, held, data, PAGES, error=error, typed=typed, status=status)


def _shown_again(assignment_id: str, error: InvalidInput | ServiceUnavailable,
                 body: dict[str, Any]) -> Response:
    """The page again after a refused search, booking or submit, with what was typed."""
    typed, form = typed_of(body)
    return _page(assignment_id, error=error, typed=typed, form=form, status=error.status)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    return _page(assignment_id)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """A search or a booking inside the turn. JSON clients get what it logged and the wizard's data again;
    the page without scripts is shown again at the results."""
    return take_action(FRAMES, assignment_id, _act, _shown_again, "#searches")


def act(session: Session, turn: Turn, worker: Worker, body: dict[str, Any]) -> list[DialogEvent]:
    """A search or a booking from a POST's fields (kept as sent, for the page shown again)."""
    return frames_dialog.take_action(session, turn, worker, body.get("action"),
                                     {k: v for k, v in body.items() if k != "action"})


def _act(session: Session, held: Held, body: dict[str, Any]) -> Acted:
    return Acted(act(session, held.turn, held.worker, body), turn_data(session, held.turn, held.worker), {})


ENTRY = Entry(PAGES, lambda session, turn, worker, sent: turn_data(session, turn, worker, typed_of(sent)[1]),
              act, lambda sent: {"typed": typed_of(sent)[0]})


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn with its message and submit it (``close_turn``)."""
    return close_turn(FRAMES, assignment_id, _shown_again)
