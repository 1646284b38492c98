"""MEEP's worker pages: the user's (the goal, the chat, a message) and the agent's, where every act is a click.

A MEEP turn is taken from the same queue as any other (``GET /turn/<assignment_id>`` sends it here). The
agent's page shows the user's messages as words to click, the APIs with a slot per argument, the results
panel and the templates with a slot per blank. A slot holds clicks in MEEP's names (``u2_5 u2_6``: words 5
and 6 of user message 2; ``v1.name``: a result field); with scripts a click on a word or a field fills the
slot last chosen, without them the agent types those names. Each API call and each template picked is a
POST that ``turkflow.protocols.meep.dialog`` checks and logs; sending submits the paid turn through
``lifecycle.submit_turn`` and the same Celery task as every other turn. The user who ends the dialog goes
on to its end-of-dialog question.

The agent's "+" composes a new template by clicking words and blanks (``add_template``); every agent of the
batch sees it from then on. Once the agent has called ``start_driving``, the user's page shows the
destination on a Leaflet map (vendored in ``static/vendor/leaflet/``, BSD-2) with the tiles the requester
set (``TURKFLOW_MEEP_TILE_URL``; none: the marker on a blank background with its coordinates), and the
user approves or disapproves it, which ends the dialog. The pages' Content-Security-Policy allows scripts,
styles and images from this site only, and the tile server's images when one is set.

Routes (``Accept: application/json`` gives JSON; POSTs carry the CSRF token as the forms do, or as
``X-CSRFToken``): ``GET|POST /meep/turn/<assignment_id>`` (the page; submit the turn: the user's ``text``
and ``complete``, the agent's ``action=send``) and ``POST /meep/turn/<assignment_id>/action`` (a click:
``call_api`` with ``api`` and ``arguments``, ``add_template`` with ``words``, ``pick_template`` with
``template`` and ``fillers``, as ``turkflow.protocols.meep.clicks`` reads them, or the forms' ``arg-<name>``,
``filler-<n>`` and ``words`` slots). The user's turn after ``start_driving`` submits ``approved`` (yes or no).
"""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import urlsplit

from flask import Response
from sqlmodel import Session

from turkflow.protocols.meep import dialog as meep_dialog
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, ServiceUnavailable
from turkflow.models import DialogEvent, Turn, Worker
from turkflow.protocols.questions import MEEP
from turkflow.web.protocols.logged import (
    Acted, Entry, Held, close_turn, held_turn, logged_blueprint, show_turn, take_action,
)
from turkflow.web.worker import CONTENT_SECURITY_POLICY as WORKER_POLICY, _settings

bp = logged_blueprint(MEEP)
PAGES = {"user": "meep_user.html", "wizard": "meep_agent.html"}
# what every worker page's policy says of framing and of where forms post
FRAMES_AND_FORMS = "; ".join(d for d in WORKER_POLICY.split("; ") if d.startswith(("form-action", "frame-ancestors")))


def tile_source(tile_url: str) -> str:
    """The CSP source the tile URL's images come from (``{s}`` subdomains as ``*``), or nothing."""
    if not tile_url:
        return ""
    parts = urlsplit(tile_url.replace("{s}", "a"))
    host = parts.netloc.replace("a.", "*.", 1) if "{s}." in tile_url else parts.netloc
    return f"{parts.scheme}://{host}"


def content_security_policy(tile_url: str) -> str:
    """MEEP's pages load their scripts, styles and images (Leaflet's among them) from this site, and map
    tiles from the requester's tile server when one is set; nothing else."""
    images = " ".join(filter(None, ("'self' data:", tile_source(tile_url))))
    return (f"default-src 'self'; script-src 'self'; style-src 'self'; img-src {images}; connect-src 'self'; "
            f"object-src 'none'; base-uri 'self'; {FRAMES_AND_FORMS}")


def meep_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = content_security_policy(_settings().meep_tile_url)
    return response


# Flask runs a blueprint's after-request functions last-registered first: put this one first in the list
# so that it runs after the worker pages' headers (``logged_blueprint``) and its policy is the one sent.
bp.after_request_funcs.setdefault(None, []).insert(0, meep_headers)


def _data(session: Session, turn: Turn, worker: Worker) -> dict[str, Any]:
    if turn.role == "user":
        return {"user": meep_dialog.user_view(session, turn), "tiles": _settings().meep_tile_url}
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


def act(session: Session, turn: Turn, worker: Worker, body: dict[str, Any]) -> list[DialogEvent]:
    """One click from a POST's fields."""
    fields = meep_dialog.form_click(body)  # a copy: the page shown again keeps the slots as sent
    return meep_dialog.record_action(session, turn, worker, fields.pop("action", None), fields)


def _act(session: Session, held: Held, body: dict[str, Any]) -> Acted:
    return Acted(act(session, held.turn, held.worker, body), _data(session, held.turn, held.worker), {})


ENTRY = Entry(PAGES, lambda session, turn, worker, sent: _data(session, turn, worker), act,
              lambda sent: {"typed": sent}, meep_headers)


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Close the turn (the user's message, the agent's send) and submit it, once: a second send of the
    same turn returns the stored one (``close_turn``)."""
    return close_turn(MEEP, assignment_id, _shown_again)
