"""MEEP's worker pages: the user's (the goal, the chat, a message) and the agent's, where every act is a click.

A MEEP turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). The
agent's page shows the user's messages as words to click, the APIs with a slot per argument, the results
panel and the templates with a slot per blank. A slot holds clicks in MEEP's names (``u2_5 u2_6``: words 5
and 6 of user message 2; ``v1.name``: a result field); with scripts a click on a word or a field fills the
slot last chosen, without them the agent types those names. Each API call and each template picked is a
POST that ``turkflow.protocols.meep.dialog`` checks and logs; sending submits the paid turn through
``lifecycle.submit_turn`` and the same Celery task as every other turn. The user who ends the dialog goes
on to its end-of-dialog question.

Routes (``Accept: application/json`` gives JSON; POSTs carry the CSRF token as the forms do, or as
``X-CSRFToken``): ``GET|POST /meep/turn/<assignment_id>`` (the page; submit the turn: the user's ``text``
and ``complete``, the agent's ``action=send``) and ``POST /meep/turn/<assignment_id>/action`` (a click:
``call_api`` with ``api`` and ``arguments``, ``pick_template`` with ``template`` and ``fillers``, as
``turkflow.protocols.meep.clicks`` reads them, or the forms' ``arg-<name>`` and ``filler-<n>`` slots).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import Response
from sqlmodel import Session

from turkflow.protocols.meep import dialog as meep_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, ServiceUnavailable
from turkflow.models import Turn, Worker
from turkflow.protocols.questions import MEEP
from turkflow.web.protocols.logged import (
    Acted, Held, close_turn, held_turn, logged_blueprint, show_turn, take_action,
)
from turkflow.web.worker import _settings

bp = logged_blueprint(MEEP)
PAGES = {"user": "meep_user.html", "wizard": "meep_agent.html"}


def _data(session: Session, turn: Turn, worker: Worker) -> dict[str, Any]:
    if turn.role == "user":
        return {"user": meep_dialog.user_view(session, turn)}
    return {"agent": meep_dialog.agent_view(session, turn, worker_id=worker.id)}


def _page(assignment_id: str, *, error: Optional[InvalidInput | ServiceUnavailable] = None,
          typed: Optional[dict] = None, status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        held = held_turn(session, MEEP, assignment_id)
        data = _data(session, held.turn, held.worker)
        return show_turn(session, held, data, PAGES, error=error, typed=typed or {}, status=status)


def _shown_again(assignment_id: str, error: InvalidInput | ServiceUnavailable,
                 body: dict[str, Any]) -> Response:
    """The page again after a refused click or submit, with the slots and the message as sent."""
    return _page(assignment_id, error=error, typed=body, status=error.status)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    return _page(assignment_id)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """One click: an API call or a template picked. JSON clients get what it logged and the agent's page
    data; the page without scripts is shown again at the message."""
    return take_action(MEEP, assignment_id, _act, _shown_again, "#message")


def _act(session: Session, held: Held, body: dict[str, Any]) -> Acted:
    fields = meep_dialog.form_click(body)  # a copy: the page shown again keeps the slots as sent
    written = meep_dialog.record_action(session, held.turn, held.worker, fields.pop("action", None), fields)
    return Acted(written, _data(session, held.turn, held.worker), {})


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn (the user's message, the agent's send) and submit it, once: a second send of the
    same turn returns the stored one (``close_turn``)."""
    return close_turn(MEEP, assignment_id, _shown_again)
