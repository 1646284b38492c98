"""The onboarding quiz for local workers: ``GET|POST /onboarding`` (MTurk workers take the same quiz as the
qualification test of their role's qualification type; see ``turkflow.hits.mturk.qualifications``)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, redirect, render_template, request, url_for

from turkflow.db import session_scope
from turkflow.hits import onboarding
from turkflow.web.worker import _current_worker, worker_page_headers

bp = Blueprint("onboarding", __name__)


@bp.after_request
def onboarding_headers(response):  # noqa: ANN001, ANN201 - a Flask response
    return worker_page_headers(response)


@bp.get("/onboarding")
def quiz() -> Any:
    with session_scope(current_app.config["TURKFLOW_SETTINGS"].database_url) as session:
        worker = _current_worker(session)
    return render_template("onboarding.html", worker=worker, quiz=onboarding.quiz_for(worker.role), answers={},
                           result=None)


@bp.post("/onboarding")
def grade() -> Any:
    settings = current_app.config["TURKFLOW_SETTINGS"]
    answers = {name: value for name, value in request.form.items()}
    with session_scope(settings.database_url) as session:
        worker = _current_worker(session)
        result = onboarding.onboard_worker(session, worker, answers, settings.onboarding_pass_percent)
    if result.passed:
        return redirect(url_for("worker.queue"), 303)
    page = render_template("onboarding.html", worker=worker, quiz=onboarding.quiz_for(worker.role), answers=answers,
                           result=result, pass_percent=settings.onboarding_pass_percent)
    return page, 200
