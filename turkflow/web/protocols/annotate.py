"""Annotation pages: the annotator's turn page (the dialog up to the turn to label, and forms that add an act
with a slot value picked by clicking the turn's words or a listed value, a frame relation, or clear them),
and the requester's pages of an annotation batch (agreement per label; the turns whose annotators disagree,
where a person picks the final labels and may mark the turn gold).

The annotator's page works without scripts: every click-made item is a form post that
``turkflow.protocols.annotate.dialog`` checks and logs, and the page is shown again. Routes
(``Accept: application/json`` gives JSON; POSTs carry the CSRF token):
``GET|POST /annotate/turn/<assignment_id>`` (the page; submit the labels),
``POST /annotate/turn/<assignment_id>/action`` (``action`` label: ``act``, ``slot``, ``words`` or ``value``;
frame: ``relation``, ``frame``; clear),
``GET /admin/annotation/<batch_id>`` (agreement and the turns to decide), ``POST
/admin/annotation/units/<unit_id>`` (``chosen``: an annotation's turn id; ``gold``).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, redirect, render_template, request, url_for
from flask_login import current_user
from sqlmodel import Session

from turkflow import access, pipeline
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, NotFound, ServiceUnavailable
from turkflow.models import Batch, Turn, Worker
from turkflow.protocols import actions
from turkflow.protocols.annotate import actions as annotate_actions
from turkflow.protocols.annotate import dialog as annotate_dialog
from turkflow.protocols.annotate import results
from turkflow.protocols.questions import ANNOTATE, YES_NO
from turkflow.web import admin
from turkflow.web.http import wants_json
from turkflow.web.protocols.logged import (
    Acted, Held, action_body, close_turn, held_turn, logged_blueprint, show_turn, take_action,
)
from turkflow.web.worker import _settings

bp = logged_blueprint(ANNOTATE)
PAGES = {"annotator": "annotate_turn.html"}


def _data(session: Session, turn: Turn, worker: Worker) -> dict[str, Any]:
    return annotate_dialog.annotator_view(session, turn, worker_id=worker.id)


def _page(assignment_id: str, *, error: InvalidInput | ServiceUnavailable | None = None,
          status: int = 200) -> Response:
    with session_scope(_settings().database_url) as session:
        held = held_turn(session, ANNOTATE, assignment_id)
        return show_turn(session, held, _data(session, held.turn, held.worker), PAGES, error=error, status=status)


def _shown_again(assignment_id: str, error: InvalidInput | ServiceUnavailable, body: dict[str, Any]) -> Response:
    return _page(assignment_id, error=error, status=error.status)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    return _page(assignment_id)


@bp.post("/turn/<assignment_id>/action")
def action(assignment_id: str) -> Any:
    """One click-made item (or clear). JSON clients get what it logged and the page's data again."""
    return take_action(ANNOTATE, assignment_id, _act, _shown_again, "#labels")


def _act(session: Session, held: Held, body: dict[str, Any]) -> Acted:
    written = annotate_dialog.record_action(session, held.turn, held.worker, body.pop("action", None), body)
    return Acted(written, _data(session, held.turn, held.worker), {})


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Submit the labels the clicks add up to (``close_turn``)."""
    return close_turn(ANNOTATE, assignment_id, _shown_again)


# ---- the requester's pages ------------------------------------------------------------------------------

dashboard = Blueprint("annotation", __name__, url_prefix="/admin/annotation")
dashboard.before_request(admin.guard)
dashboard.after_request(admin.dashboard_headers)


def _annotation_batch(session: Session, batch_id: int) -> Batch:
    """The annotation batch, if the signed-in requester may see it (``turkflow.access``)."""
    batch = access.batch(session, current_user.access, batch_id)
    if batch.protocol != ANNOTATE.name:
        raise NotFound(f"annotation batch {batch_id} does not exist")
    return batch


@dashboard.get("/<int:batch_id>")
def batch_page(batch_id: int) -> Any:
    """Agreement per label, and each turn whose annotators disagree with a form to decide it (``all=1``: every
    fully labelled turn, to mark gold ones too)."""
    everything = request.args.get("all") == "1"
    with session_scope(_settings().database_url) as session:
        batch = _annotation_batch(session, batch_id)
        shown = results.batch_agreement(session, batch_id)
        units = results.units(session, batch_id, disagreed_only=not everything)
        if wants_json():
            return jsonify(agreement=shown, units=units)
        return render_template("admin/annotation.html", batch=batch, agreement=shown, units=units,
                               everything=everything, yes_no=YES_NO)


@dashboard.post("/<int:batch_id>/units/<int:unit_id>")
def decide(batch_id: int, unit_id: int) -> Any:
    """A person's final labels of one turn: one of its annotations, and gold or not."""
    with session_scope(_settings().database_url) as session:
        _annotation_batch(session, batch_id)  # one the requester may not see does not exist, whatever is sent
        decision = actions.parse(annotate_actions.Decision, action_body())
        verdict = results.adjudicate(session, batch_id, unit_id, chosen_turn_id=decision.chosen,
                                     gold=decision.gold, actor=current_user.actor)
        decided = {"unit": unit_id, "labels": verdict.labels, "gold": verdict.gold}
    if decided["gold"]:  # its annotations so far are judged against it now, later ones as they come
        pipeline.review_gold(_settings(), current_app.config["TURKFLOW_PROVIDERS"], unit_id)
    if wants_json():
        return jsonify(decided)
    return redirect(url_for("annotation.batch_page", batch_id=batch_id,
                            **({"all": "1"} if request.args.get("all") == "1" else {})) + f"#unit-{unit_id}", 303)
