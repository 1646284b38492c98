"""Onboarding for local workers: ``GET|POST /onboarding``, the role's quiz (MTurk workers take the same quiz
as the qualification test of their role's qualification type; see ``turkflow.hits.mturk.qualifications``).

STAR's users and wizards qualify in stages instead (``turkflow.protocols.star.stages``): ``GET /onboarding`` shows the
stage they may take now (or ``?stage=N``), its tutorial and, once started, its quiz;
``POST /onboarding/stage/<n>/start`` opens an attempt, ``POST /onboarding/stage/<n>/hint`` records a hint
and shows it (the answers given so far stay on the page), ``POST /onboarding/stage/<n>`` grades the attempt
once. ``Accept: application/json`` gives each as JSON.

Wizard of Tasks' quiz also asks the worker to rate a few gold turns (``turkflow.quality.gold``): their
answers never fail anyone, they start the worker's record as a rater when they first pass.
"""

from __future__ import annotations

from typing import Any, Optional

from flask import Blueprint, current_app, jsonify, redirect, render_template, request, url_for
from sqlmodel import Session

from turkflow.db import session_scope
from turkflow.errors import Forbidden, InvalidAnswer
from turkflow.hits import onboarding
from turkflow.quality import gold, reliability
from turkflow.protocols.star import stages
from turkflow.models import Worker
from turkflow.web.http import id_arg, wants_json
from turkflow.web.worker import _current_worker, worker_page_headers

bp = Blueprint("onboarding", __name__)


@bp.after_request
def onboarding_headers(response):  # noqa: ANN001, ANN201 - a Flask response
    return worker_page_headers(response)


def _has_quiz(worker: Worker) -> None:
    """A role without a quiz (annotators: the requester invites them onboarded) is told so, not a 500."""
    if worker.role not in onboarding.QUIZZES:
        raise Forbidden(f"there is no onboarding quiz for the {worker.role} role: ask the requester to onboard you "
                        f"(turkflow worker invite --role {worker.role} --onboarded)")


@bp.get("/onboarding")
def quiz() -> Any:
    with session_scope(current_app.config["TURKFLOW_SETTINGS"].database_url) as session:
        worker = _current_worker(session)
        if stages.has_stages(worker.role):
            return _stage_page(session, worker, id_arg("stage"))
        _has_quiz(worker)
    return render_template("onboarding.html", worker=worker, quiz=onboarding.quiz_for(worker.role), answers={},
                           result=None, gold=gold.gold_for(worker.role), gold_field=gold.field)


@bp.post("/onboarding")
def grade() -> Any:
    settings = current_app.config["TURKFLOW_SETTINGS"]
    answers = {name: value for name, value in request.form.items()}
    with session_scope(settings.database_url) as session:
        worker = _current_worker(session)
        if stages.has_stages(worker.role):
            return redirect(url_for("onboarding.quiz"), 303)  # STAR's stages post to their own addresses
        _has_quiz(worker)
        rated = gold.answers_from(worker.role, request.form)
        first_pass = not worker.onboarded
        result = onboarding.onboard_worker(session, worker, answers, settings.onboarding_pass_percent)
        rater = (gold.record_gold(session, worker.id, worker.role, rated, reliability.Model.of(settings))
                 if result.passed and first_pass and rated else None)
    if wants_json():
        return jsonify(passed=result.passed, score=result.score, wrong=result.wrong, rater=rater)
    if result.passed:
        return redirect(url_for("worker.queue"), 303)
    page = render_template("onboarding.html", worker=worker, quiz=onboarding.quiz_for(worker.role), answers=answers,
                           result=result, pass_percent=settings.onboarding_pass_percent,
                           gold=gold.gold_for(worker.role), gold_field=gold.field)
    return page, 200


# ---- STAR's stages ---------------------------------------------------------------------------------------


