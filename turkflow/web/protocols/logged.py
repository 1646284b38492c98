"""What the turn pages of the event-logged protocols (STAR, Frames and MEEP, ``turkflow.protocols.registry``) share: a
POST's fields, the turn the signed-in worker holds, the page's frame and the submit that closes the turn.

Each protocol's blueprint (``turkflow.web.protocols.star``, ``frames``, ``meep``) keeps what is its own: the role's
data, the in-turn actions and the templates, which extend ``logged_turn.html``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional

from flask import Blueprint, Response, jsonify, make_response, redirect, render_template, request, url_for
from flask_wtf.csrf import generate_csrf
from sqlmodel import Session

from turkflow import reports
from turkflow.protocols import registry, surveys
from turkflow.db import session_scope
from turkflow.errors import InvalidInput, NotFound, ServiceUnavailable
from turkflow.hits import lifecycle
from turkflow.models import Assignment, AssignmentStatus, DialogEvent, Hit, Turn, Worker
from turkflow.protocols.questions import Protocol
from turkflow.web.http import id_arg, json_object, retry_after, wants_json
from turkflow.web.worker import (
    _current_worker, _own_assignment, _settings, queue_next_turn, turn_json, worker_page_headers,
)


def logged_blueprint(protocol: Protocol) -> Blueprint:
    """The protocol's pages at ``/<name>`` (endpoints ``<name>.turn``, ``.action``, ``.submit``), with the
    worker pages' headers."""
    bp = Blueprint(protocol.name, __name__, url_prefix=f"/{protocol.name}")
    bp.after_request(worker_page_headers)
    return bp


def action_body() -> dict[str, Any]:
    """A JSON object, or the form's fields (``kb-<Field>`` fields make the query's or search's ``form``;
    ``options`` is a list; any other field sent twice stays a list, which the action refuses naming it).
    Every entry route to these pages reads its POSTs with it (the Prolific one pops its form token first)."""
    if request.is_json:
        return json_object()
    body: dict[str, Any] = {}
    form: dict[str, Any] = {}
    for name, values in request.form.lists():
        if name == "csrf_token":
            continue
        value = values if name == "options" or len(values) > 1 else values[0]
        if name.startswith("kb-"):
            form[name[3:]] = value
        else:
            body[name] = value
    if form:
        body["form"] = form
    return body


class Held(NamedTuple):
    worker: Worker
    assignment: Assignment
    hit: Hit
    turn: Turn


def held_turn(session: Session, protocol: Protocol, assignment_id: str) -> Held:
    """The signed-in worker's own assignment of one of ``protocol``'s turns (anybody else's is a 403)."""
    worker = _current_worker(session)
    assignment, hit, turn = _own_assignment(session, worker, assignment_id)
    if lifecycle.batch_of_hit(session, hit).protocol != protocol.name:
        raise NotFound(f"this turn is not part of a {registry.LOGGED[protocol.name].title} dialog")
    return Held(worker, assignment, hit, turn)


def render_turn(view: lifecycle.TurnView, data: dict[str, Any], pages: Mapping[str, str], *, submit_url: str,
                action_url: str, hidden: dict[str, str], lease_expires_at: Any = None,
                worker: Optional[Worker] = None, error: Optional[InvalidInput | ServiceUnavailable] = None,
                earned: Optional[int] = None, status: int = 200, **shown: Any) -> Response:
    """The role's turn page (``pages``: the template of each role), for any entry route that gives it where
    to post (``hidden`` adds the fields a provider's route needs, e.g. the CSRF token). The role's data is
    the template's variable named after the protocol (``star``, ``frames``, ``meep``); ``earned``, what the
    worker has earned in the batch's currency, is shown beside the turn's pay."""
    protocol = view.protocol
    page = render_template(pages[view.turn.role], view=view, form=protocol.form(view.turn.role),
                           submit_url=submit_url, action_url=action_url, hidden=hidden,
                           lease_expires_at=lease_expires_at, worker=worker, error=error, earned=earned,
                           max_chars=protocol.max_response_chars, **{protocol.name: data}, **shown)
    return worker_page_headers(make_response(page, status))


def show_turn(session: Session, held: Held, data: dict[str, Any], pages: Mapping[str, str], *,
              status: int = 200, **shown: Any) -> Response:
    """The held turn's page from the protocol's own routes: JSON with the role's data, the page while the
    turn is open, else back to the queue (it is submitted)."""
    view = lifecycle.turn_view(session, held.turn)
    name = view.protocol.name
    if wants_json():
        return jsonify({**turn_json(view, held.assignment, held.hit), name: data})
    if held.assignment.status != AssignmentStatus.accepted:  # already submitted: back to the queue
        return redirect(url_for("worker.queue", submitted=held.turn.id), 303)
    assignment_id = held.assignment.external_id
    return render_turn(view, data, pages, submit_url=url_for(f"{name}.submit", assignment_id=assignment_id),
                       action_url=url_for(f"{name}.action", assignment_id=assignment_id),
                       hidden={"csrf_token": generate_csrf()}, lease_expires_at=held.hit.lease_expires_at,
                       worker=held.worker, earned=reports.earned_cents(session, held.worker.id, view.batch.currency),
                       status=status, **shown)


