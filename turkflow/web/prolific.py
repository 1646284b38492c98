"""The Prolific entry to the turn page, ``/prolific/turn``, to a role's onboarding quiz,
``/prolific/onboarding``, and Prolific's webhook, ``/prolific/webhook``.

A study's URL is ``/prolific/turn?b=<batch>&r=<role>`` with Prolific's ``PROLIFIC_PID``, ``STUDY_ID`` and
``SESSION_ID`` added. A new submission is checked with Prolific before anything is stored; it then takes
the next waiting turn of the study's role, and the page carries a token signed for that participant and
submission (no cookie is needed). The answers go through ``lifecycle.submit_turn`` and the same Celery
task as every other turn, and the participant is sent back to Prolific with the study's completion code.
The steps are ``turkflow.hits.prolific.pages``; the page is the worker blueprint's ``render_turn``.
Programs (the crowd simulator's participants) asking for JSON get the turn as ``turn_json`` with the
form's token, and a refused answer as JSON naming its field, as on the worker pages.

An onboarding study's URL is ``/prolific/onboarding?r=<role>`` with the same three ids: the role's quiz
(the one local workers take), graded once, then back to Prolific with the passing code, whose action adds
the participant to the group the role's turn studies admit, or the failing one, which does not.

STAR, Frames and MEEP batches use the same link. Their turn page is the protocol's own
(``turkflow.web.protocols.star.render_star_turn``; Frames' and MEEP's through their ``ENTRY``), whose
in-turn actions (a query, a search or a booking, a click) post to ``/prolific/turn/action`` with the link's
ids and the page's token (checked as a submit's; Prolific is asked about the submission when the page is
opened and when the turn is submitted, not on every action, whose holder the dialog module checks anyway). A STAR role qualifies in stages:
``/prolific/onboarding?r=<role>&s=<stage>`` is the stage's tutorial and quiz (``/start`` opens the one
attempt, ``/hint`` records a hint on the server, the POST grades it once).

End-of-dialog questions (``/prolific/survey?...&c=<dialog>``): a Prolific participant has no queue to come
back to, so the participant whose turn ends the dialog answers its questions in the same submission,
before the completion URL (the dialog is on their screen). The last participant of the other role has
already gone back to Prolific when the dialog ends; they are asked when they next arrive at a turn study
of ours (any protocol's: a Wizard of Tasks student owes the evaluation of an agent teacher), after a turn is held
for them (answering never costs them the turn), about one dialog per arrival (the newest they owe), with its
messages shown, and then go on to their turn. One who never comes back is never asked. Answers are stored once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Optional

from urllib.parse import urlencode, urlsplit

from flask import Blueprint, Response, current_app, g, jsonify, redirect, render_template, request, url_for
from sqlmodel import Session, col, select

from turkflow import reports
from turkflow.access import Access
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import Forbidden, InvalidAnswer, InvalidInput, NotFound
from turkflow.protocols.star import dialog as star_dialog
from turkflow.protocols import surveys
from turkflow.hits import keep as keeping, lifecycle, onboarding
from turkflow.protocols.star import stages
from turkflow.hits import money
from turkflow.hits.prolific import api, pages, places, studies, sync
from turkflow.models import (Assignment, AssignmentStatus, Batch, Hit, PlaceStatus, ProlificPlace, Turn, TurnStatus,
                             Worker, WorkerStatus, utcnow)
from turkflow.protocols import registry
from turkflow.protocols.questions import STAR, SURVEY_TEXT_CHARS, get_protocol
from turkflow.quality import gold, reliability
from turkflow.web.http import id_arg, wants_json
from turkflow.web.protocols import frames as frames_pages, meep as meep_pages
from turkflow.web.protocols.logged import Entry, action_body, render_turn as render_logged_turn
from turkflow.web.protocols.star import render_star_turn, star_turn_data
from turkflow.web.worker import (
    CONTENT_SECURITY_POLICY as WORKER_POLICY, queue_next_turn, queue_survey_review, render_turn, turn_json,
    worker_page_headers,
)

bp = Blueprint("prolific", __name__, url_prefix="/prolific")
log = logging.getLogger("turkflow.web.prolific")

FORM_TOKEN = "turkflow_form"
WEBHOOK_MAX_AGE = 300  # seconds a signed webhook is accepted for, and a seen event id remembered (twice that)
LINK_ARGS = ("b", "r", "PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
MAX_DRAFT = 500


# The worker pages' policy, but a finished turn's form is answered with a redirect to Prolific's completion
# page, and browsers hold a form's redirects to form-action too: without Prolific's site there, the participant
# would be stopped on our page with their turn stored and no way back to Prolific.
CONTENT_SECURITY_POLICY = WORKER_POLICY.replace(
    "form-action 'self'", "form-action 'self' " + "{0.scheme}://{0.netloc}".format(urlsplit(api.COMPLETE_URL)))


@bp.after_request
def prolific_page_headers(response: Response) -> Response:
    """The worker pages' headers with Prolific's completion site, then those of the protocol page shown, if it
    has its own (MEEP's map)."""
    worker_page_headers(response).headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return g.get("page_headers", _unchanged)(response)


def _unchanged(response: Response) -> Response:
    return response


def _settings() -> Settings:
    return current_app.config["TURKFLOW_SETTINGS"]


def _provider() -> Any:
    return current_app.config["TURKFLOW_PROVIDERS"].get(pages.PROVIDER)


def _link() -> tuple[Any, str, str, str, str]:
    """The link's batch and role, and Prolific's participant, study and submission ids (checked)."""
    args = request.args
    participant_id, study_id = args.get("PROLIFIC_PID"), args.get("STUDY_ID")
    submission_id = args.get("SESSION_ID")
    pages.check_ids(participant_id, study_id, submission_id)
    return id_arg("b"), args.get("r", ""), participant_id, study_id, submission_id


@bp.get("/turn")
def turn() -> Any:
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    with session_scope(settings.database_url) as session:
        study = pages.study_of_link(session, batch_id, role, study_id)
        minutes = _provider().terms_of(session.get(Batch, batch_id)).session_minutes
    if minutes:
        return _place_turn(minutes)
    with session_scope(settings.database_url) as session:
        study = pages.study_of_link(session, batch_id, role, study_id)
        known = pages.assignment_of(session, study, submission_id, participant_id)
        done = known is not None and known.status in (AssignmentStatus.submitted, AssignmentStatus.approved)
        logged = _logged(session, batch_id)
        owed = _survey_owed(session, known, only_its_own=True) if done else None
    if owed is not None:  # the turn that ended the dialog is stored; its questions are not answered yet
        return redirect(_survey_url(owed), 303)
    if done:
        return _back_to_prolific(batch_id, role)
    _provider().check_submission(study_id, submission_id, participant_id)
    with session_scope(settings.database_url) as session:
        assignment = pages.assignment_of(session, study, submission_id, participant_id)
        taken = assignment is None
        if taken:
            batch = session.get(Batch, batch_id)  # its terms, as launched, whatever this process's settings
            worker = pages.participant(session, participant_id, role, _provider().vouched_by_group(batch, role))
            assignment = pages.take_next_turn(session, worker, batch_id, role, submission_id,
                                              _provider().terms_of(batch).maximum_minutes * 60)
            keeping.seen(session, worker, utcnow(), settings.prolific_presence_seconds)
        if assignment is None:
            return _please_return("No turn is waiting for you right now",
                                  f"Every {role} turn of this study has just been taken by someone else.")
        if assignment.status != AssignmentStatus.accepted:
            return _please_return("This turn is no longer yours", "Your time on it ran out, or the "
                                  "submission was returned, and the turn went to someone else.")
        owed, page = _turn_page(session, assignment, participant_id, logged)
    if taken:
        _after_taking(batch_id, role, assignment.worker_id)
    if owed is not None:  # the turn is held for them meanwhile
        return redirect(_survey_url(owed), 303)
    return page


def _turn_page(session: Session, assignment: Assignment, participant_id: str,
               logged: Optional[str]) -> tuple[Optional[int], Optional[Response]]:
    """The held turn's page (or its JSON), unless the participant owes a dialog's questions first: then that
    dialog."""
    token = pages.page_token(_settings().secret_key, assignment, participant_id)
    owed = _survey_owed(session, assignment)
    if owed is not None:
        return owed, None
    if logged == STAR.name:
        return None, _star_page(session, assignment, token, draft=request.args.get("draft", "")[:MAX_DRAFT])
    if logged:
        return None, _logged_page(session, assignment, token, logged)
    view = _turn_view(session, assignment)
    if wants_json():
        return None, jsonify({**turn_json(view, assignment, session.get(Hit, assignment.hit_id)), FORM_TOKEN: token,
                                **_place_json()})
    return None, render_turn(view, form_action=request.full_path, hidden={FORM_TOKEN: token},
                             earned=reports.earned_cents(session, assignment.worker_id, view.batch.currency))


# ---- a place that lasts a session (``turkflow.hits.prolific.places``) -----------------------------------------


def _place_turn(minutes: int) -> Any:
    """A session place's page: the turn it holds, else the next (one kept for the participant first), else the
    waiting screen, or once the session is over the completion code. The place opens the first time its link
    is followed, once Prolific confirms the submission; every request marks the participant present (the
    waiting screen asks every few seconds)."""
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    with session_scope(settings.database_url) as session:
        study = pages.study_of_link(session, batch_id, role, study_id)
        known = pages.place_of_link(session, study, submission_id, participant_id)
    if known is None:
        _provider().check_submission(study_id, submission_id, participant_id)
    now, taken = utcnow(), False
    with session_scope(settings.database_url) as session:
        if known is None:
            batch = session.get(Batch, batch_id)  # its terms, as launched, whatever this process's settings
            worker = pages.participant(session, participant_id, role, _provider().vouched_by_group(batch, role))
            place = places.open_place(session, worker, batch_id, role, study_id, submission_id, minutes, now)
        else:
            place = session.get(ProlificPlace, known.id)
            worker = session.get(Worker, place.worker_id)
        if place.status != PlaceStatus.open:
            return _place_ended(session, place, participant_id)
        keeping.seen(session, worker, now, settings.presence_seconds)
        assignment = places.held(session, place)
        if assignment is None and worker.status != WorkerStatus.active:  # blocked meanwhile: no more turns
            places.finish(session, place, "blocked", now)
            return _place_ended(session, place, participant_id)
        if assignment is None:
            owed = _survey_owed(session, places.latest(session, place))
            if owed is not None:  # the dialog their last turn ended has questions for them
                return redirect(_survey_url(owed), 303)
            terms = _provider().terms_of(session.get(Batch, batch_id))
            if places.time_up(place, now, terms.estimated_minutes):
                places.finish(session, place, "time up", now)
                return _place_ended(session, place, participant_id)
            lease = terms.maximum_minutes * 60
            assignment = pages.take_next_turn(session, worker, batch_id, role, submission_id, lease, now,
                                              place=place)
            taken = assignment is not None
            if assignment is None and not places.work_left(session, batch_id, role):
                places.finish(session, place, "no work left", now)
                return _place_ended(session, place, participant_id)
        if assignment is None:
            return _place_waiting(session, place, participant_id, now)
        g.place_bar = {"ends_at": place.ends_at, **_place_exits(place, participant_id, now)}
        owed, page = _turn_page(session, assignment, participant_id, _logged(session, batch_id))
    if taken:
        _after_taking(batch_id, role, assignment.worker_id)
    if owed is not None:
        return redirect(_survey_url(owed), 303)
    return page


ENDED_BECAUSE = {"time up": "Your session's time is up.", "done": "You ended your session.",
                 "no work left": "Every turn of this study is written: there is no work left for you.",
                 "blocked": "You can no longer take turns in this study."}


def _place_pay(session: Session, place: ProlificPlace) -> str:
    """What the participant earns, honestly: the session's pay, approved on Prolific, and the quality bonus."""
    batch = session.get(Batch, place.batch_id)
    return (f"The session pays {money.shown(batch.reward_cents, batch.currency)} once you finish it on Prolific, "
            "however many turns were offered to you; a turn the next participants rate well may earn a bonus "
            "on top.")


def _place_ended(session: Session, place: ProlificPlace, participant_id: str) -> Response:
    """The session is over: the completion code (finished or paid), or, once Prolific ended it, why."""
    if place.status == PlaceStatus.left:
        return _please_return("Your session has ended on Prolific", "Your submission was returned or timed out "
                              "on Prolific; the turns you wrote in it are kept and paid.")
    code = _provider().completion_code(place.batch_id, place.role)
    written = places.written(session, place)
    reason = ENDED_BECAUSE.get(place.end_reason or "", "Your session has ended.")
    if wants_json():
        return jsonify(waiting=False, ended=True, reason=place.end_reason, turns_written=written,
                       completion_code=code, completion_url=api.completion_url(code))
    page = render_template("prolific_place.html", ended=True, reason=reason, written=written, code=code,
                           completion_url=api.completion_url(code), pay=_place_pay(session, place))
    return worker_page_headers(Response(page, 200))


def _place_waiting(session: Session, place: ProlificPlace, participant_id: str, now: Any) -> Response:
    """No turn waits for the participant now: the waiting screen, which asks again every few seconds."""
    exits = _place_exits(place, participant_id, now)
    if wants_json():
        return jsonify(waiting=True, ended=False, ask_every_seconds=places.ASK_EVERY,
                       turns_written=places.written(session, place), **exits)
    page = render_template("prolific_place.html", ended=False, role=place.role, ends_at=place.ends_at,
                           every=places.ASK_EVERY, token=exits[FORM_TOKEN], turn_url=_turn_url(),
                           done_url=exits["done_url"], left_url=exits["left_url"], pay=_place_pay(session, place))
    return worker_page_headers(Response(page, 200))


def _place_exits(place: ProlificPlace, participant_id: str, now: Any) -> dict[str, Any]:
    """What every page of a session place gives its client, the waiting screen's and each turn's alike: the
    session's time left, where to say "I am done" or "I left" (the ``pagehide`` beacon), and the place's form
    token those posts carry."""
    return {"session_seconds_left": places.seconds_left(place, now), "done_url": _place_url("prolific.place_done"),
            "left_url": _place_url("prolific.place_left"),
            FORM_TOKEN: pages.place_token(_settings().secret_key, place, participant_id)}


def _place_json() -> dict[str, Any]:
    """A session place's exits for its turn page's JSON (``place``; none on a one-turn place's)."""
    bar = g.get("place_bar")
    return {"place": {key: value for key, value in bar.items() if key != "ends_at"}} if bar else {}


def _place_url(endpoint: str) -> str:
    return f"{url_for(endpoint)}?{_link_args()}"


def _posted_place(session: Session) -> tuple[ProlificPlace, str]:
    """The link's session place, for a POST carrying its waiting screen's token."""
    batch_id, role, participant_id, study_id, submission_id = _link()
    study = pages.study_of_link(session, batch_id, role, study_id)
    place = pages.place_of_link(session, study, submission_id, participant_id)
    if place is None:
        raise Forbidden("this submission has no session here; open the study again from Prolific")
    body = action_body()
    pages.check_place_token(_settings().secret_key, _token(body), place, participant_id)
    return place, participant_id


@bp.post("/place/done")
def place_done() -> Any:
    """The participant ends their session (a turn they hold goes back to the pool): then the completion code.
    A second click finds it ended and shows the code again."""
    settings = _settings()
    with session_scope(settings.database_url) as session:
        place, participant_id = _posted_place(session)
        places.finish(session, place, "done", utcnow())
    if wants_json():
        with session_scope(settings.database_url) as session:
            return _place_ended(session, session.get(ProlificPlace, place.id), participant_id)
    return redirect(_turn_url(), 303)


@bp.post("/place/left")
def place_left() -> Any:
    """The waiting screen was closed (its ``pagehide`` beacon): present no longer, so the turns kept for the
    participant go to anyone at once; their place stays open until its time is up or Prolific ends it (they
    may come back to it)."""
    settings = _settings()
    with session_scope(settings.database_url) as session:
        place, _ = _posted_place(session)
        keeping.left(session, place.worker_id, utcnow())
    return "", 204


def _after_taking(batch_id: int, role: str, worker_id: int) -> None:
    """The study's places follow its waiting turns and the participant joins their role's group, off the
    request. A broker outage only delays the first (the poller does it too); the second is a convenience
    for the participant, since this page refuses the other role's turns anyway."""
    from turkflow.workers import prolific_tasks

    try:
        prolific_tasks.turn_taken.delay(batch_id, role, worker_id)
    except Exception as exc:  # noqa: BLE001 - any broker failure is repaired by the poller
        log.warning("batch %s %s study not brought in step now (%s); the poller will", batch_id, role, exc)


@bp.post("/turn")
def submit() -> Any:
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    with session_scope(settings.database_url) as session:
        logged = _logged(session, batch_id)
    if logged:
        return _submit_logged(logged)
    raw = request.form.to_dict(flat=False)
    token = (raw.pop(FORM_TOKEN, None) or [""])[0]
    with session_scope(settings.database_url) as session:
        study = pages.study_of_link(session, batch_id, role, study_id)
        assignment = pages.assignment_of(session, study, submission_id, participant_id)
        if assignment is None:
            raise Forbidden("this submission holds no turn here; open the study again from Prolific")
        pages.check_page_token(settings.secret_key, token, assignment, participant_id)
        pending = assignment.status == AssignmentStatus.accepted
    if pending:
        _provider().check_submission(study_id, submission_id, participant_id)
    try:
        with session_scope(settings.database_url) as session:
            worker = session.get(Worker, assignment.worker_id)
            submission = lifecycle.submit_turn(session, assignment.external_id, worker, raw)
            _seen_after_turn(session, worker, assignment)
            turn_id, created = submission.turn.id, submission.created
            conversation_id = submission.turn.conversation_id
            asked = (lifecycle.ends_conversation(session, submission.turn) and surveys.asks(
                session, get_protocol(session.get(Batch, batch_id).protocol), conversation_id, role))
    except InvalidAnswer as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            return jsonify(error=str(error), field=error.field), 400
        with session_scope(settings.database_url) as session:
            view = _turn_view(session, assignment)
            earned = reports.earned_cents(session, assignment.worker_id, view.batch.currency)
        return render_turn(view, form_action=request.full_path, errors={error.field: error.reason},
                           answers=raw, hidden={FORM_TOKEN: token}, earned=earned, status=400)
    if created:
        queue_next_turn(turn_id, worker)
    if asked:  # the turn ended a dialog with questions for this role (an agent's evaluation)
        return redirect(_survey_url(conversation_id), 303)
    return _back_to_prolific(batch_id, role)


# ---- the pages of STAR, Frames and MEEP ---------------------------------------------------------------------

ENTRIES: dict[str, Entry] = {"frames": frames_pages.ENTRY, "meep": meep_pages.ENTRY}  # STAR's has its own


def _logged(session: Session, batch_id: Any) -> Optional[str]:
    """The batch's protocol when its dialog is an event log written from its own pages (STAR, Frames, MEEP)."""
    batch = session.get(Batch, batch_id) if isinstance(batch_id, int) else None
    return batch.protocol if batch is not None and registry.logged(batch.protocol) else None


def _link_args(**more: Any) -> str:
    return urlencode({**{name: request.args.get(name, "") for name in LINK_ARGS}, **more})


def _turn_url(**more: Any) -> str:
    return f"{url_for('prolific.turn')}?{_link_args(**more)}"


def _survey_url(conversation_id: int) -> str:
    return f"{url_for('prolific.survey')}?{_link_args(c=conversation_id)}"


def _star_page(session: Session, assignment: Assignment, token: str, *, draft: str = "",
               error: Optional[InvalidInput] = None, status: int = 200) -> Response:
    """STAR's turn page (or its JSON) for the participant holding ``assignment``; its forms post back here
    with the link's ids and the token."""
    hit = session.get(Hit, assignment.hit_id)
    turn = session.get(Turn, hit.turn_id)
    worker = session.get(Worker, assignment.worker_id)
    if assignment.status == AssignmentStatus.accepted and turn.role == "user":
        star_dialog.give_nudges(session, turn)  # once each, before the user writes
    view = lifecycle.turn_view(session, turn)
    data = star_turn_data(session, turn, worker, draft)
    if wants_json():
        return jsonify({**turn_json(view, assignment, hit), "star": data, FORM_TOKEN: token, **_place_json()})
    return render_star_turn(view, data, submit_url=_turn_url(), action_url=f"{url_for('prolific.action')}?"
                            f"{_link_args()}", hidden={FORM_TOKEN: token}, lease_expires_at=hit.lease_expires_at,
                            earned=reports.earned_cents(session, worker.id, view.batch.currency), error=error,
                            draft=draft, status=status)


def _logged_page(session: Session, assignment: Assignment, token: str, protocol: str, *,
                 sent: Optional[dict[str, Any]] = None, error: Optional[InvalidInput] = None,
                 status: int = 200) -> Response:
    """Frames' or MEEP's turn page (or its JSON) for the participant holding ``assignment``, showing again
    what a refused POST ``sent``; its forms post back here with the link's ids and the token."""
    entry, hit = ENTRIES[protocol], session.get(Hit, assignment.hit_id)
    turn = session.get(Turn, hit.turn_id)
    view = lifecycle.turn_view(session, turn)
    data = entry.data(session, turn, session.get(Worker, assignment.worker_id), sent or {})
    if wants_json():
        return jsonify({**turn_json(view, assignment, hit), protocol: data, FORM_TOKEN: token, **_place_json()})
    g.page_headers = entry.headers
    return render_logged_turn(view, data, entry.templates, submit_url=_turn_url(),
                              action_url=f"{url_for('prolific.action')}?{_link_args()}", hidden={FORM_TOKEN: token},
                              lease_expires_at=hit.lease_expires_at, error=error, status=status,
                              earned=reports.earned_cents(session, assignment.worker_id, view.batch.currency),
                              **entry.shown(sent or {}))


def _shown_again(session: Session, token: str, error: InvalidInput, body: dict[str, Any]) -> Response:
    """The held turn's page again after a refused action or submit (nothing of it stored), with what was
    typed."""
    assignment = _held(session, token)
    protocol = session.get(Batch, id_arg("b")).protocol
    if protocol == STAR.name:
        return _star_page(session, assignment, token, error=error, draft=_typed(body), status=400)
    return _logged_page(session, assignment, token, protocol, sent=body, error=error, status=400)


def _held(session: Session, token: str, logged_only: bool = True) -> Assignment:
    """The assignment the link's submission holds, for a POST carrying the page's token (anyone else's, or
    a forged token, is a 403 before anything is stored); in a STAR, Frames or MEEP batch unless not
    ``logged_only`` (the end-of-dialog questions: any protocol's, where an agent played)."""
    batch_id, role, participant_id, study_id, submission_id = _link()
    study = pages.study_of_link(session, batch_id, role, study_id)
    assignment = pages.assignment_of(session, study, submission_id, participant_id)
    if assignment is None:
        raise Forbidden("this submission holds no turn here; open the study again from Prolific")
    pages.check_page_token(_settings().secret_key, token, assignment, participant_id)
    if logged_only and _logged(session, batch_id) is None:
        raise NotFound("this study's turns are not part of a STAR, Frames or MEEP dialog")
    return assignment


def _token(body: dict[str, Any]) -> str:
    token = body.pop(FORM_TOKEN, "")
    return token if isinstance(token, str) else ""


def _typed(body: dict[str, Any]) -> str:
    text = body.get("text")
    return text[:MAX_DRAFT] if isinstance(text, str) else ""


@bp.post("/turn/action")
def action() -> Any:
    """One action inside a turn, as on the protocol's own pages (STAR: a query, a task tab, asking for
    suggestions; Frames: a search or a booking; MEEP: a click): JSON clients get what it logged and the
    role's data again; forms see the page again."""
    settings = _settings()
    body = action_body()
    token = _token(body)
    draft = ""
    try:
        with session_scope(settings.database_url) as session:
            assignment = _held(session, token)
            turn = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)
            worker = session.get(Worker, assignment.worker_id)
            protocol = session.get(Batch, id_arg("b")).protocol
            registry.check_room(session, turn, worker, settings.max_actions(protocol))
            if protocol == STAR.name:
                name = body.get("action")
                written = star_dialog.take_action(session, turn, worker, name,
                                                  {k: v for k, v in body.items() if k != "action"})
                draft = written[0].data.get("Text", "") if name == "request_suggestions" else ""
                data = star_turn_data(session, turn, worker, draft) if turn.role == "wizard" else {}
            else:
                written = ENTRIES[protocol].act(session, turn, worker, body)
                data = ENTRIES[protocol].data(session, turn, worker, {})
            logged = [{"action": e.action, "agent": e.agent, **e.data} for e in written]
    except InvalidInput as error:  # rolled back: nothing of this action is stored
        if wants_json():
            raise
        with session_scope(settings.database_url) as session:
            return _shown_again(session, token, error, body)
    if wants_json():
        return jsonify(logged=logged, **data)
    more = {"draft": draft[:MAX_DRAFT]} if draft else {}
    return redirect(_turn_url(**more) + ("#suggestions" if protocol == STAR.name else ""), 303)


