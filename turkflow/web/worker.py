"""The worker blueprint: the local crowd's queue and the turn page every crowd worker fills in.

Views parse the request, call ``turkflow.hits.lifecycle`` and render; the protocol validates every answer
on the server. A submission is committed before its Celery task is queued, so a worker who sees
"submitted" never loses the turn; if the broker is down the reconciler opens the next turn later.

Routes (the crowd simulator relies on them; ``Accept: application/json`` gives the JSON variant):
``GET /`` (a welcome page, or the queue), ``GET /join/<token>``, ``GET /queue``, ``POST /queue/take/<hit_id>``,
``GET|POST /turn/<assignment_id>`` (a STAR, Frames or MEEP turn's page is its protocol's: GET sends it there),
``GET|POST /survey/<conversation_id>`` (the end-of-dialog questions of a dialog the worker took part in).
"""

from __future__ import annotations

import itertools
import logging
from datetime import datetime
from typing import Any, Optional, Union

from flask import (
    Blueprint, Response, current_app, jsonify, make_response, redirect, render_template, request, url_for,
)
from flask_wtf.csrf import generate_csrf
from sqlmodel import Session, col, select

from turkflow import invites, reports
from turkflow.agents import pairwise
from turkflow.protocols import registry
from turkflow.protocols import surveys
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import keep as keeping, lifecycle
from turkflow.errors import Conflict, Forbidden, InvalidAnswer, InvalidInput, NotFound, ServiceUnavailable
from turkflow.hits.lifecycle import TurnView
from turkflow.models import (
    Assignment, AssignmentStatus, Batch, Conversation, Hit, HitStatus, Task, Turn, TurnStatus, Worker, WorkerStatus,
    utcnow,
)
from turkflow.protocols.questions import SURVEY_TEXT_CHARS, Question, TurnContext
from turkflow.web.http import id_arg, json_object, retry_after, wants_json
from turkflow.workers import tasks

bp = Blueprint("worker", __name__)
log = logging.getLogger("turkflow.web.worker")