def older_arg() -> int:
    """The page of a wizard's log a GET asks for (``?older=N``: from the N-th newest entry; Frames' searches,
    STAR's queries), on every entry route; 0, the newest, for anything else."""
    return (id_arg("older") or 0) if request.method == "GET" else 0


class Entry(NamedTuple):
    """How an entry route other than the protocol's own pages (Prolific's study link) shows a turn page of
    the protocol and takes its in-turn actions: the role's ``templates``, the role's ``data`` (given what a
    refused POST sent, to show it again), ``act`` (one in-turn action from a POST's fields, ``action``
    among them), the template variables that show again what a refused POST sent (``shown``), and the
    page's own headers (MEEP's map policy)."""

    templates: Mapping[str, str]
    data: Callable[[Session, Turn, Worker, dict[str, Any]], dict[str, Any]]
    act: Callable[[Session, Turn, Worker, dict[str, Any]], list[DialogEvent]]
    shown: Callable[[dict[str, Any]], dict[str, Any]]
    headers: Callable[[Response], Response] = lambda response: response


class Acted(NamedTuple):
    """What a protocol's action did in the held turn: the events it wrote, the role's data to send back to a
    JSON client and the turn page's query arguments to show a form's sender."""

    written: list[DialogEvent]
    data: dict[str, Any]
    page_args: dict[str, str]


Act = Callable[[Session, Held, dict[str, Any]], Acted]


ShownAgain = Callable[[str, "InvalidInput | ServiceUnavailable", dict[str, Any]], Response]


def take_action(protocol: Protocol, assignment_id: str, act: Act, shown_again: ShownAgain, anchor: str) -> Any:
    """One action inside the held turn (``act``). JSON clients get what it logged and the role's data;
    forms see the page again at ``anchor``, or ``shown_again`` after a refusal, which stores nothing."""
    body = action_body()
    try:
        with session_scope(_settings().database_url) as session:
            held = held_turn(session, protocol, assignment_id)
            registry.check_room(session, held.turn, held.worker, _settings().max_actions(protocol.name))
            written, data, args = act(session, held, body)
            logged = [{"action": e.action, "agent": e.agent, **e.data} for e in written]
    except (InvalidInput, ServiceUnavailable) as error:
        if wants_json():
            raise
        return again(shown_again, assignment_id, error, body)
    if wants_json():
        return jsonify(logged=logged, **data)
    return redirect(url_for(f"{protocol.name}.turn", assignment_id=assignment_id, **args) + anchor, 303)


def again(shown_again: ShownAgain, assignment_id: str, error: InvalidInput | ServiceUnavailable,
          body: dict[str, Any]) -> Response:
    """The protocol's page again after a refused action or submit, with what the worker typed: a 400 naming
    the field, or a 503 with Retry-After when storage took nothing (sent again later, it is stored)."""
    page = shown_again(assignment_id, error, body)
    page.headers.update(retry_after(error))
    return page


def close_turn(protocol: Protocol, assignment_id: str, shown_again: ShownAgain) -> Any:
    """Close the held turn through its dialog module's ``submit_turn`` and queue the next one. The worker
    whose turn ends the dialog goes on to its questions. A refused submit stores nothing: JSON clients get
    the error, forms ``shown_again(assignment_id, error, body)``: the page with what they typed. A turn sent
    before is the same turn only with the same text: other text is a 409 naming what was stored."""
    body = action_body()
    try:
        with session_scope(_settings().database_url) as session:
            worker = held_turn(session, protocol, assignment_id).worker
            submission = registry.parts(protocol.name).submit_turn(session, assignment_id, worker, body)
            turn_id, created = submission.turn.id, submission.created
            conversation_id, text = submission.turn.conversation_id, submission.turn.text
            # a role without end-of-dialog questions (MEEP's: the user's verdict is their last turn, unless an
            # agent played the other role) goes back to the queue
            ended = (lifecycle.ends_conversation(session, submission.turn)
                     and surveys.asks(session, protocol, conversation_id, submission.turn.role))
    except (InvalidInput, ServiceUnavailable) as error:  # rolled back: nothing of this submission is stored
        if wants_json():
            raise
        return again(shown_again, assignment_id, error, body)
    if created:
        queue_next_turn(turn_id, worker)
    survey_url = url_for("worker.survey", conversation_id=conversation_id) if ended else None
    if wants_json():
        return jsonify(turn_id=turn_id, created=created, text=text, survey_url=survey_url)
    return redirect(survey_url or url_for("worker.queue", submitted=turn_id), 303)