def _submit_logged(protocol: str) -> Any:
    """Close a STAR, Frames or MEEP turn (its dialog module's ``submit_turn``); the participant whose turn ends
    a dialog with questions for their role goes on to them, everyone else back to Prolific."""
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    body = action_body()
    token = _token(body)
    with session_scope(settings.database_url) as session:
        assignment = _held(session, token)
        pending = assignment.status == AssignmentStatus.accepted
    if pending:
        _provider().check_submission(study_id, submission_id, participant_id)
    try:
        with session_scope(settings.database_url) as session:
            worker = session.get(Worker, assignment.worker_id)
            submission = registry.parts(protocol).submit_turn(session, assignment.external_id, worker, body)
            _seen_after_turn(session, worker, assignment)
            turn_id, created, text = submission.turn.id, submission.created, submission.turn.text
            conversation_id = submission.turn.conversation_id
            asked = (lifecycle.ends_conversation(session, submission.turn)
                     and surveys.asks(session, get_protocol(protocol), conversation_id, role))
    except InvalidInput as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            raise
        with session_scope(settings.database_url) as session:
            return _shown_again(session, token, error, body)
    if created:
        queue_next_turn(turn_id, worker)
    survey_url = _survey_url(conversation_id) if asked else None
    if wants_json() and assignment.place_id is not None:  # on to the session's next turn
        return jsonify(turn_id=turn_id, created=created, text=text, survey_url=survey_url, next_url=_turn_url(),
                       completion_url=None)
    if wants_json():  # as the queue's answer (what was stored), and where to go next
        return jsonify(turn_id=turn_id, created=created, text=text, survey_url=survey_url,
                       completion_url=api.completion_url(_provider().completion_code(batch_id, role)))
    return redirect(survey_url, 303) if survey_url else _back_to_prolific(batch_id, role)


