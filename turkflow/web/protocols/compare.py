"""Side-by-side pages: the judge's turn page (the question, two dialogs of the same task side by side, the choice
and a short reason) and the requester's page of a comparison batch (the ranking with its intervals and plot,
the win-rate grid, position bias and the judges).

The judge's page works without scripts. It names no system, batch or conversation: the pair is logged on the
server when the page first opens (``turkflow.protocols.compare.dialog.judge_view``) and the form sends only
the choice and the reason. Routes (``Accept: application/json`` gives JSON; POSTs carry the CSRF token):
``GET|POST /compare/turn/<assignment_id>`` (the page; send ``choice`` left, right or tie and ``response``),
``GET /admin/compare/<batch_id>`` (the report; ``blocked=1`` counts blocked judges' votes too).
"""

from __future__ import annotations

import base64
from typing import Any, Optional

from flask import Blueprint, Response, jsonify, redirect, render_template, request, url_for
from flask_login import current_user
from flask_wtf.csrf import generate_csrf

from turkflow import access, reports
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, ServiceUnavailable
from turkflow.hits import lifecycle
from turkflow.models import AssignmentStatus
from turkflow.protocols.compare import dialog as compare_dialog
from turkflow.protocols.questions import COMPARE
from turkflow.web import admin
from turkflow.web.http import wants_json
from turkflow.web.protocols.logged import close_turn, held_turn, logged_blueprint, render_turn
from turkflow.web.worker import _settings

bp = logged_blueprint(COMPARE)
PAGES = {"judge": "compare_turn.html"}


def _page(assignment_id: str, *, error: Optional[InvalidInput | ServiceUnavailable] = None, status: int = 200,
          given: Optional[dict[str, Any]] = None) -> Response:
    with session_scope(_settings().database_url) as session:
        held = held_turn(session, COMPARE, assignment_id)
        if held.assignment.status != AssignmentStatus.accepted:  # already sent: back to the queue
            if wants_json():
                return jsonify(assignment_id=assignment_id, status=held.assignment.status)
            return redirect(url_for("worker.queue", submitted=held.turn.id), 303)
        data = compare_dialog.judge_view(session, held.turn, held.worker)
        if wants_json():
            form = COMPARE.form(held.turn.role)
            return jsonify(assignment_id=assignment_id, status=held.assignment.status,
                           lease_expires_at=held.hit.lease_expires_at.isoformat() if held.hit.lease_expires_at
                           else None, guidelines=list(form.guidelines),
                           choices=[key for key, _ in form.questions[0].options], compare=data)
        view = lifecycle.turn_view(session, held.turn)
        return render_turn(view, data, PAGES,
                           submit_url=url_for("compare.submit", assignment_id=assignment_id), action_url="",
                           hidden={"csrf_token": generate_csrf()}, lease_expires_at=held.hit.lease_expires_at,
                           worker=held.worker, earned=reports.earned_cents(session, held.worker.id, view.batch.currency),
                           error=error, status=status, given=given or {})


def _shown_again(assignment_id: str, error: InvalidInput | ServiceUnavailable, body: dict[str, Any]) -> Response:
    return _page(assignment_id, error=error, status=error.status, given=body)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    return _page(assignment_id)


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    """Send the choice and the reason (``close_turn``)."""
    return close_turn(COMPARE, assignment_id, _shown_again)


# ---- the requester's page ------------------------------------------------------------------------------

dashboard = Blueprint("comparison", __name__, url_prefix="/admin/compare")
dashboard.before_request(admin.guard)
dashboard.after_request(admin.dashboard_headers)


@dashboard.get("/<int:batch_id>")
def batch_page(batch_id: int) -> Any:
    """The ranking with bootstrap intervals and its plot, the win-rate grid, position bias and the judges."""
    from turkflow.protocols.compare import report  # scipy and matplotlib, for the requester's page only

    include_blocked = request.args.get("blocked") == "1"
    with session_scope(_settings().database_url) as session:
        access.batch(session, current_user.access, batch_id)
        shown = report.batch_report(session, batch_id, include_blocked=include_blocked)
    if wants_json():
        return jsonify(shown)
    plot = base64.b64encode(report.ranking_png(shown)).decode("ascii")
    return render_template("admin/compare.html", report=shown, plot=plot, include_blocked=include_blocked)