# Scripts only come from our own static files, a second wall behind Jinja's escaping of worker text; forms
# post to this site only; no site may frame these pages (MTurk's turn page, the one page shown in a frame,
# says otherwise: ``turkflow.web.mturk``).
CONTENT_SECURITY_POLICY = (
    "script-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


@bp.after_request
def worker_page_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    return response


# What the pages read of a worker: the ``Worker`` object, or its row (``_signed_in``) where a page only reads it.
AnyWorker = Union[Worker, invites.SignedIn]


def _settings() -> Settings:
    return current_app.config["TURKFLOW_SETTINGS"]


def _worker_token() -> Optional[str]:
    """The worker cookie (signed, dated, not the dashboard's session): the local worker's credential."""
    return request.cookies.get(current_app.config["WORKER_COOKIE"])


def _joined_worker(session: Session) -> Optional[Worker]:
    """The worker this browser joined as."""
    settings, token = _settings(), _worker_token()
    if not token:
        return None
    return invites.worker_from_session_token(session, settings.secret_key, token, settings.worker_session_seconds)


def _current_worker(session: Session) -> Worker:
    return _must_have_joined(_joined_worker(session))


def _signed_in(session: Session) -> invites.SignedIn:
    """``_current_worker`` as a plain row, for the pages every turn passes through (queue, take, turn page,
    submit), which only read the worker."""
    settings, token = _settings(), _worker_token()
    found = invites.signed_in_from_session_token(session, settings.secret_key, token,
                                                 settings.worker_session_seconds) if token else None
    return _must_have_joined(found)


def _must_have_joined(worker: Optional[AnyWorker]) -> Any:
    if worker is None:
        raise Forbidden("this browser has not joined yet: open the personal invite link you were given")
    return worker


# ---- joining and the queue --------------------------------------------------------------------------


@bp.get("/")
def home() -> Any:
    """Where a person lands without a link: a signed-in worker goes on to the queue, anyone else learns
    what this server is, that they need their join link, and where the dashboard is."""
    with session_scope(_settings().database_url) as session:
        joined = _joined_worker(session) is not None
    if joined:
        return redirect(url_for("worker.queue"), 303)
    return render_template("index.html", worker=None)


@bp.get("/favicon.ico")
def favicon() -> Response:
    """Browsers ask for /favicon.ico wherever no page names an icon (a JSON reply, a file); pages link the SVG."""
    return redirect(url_for("static", filename="favicon.svg"), 301)


@bp.get("/join/<token>")
def join(token: str) -> Any:
    """Sign this browser in as the link's worker, unless it is signed in as somebody else: any site can send
    a browser to a link, so switching the identity the next turns are credited to needs a POST."""
    with session_scope(_settings().database_url) as session:
        invited = _invited_worker(session, token)
        current = _joined_worker(session)
    if current is None or current.id == invited.id:
        return _signed_in_as(invited)
    message = "this browser is signed in as another worker; confirm the switch on the page of this link"
    if wants_json():
        return jsonify(error=message), 409
    return render_template("join.html", worker=current, invited=invited, token=token)


@bp.post("/join/<token>")
def switch(token: str) -> Response:
    """The confirmed switch to the link's worker (the CSRF token proves it came from the confirm page)."""
    with session_scope(_settings().database_url) as session:
        return _signed_in_as(_invited_worker(session, token))


def _invited_worker(session: Session, token: str) -> Worker:
    worker = invites.worker_from_token(session, _settings().secret_key, token)
    if worker is None:
        raise Forbidden("this invite link is not valid; ask the requester for a new one")
    return worker


def _signed_in_as(worker: Worker) -> Response:
    settings = _settings()
    response = redirect(url_for("worker.queue"), 303)
    response.set_cookie(current_app.config["WORKER_COOKIE"], invites.session_token(settings.secret_key, worker),
                        max_age=settings.worker_session_seconds, secure=current_app.config["SESSION_COOKIE_SECURE"],
                        httponly=True, samesite="Lax")
    return response


@bp.get("/queue")
def queue() -> Any:
    """The worker's queue. Programs get the takeable turns and owed surveys; a page also shows the turns the
    worker holds and whether the turn just submitted ended its dialog (queries a program does not pay for)."""
    submitted = id_arg("submitted")
    page = not wants_json()
    with session_scope(_settings().database_url) as session:
        worker = _signed_in(session)
        may_work = worker.status == WorkerStatus.active and worker.onboarded
        keeping.seen(session, worker, utcnow(), _settings().presence_seconds)  # the queue's page asks every few s
        entries = lifecycle.queue_entries(session, worker) if may_work else []
        owed = surveys.surveys_due(session, worker)  # end-of-dialog questions still owed
        held = _held_turns(session, worker) if may_work and page else []
        written = session.get(Turn, submitted) if submitted and page else None
        last_turn = written is not None and written.worker_id == worker.id and lifecycle.ends_conversation(
            session, written)
        if page and worker.onboarded:  # what a study page says: pay, bonus, time, earnings
            terms = reports.pay_terms(session, [e["conversation_id"] for e in [*entries, *held]])
            minutes = reports.minutes_to_write(session, worker.role)
            # earnings in each currency the turns on offer pay in (the local queue's batches: USD)
            currencies = sorted({t.currency for t in terms.values()}) or [Batch.model_fields["currency"].default]
            earned = {currency: reports.earned_cents(session, worker.id, currency) for currency in currencies}
    if not page:
        return jsonify(queue_json(worker, entries, owed))
    if not worker.onboarded:  # the role's quiz comes before the first turn
        return redirect(url_for("onboarding.quiz"), 303)
    estimate = round(minutes) if minutes is not None else _settings().prolific_estimated_minutes
    return render_template("queue.html", worker=worker, entries=entries, held=held, submitted=submitted,
                           last_turn=last_turn, surveys=owed, refresh_seconds=_settings().queue_refresh_seconds,
                           terms=terms, minutes=max(1, estimate), measured=minutes is not None, earned=earned,
                           rules=sorted({t for t in terms.values() if t.bonus_cents}, key=lambda t: t.bonus_cents))


def queue_json(worker: AnyWorker, entries: list[dict[str, Any]], owed: list[Any]) -> dict[str, Any]:
    """The queue for programs: the worker, the takeable turns, the surveys owed and the CSRF token."""
    return {
        "worker": {"external_id": worker.external_id, "name": worker.name, "role": worker.role,
                   "status": worker.status, "onboarded": worker.onboarded},
        "open": [{key: entry[key] for key in ("hit_id", "conversation_id", "turn_index", "title")}
                 for entry in entries],
        "surveys": owed,
        "csrf_token": generate_csrf(),  # programs send it back as X-CSRFToken, as the page's forms do
    }


def _read_queue(session: Session, worker: AnyWorker) -> dict[str, Any]:
    """``queue_json`` read for ``worker``: what ``GET /queue`` answers a program."""
    may_work = worker.status == WorkerStatus.active and worker.onboarded
    entries = lifecycle.queue_entries(session, worker) if may_work else []
    return queue_json(worker, entries, surveys.surveys_due(session, worker))


def _held_turns(session: Session, worker: AnyWorker) -> list[dict[str, Any]]:
    """Turns the worker has taken and may still finish, so a closed tab does not strand a lease."""
    rows = session.exec(
        select(Assignment, Hit).join(Hit, Hit.id == Assignment.hit_id)
        .where(Assignment.worker_id == worker.id, Assignment.status == AssignmentStatus.accepted,
               Hit.status == HitStatus.open, col(Hit.lease_expires_at) >= utcnow())
        .order_by(Assignment.id)
    ).all()
    held = []
    for assignment, hit in rows:
        turn = session.get(Turn, hit.turn_id)
        held.append({"assignment_id": assignment.external_id, "conversation_id": turn.conversation_id,
                     "turn_index": turn.index, "title": _task_of(session, turn).title,
                     "lease_expires_at": hit.lease_expires_at})
    return held


def _task_of(session: Session, turn: Turn) -> Task:
    return session.get(Task, session.get(Conversation, turn.conversation_id).task_id)


@bp.post("/queue/take/<int:hit_id>")
def take(hit_id: int) -> Any:
    """Lease the turn. A program gets the turn page's JSON in the same answer (``turn``, unless the protocol
    has pages of its own), read in the taking transaction: no second request, no second read of what the
    take loaded. A browser is sent to the turn page (POST, redirect, GET: a reload never posts again)."""
    settings = _settings()
    page = None
    with session_scope(settings.database_url) as session:
        worker = _signed_in(session)
        taken = lifecycle.take(session, worker, hit_id, settings.lease_seconds, max_held=settings.max_held_turns)
        assignment_id = taken.assignment.external_id
        if wants_json() and registry.logged(taken.batch.protocol) is None:
            page = turn_json(lifecycle.turn_view(session, taken.turn, taken), taken.assignment, taken.hit)
    turn_url = url_for("worker.turn", assignment_id=assignment_id)
    if wants_json():
        return jsonify(assignment_id=assignment_id, turn_url=turn_url, **({"turn": page} if page else {}))
    return redirect(turn_url, 303)


# ---- the turn page ----------------------------------------------------------------------------------


@bp.post("/queue/leave")
def leave() -> Response:
    """The worker closed the queue's page (its ``pagehide`` beacon): present no longer, so the turns a batch
    keeps for them go to anyone (``turkflow.hits.keep``). Coming back to the queue makes them present again."""
    with session_scope(_settings().database_url) as session:
        keeping.left(session, _signed_in(session).id, utcnow())
    return Response(status=204)


@bp.get("/turn/<assignment_id>")
def turn(assignment_id: str) -> Any:
    with session_scope(_settings().database_url) as session:
        worker = _signed_in(session)
        found = _own_turn(session, worker, assignment_id)
        assignment, hit, current = found.assignment, found.hit, found.turn
        view = lifecycle.turn_view(session, current, found)
        pick = _pick(session, current)
        earned = reports.earned_cents(session, worker.id, view.batch.currency)
    logged = registry.logged(view.protocol.name)
    if logged is not None:  # STAR's, Frames' and MEEP's own pages
        return redirect(url_for(logged.page, assignment_id=assignment_id), 303)
    if wants_json():
        return jsonify({**turn_json(view, assignment, hit), **({"pick": pick} if pick else {})})
    if assignment.status != AssignmentStatus.accepted:  # already submitted: back to the queue
        return redirect(url_for("worker.queue", submitted=current.id), 303)
    return render_turn(view, form_action=url_for("worker.submit", assignment_id=assignment_id),
                       hidden={"csrf_token": generate_csrf()}, lease_expires_at=hit.lease_expires_at, worker=worker,
                       pick=pick, earned=earned)


def _pick(session: Session, turn: Any) -> Optional[dict[str, Any]]:
    """The two replies the person picks from on this turn (per-turn pairwise), as the page shows them."""
    waiting = pairwise.pending(session, turn)
    return waiting.view() if waiting is not None else None


@bp.post("/turn/<assignment_id>")
def submit(assignment_id: str) -> Any:
    raw = _raw_answers()
    listing = None
    try:
        with session_scope(_settings().database_url) as session:
            worker = _signed_in(session)
            submission = submit_answers(session, assignment_id, worker, raw)
            keeping.seen(session, worker, utcnow(), _settings().presence_seconds)  # on to the queue's page
            turn_id, created = submission.turn.id, submission.created
            session.commit()  # stored before the next turn is asked for (a refusal rolls back all of it)
            if created:
                queue_next_turn(turn_id, worker)
            if wants_json():  # with the queue, read after the commit: the page a program goes back to
                listing = _read_queue(session, worker)
    except (InvalidAnswer, ServiceUnavailable) as error:  # rolled back: nothing of this submission is stored
        return _refused_answers(assignment_id, error, raw)
    if listing is not None:
        return jsonify(turn_id=turn_id, created=created, queue=listing)
    return redirect(url_for("worker.queue", submitted=turn_id), 303)


def submit_answers(session: Session, assignment_id: str, worker: AnyWorker,
                   raw: dict[str, Any]) -> lifecycle.Submission:
    """A turn's answers, submitted. A STAR, Frames or MEEP turn's must agree with the actions it logged, so
    it goes through its dialog module's ``submit_turn``, which reads them off its events."""
    found = lifecycle.held(session, assignment_id)
    if found is not None and registry.logged(found.batch.protocol) is not None:
        submission = registry.parts(found.batch.protocol).submit_turn(session, assignment_id, worker, raw,
                                                                      as_answers=True)
        if not submission.created:  # sent before: only the same text again is the same turn
            lifecycle.check_resent(submission.turn, raw.get("response"), "response")
        return submission
    answers = dict(raw)
    if found is not None and found.assignment.worker_id == worker.id \
            and found.assignment.status == AssignmentStatus.accepted:
        pairwise.apply_pick(session, found.turn, worker, answers)  # the reply the dialog continues with, first
    return lifecycle.submit_turn(session, assignment_id, worker, answers, loaded=found)


def _own_assignment(session: Session, worker: AnyWorker, assignment_id: str) -> tuple[Assignment, Hit, Turn]:
    """The worker's own assignment, its HIT and its turn; anybody else's is refused before anything is shown."""
    return _own_turn(session, worker, assignment_id)[:3]


def _own_turn(session: Session, worker: AnyWorker, assignment_id: str) -> lifecycle.Held:
    """``_own_assignment`` with the turn's conversation, batch and task, for ``lifecycle.turn_view``."""
    found = lifecycle.held(session, assignment_id)
    if found is None:
        raise NotFound("this turn does not exist")
    if found.assignment.worker_id != worker.id:
        raise Forbidden("this turn was assigned to another worker")
    if found.assignment.status == AssignmentStatus.abandoned:
        raise Conflict("your time on this turn ran out and it went back to the queue; take another turn")
    if found.turn.status == TurnStatus.cancelled:
        raise Conflict("the requester cancelled this conversation; take another turn")
    return found


def _raw_answers() -> dict[str, Any]:
    """Form fields (repeated ones as lists) or a JSON object, exactly as sent: the protocol judges them."""
    if request.is_json:
        return json_object("send one JSON object with an entry per question")
    answers = request.form.to_dict(flat=False)
    answers.pop("csrf_token", None)  # the page's, not an answer
    return answers


def _refused_answers(assignment_id: str, error: InvalidAnswer | ServiceUnavailable, raw: dict[str, Any]) -> Any:
    """The page again with what the worker wrote: beside the answer refused, or under a note that storage
    took nothing (a 503 with Retry-After: the same submit later stores it)."""
    if wants_json():
        raise error
    with session_scope(_settings().database_url) as session:
        worker = _signed_in(session)
        found = _own_turn(session, worker, assignment_id)
        hit = found.hit
        view = lifecycle.turn_view(session, found.turn, found)
        pick = _pick(session, found.turn)
        earned = reports.earned_cents(session, worker.id, view.batch.currency)
    page = render_turn(view, form_action=url_for("worker.submit", assignment_id=assignment_id),
                       errors={error.field: error.reason} if isinstance(error, InvalidAnswer) else {},
                       retry=isinstance(error, ServiceUnavailable), answers=raw,
                       hidden={"csrf_token": generate_csrf()}, lease_expires_at=hit.lease_expires_at, worker=worker,
                       status=error.status, pick=pick, earned=earned)
    page.headers.update(retry_after(error))
    return page


def queue_survey_review(conversation_id: int, worker_id: int) -> None:
    """Ask Celery to judge the other role's writers by the answers just stored (a broker outage loses only
    these signals: the answers themselves are committed)."""
    try:
        tasks.survey_answered.delay(conversation_id, worker_id)
    except Exception as exc:  # noqa: BLE001 - the answers are stored; only the judgement waits
        log.warning("survey of conversation %s by worker %s stored but not queued for review (%s)",
                    conversation_id, worker_id, exc)


def queue_next_turn(turn_id: int, worker: AnyWorker) -> None:
    """Ask Celery to open the next turn. The turn is already committed, so a broker outage only delays it:
    the reconciler advances conversations whose task never ran."""
    try:
        tasks.turn_submitted.delay(turn_id)
    except Exception as exc:  # noqa: BLE001 - any broker failure is repaired by the reconciler
        log.warning("turn %s by worker %s stored but not queued (%s); the reconciler will advance it",
                    turn_id, worker.id, exc)


def render_turn(view: TurnView, *, mode: str = "work", form_action: str = "", errors: Optional[dict] = None,
                answers: Optional[dict] = None, hidden: Optional[dict[str, str]] = None,
                lease_expires_at: Optional[datetime] = None, worker: Optional[AnyWorker] = None,
                retry: bool = False, status: int = 200, pick: Optional[dict[str, Any]] = None,
                earned: Optional[int] = None) -> Response:
    """The turn page for one turn, reusable by every crowd provider's entry route.

    ``mode`` is "work" (the form to fill in) or "preview" (read-only, e.g. an MTurk worker who has not
    accepted the HIT). ``answers`` refills the form after a refused submission; ``hidden`` adds form fields
    (an MTurk assignmentId); ``worker`` shows who is signed in and the way back to the local queue;
    ``retry`` says nothing was saved because storage took no writes, to send the same again later; ``pick``:
    the two replies to pick from in place of the last turn (per-turn pairwise, ``turkflow.agents.pairwise``);
    ``earned``: what the worker has earned in the batch's currency (``reports.earned_cents``), shown beside the
    turn's pay.
    """
    if mode not in ("work", "preview"):
        raise ValueError(f"unknown turn page mode {mode!r}")
    form = view.protocol.form(view.turn.role)
    ctx = view.context
    by_id = {item["id"]: item for item in view.items}
    questions = form.questions_for(ctx)
    label_question = form.label_question()
    page = render_template(
        "turn.html",
        view=view,
        form=form,
        mode=mode,
        form_action=form_action,
        errors=errors or {},
        retry=retry,
        chosen={name: _as_strings(value) for name, value in (answers or {}).items()},
        hidden=hidden or {},
        lease_expires_at=lease_expires_at,
        worker=worker,
        questions=questions,
        required={q.name: q.required(ctx, {}) for q in questions},
        revealed_by=_revealed_by(ctx, questions, label_question),
        label_question=label_question,
        choices={"shareable": view.items if form.sees_document else [],
                 "shared_so_far": [by_id[i] for i in ctx.shared_so_far if i in by_id]},
        sections=_document_sections(view) if form.sees_document else [],
        label_text={role: dict(view.protocol.form(role).label_question().options)
                    for role in view.protocol.roles},
        max_chars=view.protocol.max_response_chars,
        pick=pick,
        earned=earned,
    )
    return worker_page_headers(make_response(page, status))


def _revealed_by(ctx: TurnContext, questions: list[Question],
                 label_question: Question) -> dict[str, list[str]]:
    """Questions that only matter for some labels (URLs for external knowledge) and the labels that show
    them; read off the protocol's own ``required`` rules so the page and the validation never disagree."""
    revealed = {}
    for q in questions:
        if q is label_question or q.required(ctx, {}):
            continue
        values = [value for value, _ in label_question.options
                  if q.required(ctx, {label_question.name: value})]
        if values:
            revealed[q.name] = values
    return revealed


def _as_strings(value: Any) -> list[str]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return [str(v) for v in values if v is not None]


def _document_sections(view: TurnView) -> list[tuple[str, list[dict[str, Any]]]]:
    """The teacher's document panel: the shareable items grouped under headings, in document order."""

    def heading(item: dict[str, Any]) -> str:
        if item["id"].startswith("step-"):
            return "Steps"
        return {"summary": "Summary", "item": view.task.items_label}.get(item["kind"], "Picture")

    return [(name, list(group)) for name, group in itertools.groupby(view.items, key=heading)]


def turn_json(view: TurnView, assignment: Assignment, hit: Hit) -> dict[str, Any]:
    """What the turn page shows, for programs (the crowd simulator). Students never get the document."""
    form = view.protocol.form(view.turn.role)
    ctx = view.context
    task: dict[str, Any] = {"title": view.task.title, "image_url": view.task.image_url}
    if form.sees_document:
        task["items"] = view.items
    choices = {"shareable": list(ctx.shareable) if form.sees_document else [],
               "shared_so_far": list(ctx.shared_so_far)}
    return {
        "assignment_id": assignment.external_id,
        "status": assignment.status,
        "turn_id": view.turn.id,
        "conversation_id": view.conversation.id,
        "turn_index": view.turn.index,
        "role": view.turn.role,
        "lease_expires_at": hit.lease_expires_at.isoformat() if hit.lease_expires_at else None,
        "guidelines": list(form.guidelines),
        "task": task,
        "history": view.history,
        "questions": [
            {"name": q.name, "label": q.label, "kind": q.kind, "help": q.help,
             "required": q.required(ctx, {}),
             "options": choices[q.items] if q.kind == "multi_items" else [value for value, _ in q.options]}
            for q in form.questions_for(ctx)
        ],
        "shareable": choices["shareable"],
        "shared": choices["shared_so_far"],
    }


# ---- end-of-dialog questions ------------------------------------------------------------------------------


def _survey_page(view: surveys.SurveyView, worker: Worker, *, error: Optional[InvalidInput] = None,
                 chosen: Optional[dict[str, Any]] = None, stored_now: bool = False,
                 status: int = 200) -> Response:
    page = render_template("survey.html", survey=view, worker=worker, error=error, chosen=chosen or {},
                           stored_now=stored_now, hidden={"csrf_token": generate_csrf()},
                           text_chars=SURVEY_TEXT_CHARS)
    return worker_page_headers(make_response(page, status))


def _survey_json(view: surveys.SurveyView) -> dict[str, Any]:
    return {"conversation_id": view.conversation.id, "title": view.title, "role": view.role,
            "questions": [{"name": q.name, "label": q.label, "kind": q.kind,
                           "options": [value for value, _ in q.options]} for q in view.questions],
            "shown": view.shown, "answered": view.answered}


def survey_body() -> dict[str, Any]:
    """The answers: a JSON object, or the form's fields (a field sent twice stays a list, which the survey
    refuses naming it)."""
    if request.is_json:
        return json_object()
    return {name: values[0] if len(values) == 1 else values for name, values in request.form.lists()
            if name != "csrf_token"}


@bp.get("/survey/<int:conversation_id>")
def survey(conversation_id: int) -> Any:
    with session_scope(_settings().database_url) as session:
        worker = _current_worker(session)
        view = surveys.survey_for(session, conversation_id, worker)
    if wants_json():
        return jsonify(_survey_json(view))
    return _survey_page(view, worker)


@bp.post("/survey/<int:conversation_id>")
def answer_survey(conversation_id: int) -> Any:
    """All the answers in one POST, stored once (a second submit changes nothing)."""
    body = survey_body()
    try:
        with session_scope(_settings().database_url) as session:
            worker = _current_worker(session)
            stored = surveys.answer_survey(session, conversation_id, worker, body)
            worker_id = worker.id
    except InvalidInput as error:
        if wants_json():
            raise
        with session_scope(_settings().database_url) as session:
            worker = _current_worker(session)
            view = surveys.survey_for(session, conversation_id, worker)
        return _survey_page(view, worker, error=error, chosen=body, status=400)
    if stored:
        queue_survey_review(conversation_id, worker_id)
    if wants_json():
        return jsonify(stored=stored)
    with session_scope(_settings().database_url) as session:
        worker = _current_worker(session)
        view = surveys.survey_for(session, conversation_id, worker)
    return _survey_page(view, worker, stored_now=stored)