def _survey_owed(session: Session, assignment: Optional[Assignment], only_its_own: bool = False
                 ) -> Optional[int]:
    """The dialog whose questions the assignment's participant answers now: the one its (submitted) turn
    ended, or (``only_its_own`` false) the newest they owe."""
    if assignment is None:
        return None
    worker = session.get(Worker, assignment.worker_id)
    due = [d["conversation_id"] for d in surveys.surveys_due(session, worker)]
    if only_its_own:
        own = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id).conversation_id
        return own if own in due else None
    return due[0] if due else None


def _survey_view(session: Session, token: Optional[str]) -> tuple[Assignment, Worker, surveys.SurveyView]:
    """The link's submission, its participant, and the questions they answer about dialog ``c`` (only the
    dialog's last participant of a role is asked; anyone else is refused)."""
    conversation_id = id_arg("c")
    if conversation_id is None:
        raise InvalidInput("expected the dialog's number", "c")
    if token is None:
        batch_id, role, participant_id, study_id, submission_id = _link()
        study = pages.study_of_link(session, batch_id, role, study_id)
        assignment = pages.assignment_of(session, study, submission_id, participant_id)
        if assignment is None:
            raise Forbidden("this submission holds no turn of a dialog here; open the study again from Prolific")
    else:
        assignment = _held(session, token, logged_only=False)
    worker = session.get(Worker, assignment.worker_id)
    return assignment, worker, surveys.survey_for(session, conversation_id, worker)