def _stage_page(session: Session, worker: Worker, number: Optional[int], *, answers: Optional[dict] = None,
                result: Optional[stages.StageGrade] = None, errors: Optional[dict] = None,
                status: int = 200) -> Any:
    stage = stages.next_stage(worker) if number is None else stages.stage_for(worker.role, number)
    if stage is None:
        if wants_json():
            return jsonify(role=worker.role, passed_stage=stages.passed_stage(worker), stage=None)
        return render_template("onboarding_star.html", worker=worker, stage=None, view=None), status
    stages.check_offered(worker, stage)
    passed = stages.passed_stage(worker) >= stage.number
    attempt = None if passed else stages.open_attempt(session, worker, stage)
    view = stages.attempt_view(session, stage, attempt) if attempt is not None else None
    if wants_json():
        return jsonify(role=worker.role, passed_stage=stages.passed_stage(worker), stage=stage.number,
                       title=stage.title, tutorial=list(stage.tutorial),
                       attempt=attempt.id if attempt else None, hints=view.hints if view else {},
                       hints_left=view.hints_left if view else stage.max_hints,
                       questions=[{"name": q.name, "text": q.text, "options": [k for k, _ in q.options]}
                                  for q in stage.questions]), status
    urls = {"start": url_for("onboarding.star_start", number=stage.number),
            "hint": url_for("onboarding.star_hint", number=stage.number),
            "grade": url_for("onboarding.star_grade", number=stage.number)}
    page = render_template("onboarding_star.html", worker=worker, stage=stage, view=view, passed=passed,
                           answers=answers or {}, result=result, errors=errors or {}, urls=urls,
                           hidden=None)
    return page, status


@bp.post("/onboarding/stage/<int:number>/start")
def star_start(number: int) -> Any:
    with session_scope(current_app.config["TURKFLOW_SETTINGS"].database_url) as session:
        worker = _current_worker(session)
        stage = stages.stage_for(worker.role, number)
        attempt = stages.start_attempt(session, worker, stage)
        attempt_id = attempt.id
    if wants_json():
        return jsonify(attempt=attempt_id, stage=number)
    return redirect(url_for("onboarding.quiz", stage=number) + "#quiz", 303)


@bp.post("/onboarding/stage/<int:number>/hint")
def star_hint(number: int) -> Any:
    answers = request.form.to_dict(flat=False)
    with session_scope(current_app.config["TURKFLOW_SETTINGS"].database_url) as session:
        worker = _current_worker(session)
        stage = stages.stage_for(worker.role, number)
        form = request.form
        hint = stages.request_hint(session, worker, stage, form.get("attempt"), form.get("hint"))
        if wants_json():
            attempt = stages.open_attempt(session, worker, stage)
            left = stages.attempt_view(session, stage, attempt).hints_left
            return jsonify(question=request.form["hint"], hint=hint, hints_left=left)
        return _stage_page(session, worker, number, answers=_given(answers))


@bp.post("/onboarding/stage/<int:number>")
def star_grade(number: int) -> Any:
    raw = request.form.to_dict(flat=False)
    with session_scope(current_app.config["TURKFLOW_SETTINGS"].database_url) as session:
        worker = _current_worker(session)
        stage = stages.stage_for(worker.role, number)
        try:
            result = stages.grade_attempt(session, worker, stage, request.form.get("attempt"), raw)
        except InvalidAnswer as error:  # nothing was graded: the page shows the refused answer
            if wants_json():
                raise
            session.rollback()
            return _stage_page(session, worker, number, answers=_given(raw),
                               errors={error.field: error.reason}, status=400)
    if wants_json():
        return jsonify(passed=result.passed, reasons=result.reasons, hints_used=result.hints_used,
                       stage=number)
    if result.passed:
        return redirect(url_for("worker.queue"), 303)
    with session_scope(current_app.config["TURKFLOW_SETTINGS"].database_url) as session:
        worker = _current_worker(session)
        return _stage_page(session, worker, number, answers=_given(raw), result=result)


def _given(raw: dict[str, list[str]]) -> dict[str, str]:
    """The single answers sent, to tick them again on the page."""
    return {name: values[0] for name, values in raw.items() if len(values) == 1}