def _survey_page(session: Session, assignment: Assignment, view: surveys.SurveyView, token: str, *,
                 error: Optional[InvalidInput] = None, chosen: Optional[dict[str, Any]] = None,
                 status: int = 200) -> Response:
    history = [{"role": t.role, "text": t.text} for t in session.exec(
        select(Turn).where(Turn.conversation_id == view.conversation.id, Turn.status == TurnStatus.submitted)
        .order_by(col(Turn.index)))]
    before_turn = assignment.status == AssignmentStatus.accepted
    intro = (f"Before your turn: a dialog you wrote in as the {view.role} has ended. Please answer its "
             "questions once; your turn is kept for you meanwhile." if before_turn else
             "Your message ended the dialog. Please answer these questions; then you finish on Prolific.")
    page = render_template("survey.html", survey=view, worker=None, error=error, chosen=chosen or {},
                           stored_now=False, hidden={FORM_TOKEN: token}, history=history, intro=intro,
                           form_action=f"{url_for('prolific.survey')}?{_link_args(c=view.conversation.id)}",
                           text_chars=SURVEY_TEXT_CHARS)
    return worker_page_headers(Response(page, status))


def _after_survey(assignment: Assignment) -> Response:
    """On to the held turn, or back to Prolific once the submission's turn is stored."""
    if assignment.status == AssignmentStatus.accepted:
        return redirect(_turn_url(), 303)
    return _back_to_prolific(id_arg("b"), request.args.get("r", ""))


@bp.get("/survey")
def survey() -> Any:
    settings = _settings()
    batch_id, role, participant_id, study_id, submission_id = _link()
    with session_scope(settings.database_url) as session:
        assignment, _, view = _survey_view(session, None)
    if view.answered is not None:
        return _after_survey(assignment)
    _provider().check_submission(study_id, submission_id, participant_id)
    token = pages.page_token(settings.secret_key, assignment, participant_id)
    if wants_json():
        return jsonify({"conversation_id": view.conversation.id, "role": view.role, FORM_TOKEN: token,
                        "questions": [{"name": q.name, "label": q.label, "kind": q.kind,
                                       "options": [value for value, _ in q.options]} for q in view.questions]})
    with session_scope(settings.database_url) as session:
        return _survey_page(session, assignment, view, token)


@bp.post("/survey")
def answer() -> Any:
    """All the answers in one POST, stored once (a second send changes nothing), then on to the turn or
    back to Prolific."""
    settings = _settings()
    body = action_body()
    token = _token(body)
    try:
        with session_scope(settings.database_url) as session:
            assignment, worker, view = _survey_view(session, token)
            stored = surveys.answer_survey(session, view.conversation.id, worker, body)
            judged = (view.conversation.id, worker.id)
    except InvalidInput as error:
        if wants_json():
            raise
        with session_scope(settings.database_url) as session:
            assignment, _, view = _survey_view(session, token)
            return _survey_page(session, assignment, view, token, error=error, chosen=body, status=400)
    if stored:
        queue_survey_review(*judged)
    if wants_json():
        follow = _after_survey(assignment)
        return jsonify(stored=stored, next_url=follow.location)
    return _after_survey(assignment)


# ---- onboarding -----------------------------------------------------------------------------------------


@bp.get("/onboarding")
def onboarding_quiz() -> Any:
    """The role's onboarding quiz, reached from the role's onboarding study (``turkflow prolific
    onboarding``): the submission is checked with Prolific before the quiz is shown, as a turn's is. A
    STAR role's link names its stage: the stage's tutorial, then its quiz once started."""
    settings = _settings()
    role, stage, participant_id, study_id, submission_id = _onboarding_link()
    if stage is not None:
        return _stage_quiz(stage)
    with session_scope(settings.database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id)
        passed = pages.onboarding_outcome(session, participant_id, role)
    if passed is not None:
        return _onboarding_done(role, passed)
    _provider().check_submission(study_id, submission_id, participant_id)
    token = pages.onboarding_token(settings.secret_key, participant_id, submission_id, role)
    return render_template("onboarding.html", quiz=onboarding.quiz_for(role), answers={}, result=None,
                           form_action=request.full_path, hidden={FORM_TOKEN: token},
                           gold=gold.gold_for(role), gold_field=gold.field)


@bp.post("/onboarding")
def onboarding_grade() -> Any:
    """Graded once; the participant goes back to Prolific with the passing code (which adds them to the
    role's group) or the other one."""
    settings = _settings()
    role, stage, participant_id, study_id, submission_id = _onboarding_link()
    if stage is not None:
        return _stage_grade(stage)
    answers = {name: value for name, value in request.form.items() if name != FORM_TOKEN}
    pages.check_onboarding_token(settings.secret_key, request.form.get(FORM_TOKEN, ""), participant_id,
                                 submission_id, role)
    with session_scope(settings.database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id)
        passed = pages.onboarding_outcome(session, participant_id, role)
    if passed is None:
        rated = gold.answers_from(role, request.form)  # a bad answer is refused before anything is graded
        _provider().check_submission(study_id, submission_id, participant_id)
        with session_scope(settings.database_url) as session:
            passed, passed_now = pages.grade_onboarding(session, participant_id, role, answers,
                                                        settings.onboarding_pass_percent)
            if passed_now is not None and rated:  # the gold turns start their record as a rater, as locally
                gold.record_gold(session, passed_now, role, rated, reliability.Model.of(settings))
    return _onboarding_done(role, passed)


def _onboarding_link() -> tuple[str, Optional[stages.Stage], str, str, str]:
    """The quiz link's role and (STAR) stage, and Prolific's participant, study and submission ids
    (checked)."""
    role = request.args.get("r", "")
    roles = [*onboarding.QUIZZES, *stages.ROLES]
    if role not in roles:
        raise InvalidInput(f"expected one of {', '.join(roles)}, got {role[:40]!r}", "r")
    stage = None
    if stages.has_stages(role):
        try:
            stage = stages.stage_for(role, request.args.get("s", ""))
        except InvalidInput as bad:
            raise InvalidInput(bad.reason, "s") from None
    args = request.args
    participant_id, study_id = args.get("PROLIFIC_PID"), args.get("STUDY_ID")
    submission_id = args.get("SESSION_ID")
    pages.check_ids(participant_id, study_id, submission_id)
    return role, stage, participant_id, study_id, submission_id


def _onboarding_done(role: str, passed: bool, stage: int = stages.SINGLE_TASK) -> Response:
    return redirect(api.completion_url(_provider().onboarding_code(role, passed, stage)), 303)


# ---- STAR's stages --------------------------------------------------------------------------------------


def _stage_quiz(stage: stages.Stage, *, answers: Optional[dict[str, str]] = None,
                errors: Optional[dict[str, str]] = None, status: int = 200) -> Any:
    """The stage's tutorial and, once started, its quiz with the hints taken so far (or, graded already,
    back to Prolific with the grade's code)."""
    settings = _settings()
    role, _, participant_id, study_id, submission_id = _onboarding_link()
    with session_scope(settings.database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id, stage.number)
        passed = pages.stage_outcome(session, participant_id, stage)
    if passed is not None:
        return _onboarding_done(role, passed, stage.number)
    _provider().check_submission(study_id, submission_id, participant_id)
    token = pages.onboarding_token(settings.secret_key, participant_id, submission_id, role, stage.number)
    with session_scope(settings.database_url) as session:
        study = pages.onboarding_study_of_link(session, role, study_id, stage.number)
        worker = pages.stage_participant(session, participant_id, stage, _provider().onboarding_vouched(study))
        attempt = stages.open_attempt(session, worker, stage)
        view = stages.attempt_view(session, stage, attempt) if attempt is not None else None
        if wants_json():
            return jsonify(role=role, stage=stage.number, title=stage.title, tutorial=list(stage.tutorial),
                           attempt=attempt.id if attempt else None, hints=view.hints if view else {},
                           hints_left=view.hints_left if view else stage.max_hints, **{FORM_TOKEN: token},
                           questions=[{"name": q.name, "text": q.text, "options": [k for k, _ in q.options]}
                                      for q in stage.questions]), status
        query = request.query_string.decode()
        urls = {name: f"{url_for(endpoint)}?{query}" for name, endpoint in (
            ("start", "prolific.stage_start"), ("hint", "prolific.stage_hint"),
            ("grade", "prolific.onboarding_grade"))}
        page = render_template("onboarding_star.html", worker=None, stage=stage, view=view, passed=False,
                               answers=answers or {}, result=None, errors=errors or {}, urls=urls,
                               hidden={FORM_TOKEN: token})
    return worker_page_headers(Response(page, status))


def _stage_form(stage: stages.Stage) -> None:
    """A stage quiz's POST must carry the token of the quiz served for this participant, submission and
    stage, from this stage's study."""
    role, _, participant_id, study_id, submission_id = _onboarding_link()
    pages.check_onboarding_token(_settings().secret_key, request.form.get(FORM_TOKEN, ""), participant_id,
                                 submission_id, role, stage.number)


@bp.post("/onboarding/start")
def stage_start() -> Any:
    """Open the participant's one attempt at the stage (starting twice is one start)."""
    role, stage, participant_id, study_id, _ = _onboarding_link()
    if stage is None:
        raise NotFound("only STAR's stages have a start")
    _stage_form(stage)
    with session_scope(_settings().database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id, stage.number)
        if pages.stage_outcome(session, participant_id, stage) is not None:
            return redirect(f"{url_for('prolific.onboarding_quiz')}?{request.query_string.decode()}", 303)
        attempt = pages.start_stage(session, pages.known_participant(session, participant_id, stage), stage)
        attempt_id = attempt.id
    if wants_json():
        return jsonify(attempt=attempt_id, stage=stage.number)
    return redirect(f"{url_for('prolific.onboarding_quiz')}?{request.query_string.decode()}#quiz", 303)


@bp.post("/onboarding/hint")
def stage_hint() -> Any:
    """A hint, recorded on the server before its text is shown (the stage's budget counts it); the answers
    given so far stay on the page."""
    role, stage, participant_id, study_id, _ = _onboarding_link()
    if stage is None:
        raise NotFound("only STAR's stages have hints")
    _stage_form(stage)
    form = request.form
    with session_scope(_settings().database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id, stage.number)
        worker = pages.known_participant(session, participant_id, stage)
        hint = stages.request_hint(session, worker, stage, form.get("attempt"), form.get("hint"))
        left = stages.attempt_view(session, stage, stages.open_attempt(session, worker, stage)).hints_left
    if wants_json():
        return jsonify(question=form.get("hint"), hint=hint, hints_left=left)
    given = {name: value for name, value in form.items() if name not in (FORM_TOKEN, "attempt", "hint")}
    return _stage_quiz(stage, answers=given)


def _stage_grade(stage: stages.Stage) -> Any:
    """Graded once, counting the hints the server recorded; back to Prolific with the stage's passing
    code (its group) or the other one. A refused answer shows the quiz again and grades nothing."""
    settings = _settings()
    role, _, participant_id, study_id, submission_id = _onboarding_link()
    _stage_form(stage)
    raw = request.form.to_dict(flat=False)
    with session_scope(settings.database_url) as session:
        pages.onboarding_study_of_link(session, role, study_id, stage.number)
        passed = pages.stage_outcome(session, participant_id, stage)
    if passed is None:
        _provider().check_submission(study_id, submission_id, participant_id)
        try:
            with session_scope(settings.database_url) as session:
                worker = pages.known_participant(session, participant_id, stage)
                passed = stages.grade_attempt(session, worker, stage, request.form.get("attempt"), raw).passed
        except InvalidAnswer as error:  # rolled back: nothing was graded
            if wants_json():
                raise
            given = {name: values[0] for name, values in raw.items() if len(values) == 1}
            return _stage_quiz(stage, answers=given, errors={error.field: error.reason}, status=400)
    if wants_json():
        code = _provider().onboarding_code(role, passed, stage.number)
        return jsonify(passed=passed, stage=stage.number, completion_url=api.completion_url(code))
    return _onboarding_done(role, passed, stage.number)


def _please_return(headline: str, reason: str) -> Response:
    """A participant with no turn to write: Prolific counts a returned submission against nobody."""
    page = render_template("prolific_return.html", headline=headline, reason=reason)
    return worker_page_headers(Response(page, 409))


def _turn_view(session: Session, assignment: Assignment) -> lifecycle.TurnView:
    return lifecycle.turn_view(session, session.get(Turn, session.get(Hit, assignment.hit_id).turn_id))


def _back_to_prolific(batch_id: int, role: str) -> Response:
    """The turn is stored: the participant finishes the submission on Prolific with the study's code, or, in
    a session place, goes on to its next turn (or its end)."""
    with session_scope(_settings().database_url) as session:
        place = places.of_submission(session, request.args.get("SESSION_ID", ""))
    if place is not None:
        return redirect(_turn_url(), 303)
    return redirect(api.completion_url(_provider().completion_code(batch_id, role)), 303)


def _seen_after_turn(session: Session, worker: Worker, assignment: Assignment) -> None:
    """A participant who wrote a turn is present: in a session place, as long as a page they keep open says
    (the local queue's presence); on a one-turn place, for the time it takes to open the study again."""
    seconds = _settings().presence_seconds if assignment.place_id is not None else \
        _settings().prolific_presence_seconds
    keeping.seen(session, worker, utcnow(), seconds)


def _first_delivery(settings: Settings, event_id: Optional[str], signature: str) -> Optional[list[str]]:
    """This event's keys if it is new within the age a signature is accepted for (by Prolific's event id, and
    by its signature, which the event id is not part of), noted in Redis with that expiry; None if seen
    already. Without Redis the event goes through (applying a submission's status is idempotent)."""
    import redis

    keys = [f"turkflow:prolific:event:{event_id}"] if event_id else []
    keys.append("turkflow:prolific:signature:" + hashlib.sha256(signature.encode()).hexdigest())
    try:
        store = redis.Redis.from_url(settings.redis_url, socket_timeout=2)
        fresh = [bool(store.set(key, 1, nx=True, ex=2 * WEBHOOK_MAX_AGE)) for key in keys]
    except redis.RedisError as exc:
        log.warning("webhook replay check skipped, Redis unavailable: %s", exc)
        return []
    return keys if all(fresh) else None


def _forget_delivery(settings: Settings, keys: list[str]) -> None:
    """An event whose change failed is not a delivery: Prolific's redelivery (same event id) goes through."""
    import redis

    try:
        redis.Redis.from_url(settings.redis_url, socket_timeout=2).delete(*keys)
    except redis.RedisError:
        pass


@bp.post("/webhook")
def webhook() -> Any:
    """Prolific's ``submission.status.change`` events, signed with the workspace's webhook secret.

    An unsigned, wrongly signed or stale request is refused and changes nothing, and never makes us call
    Prolific (a subscription is confirmed by ``turkflow prolific webhook`` through the API, not here). An
    event seen already within the signature's age limit (its ``X-Event-ID``, or the same signed request
    again) is acknowledged and dropped; past it, ``sync.apply_status`` is idempotent anyway. Other events
    are acknowledged only.
    """
    settings = _settings()
    if not settings.prolific_webhook_secret:
        raise NotFound("Prolific webhooks are not set up here (TURKFLOW_PROLIFIC_WEBHOOK_SECRET)")
    body = request.get_data()
    try:
        api.verify_webhook(settings.prolific_webhook_secret, request.headers, body,
                           max_age_seconds=WEBHOOK_MAX_AGE)
    except api.InvalidSignature as exc:
        raise Forbidden(f"not signed by Prolific: {exc}") from None
    seen = _first_delivery(settings, request.headers.get(api.EVENT_ID_HEADER),
                           request.headers.get(api.SIGNATURE_HEADER))
    if seen is None:
        return jsonify(ignored="this event was delivered already")
    try:
        event = json.loads(body)
    except ValueError:
        raise InvalidInput("the body is not JSON", "body") from None
    if not isinstance(event, dict) or event.get("event_type") != "submission.status.change":
        return Response(status=204)
    submission_id, status = event.get("resource_id"), event.get("status")
    if not isinstance(submission_id, str) or not isinstance(status, str):
        raise InvalidInput("a submission event names its submission (resource_id) and status", "resource_id")
    try:
        with session_scope(settings.database_url) as session:
            sync.apply_status(session, submission_id, status, sync.ProlificRound())
    except Exception:
        if seen:
            _forget_delivery(settings, seen)
        raise
    return Response(status=204)


# ---- the dashboard's Prolific parts (``turkflow.web.admin`` serves them to signed-in requesters) ----------


def places_of(batch: Batch) -> str:
    """What the batch's places are and pay, for its page."""
    return places.described(batch.platform_terms.get("session_minutes") or 0, batch.reward_cents, batch.currency)


def studies_of(session: Session, batch_id: int) -> list[studies.StudyView]:
    """A Prolific batch's studies for its dashboard page: status, median time, warnings (our records only)."""
    return studies.study_views(session, session.get(Batch, batch_id))




def stuck_bonuses(settings: Settings, providers: Any, access: Access) -> list[sync.StuckBonus]:
    """The bonuses of batches ``access`` may see waiting for a person, with what Prolific shows for each
    submission (without a token: our records alone)."""
    return sync.stuck_bonuses(settings, providers.get("prolific") if settings.prolific_token else None,
                              access=access)


def decide_bonus(settings: Settings, providers: Any, bonus_id: int, decision: str, by: str) -> str:
    """A requester's decision about a stuck bonus: ``release`` (paid at once in a new bulk payment) or
    ``settle``; returns what to tell them."""
    from turkflow import pipeline
    from turkflow.errors import Conflict

    if not settings.prolific_token:
        raise InvalidInput("TURKFLOW_PROLIFIC_TOKEN is not set", "bonus")
    provider = providers.get("prolific")
    try:
        if decision == "release":
            sync.release_bonus(settings, provider, bonus_id, by)
            pipeline.pay_bonus(settings, providers, bonus_id)
            return f"Bonus {bonus_id} released by {by} and paid in a new bulk payment."
        sync.settle_bonus_by_hand(settings, provider, bonus_id, by)
        return f"Bonus {bonus_id} marked settled by {by}."
    except Conflict as exc:
        return f"Bonus {bonus_id}: nothing changed ({exc})."
