"""MEEP dialogs on the asynchronous pipeline: the requester's folder as tasks, scenarios, the click log, replay.

A MEEP dialog is its session log (``turkflow.protocols.meep``) written as ``DialogEvent`` rows, one function,
``record_action``, writing them while a worker holds a turn. The paid turns stay ``Turn`` rows:

- a *user* turn is one ``utter`` (free text), perhaps followed by ``complete`` (the user gives up);
- an *agent* turn (role ``wizard`` in the database, "agent" on its pages) is any number of ``call_api``,
  ``add_template`` (MEEP's "+") and ``pick_template`` clicks, closed by one ``send``: the paid turn's
  response is the sent text. Once the agent has called a ``drive`` API (``start_driving``) it calls no more;
- the user's turn after ``start_driving`` is the dialog's last: the destination on a map, approved or
  disapproved (``judge``, then ``complete``), MEEP's success label.

Templates are the batch's: the requester's ``templates.json`` and every template an agent of the batch
added, from then on (``batch_templates``).

Every click is checked by ``turkflow.protocols.meep.clicks`` against the log so far, rebuilt from the events
(``turkflow.protocols.meep.events``), so the log the pages write is the one ``turkflow replay`` executes
(``turkflow.protocols.meep.execute``). The knowledge base and the templates are the requester's files, read from the
folder the tasks were loaded from each time they change: replaying after a table row or a template
changed on disk names the click that now behaves differently.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.protocols.registry import (
    YES, ReplayDifference, Verified, close_logged_turn, conversation_pages, dialog_events, loggable, one,
    open_submit, own_events, task_of, submitted_before,
)
from turkflow.errors import Forbidden, InvalidDocument, InvalidInput, NotFound
from turkflow.dataset.export import ExportFilters
from turkflow.hits import lifecycle
from turkflow.protocols.files import cut, inside, read_json, shown
from turkflow.protocols import actions
from turkflow.protocols.meep import actions as meep_actions
from turkflow.protocols.meep import clicks
from turkflow.protocols.meep.events import EventShape, from_events, judged, record_events, start_event
from turkflow.protocols.meep.execute import execute
from turkflow.protocols.meep.kb import KnowledgeBase
from turkflow.protocols.meep.log import (
    ApiCall, FieldClick, Filler, Send, SessionLog, TemplateAdded, TemplatePick, UserMessage, WordClick,
)
from turkflow.protocols.meep.templates import load_templates, parts
from turkflow.protocols.meep.tokens import tokenize
from turkflow.models import (
    Assignment,
    AssignmentStatus,
    Conversation,
    DialogEvent,
    Hit,
    HitStatus,
    Task,
    Turn,
    TurnStatus,
    Worker,
)
from turkflow.protocols.questions import MEEP, clean_text

KEY_PREFIX = "meep:"
SCENARIOS = "scenarios.json"
AGENTS = {"user": "User", "wizard": "Agent"}  # a turn's role -> the events' agent
CLOSING = {"user": "utter", "wizard": "send"}  # the action that says the turn's text
_GOAL_ID = re.compile(r"[A-Za-z0-9_-]{1,60}")


# ---- the requester's files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Files:
    """A requester's MEEP folder as loaded: the knowledge base (``apis.json`` and its tables) and the
    utterance templates."""

    kb: KnowledgeBase
    templates: dict[str, str]


def _fingerprint(folder: Path) -> str:
    """What the folder's files hold now, so an edited row or template is read again (a modification time
    can stay the same within a clock tick)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=16)
def _loaded(folder: str, fingerprint: str) -> Files:
    return Files(KnowledgeBase.load(Path(folder)), load_templates(Path(folder) / "templates.json"))


def requester_files(folder: str | Path) -> Files:
    """The folder's knowledge base and templates as they are on disk now; a broken file is an
    ``InvalidDocument`` naming it."""
    path = Path(folder)
    if not path.is_dir():
        raise InvalidDocument(f"{path}: the MEEP folder is gone (apis.json, templates.json, {SCENARIOS})")
    return _loaded(str(path), _fingerprint(path))


def _read_scenarios(path: Path, kb: KnowledgeBase) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``scenarios.json``: ``goals`` (each an ``id``, the ``goal`` the user reads and a ``destination``,
    a row of ``table`` by its ``key``, ``place_id`` by default) and ``starts`` (start locations; the
    knowledge base's ``start`` when there are none)."""
    document = read_json(inside(path.parent, path.name, path.name, path.parent))
    if not isinstance(document, dict) or not isinstance(document.get("goals"), list) or not document["goals"]:
        raise InvalidDocument(f"{path}: expected an object with a non-empty list 'goals'")
    table = document.get("table", next(iter(kb.tables), None) if len(kb.tables) == 1 else None)
    if not isinstance(table, str) or table not in kb.tables:
        raise InvalidDocument(f"{path}: table must name one of the knowledge base's tables: "
                              f"{', '.join(kb.tables) or 'none'}")
    key = document.get("key", "place_id")
    if not isinstance(key, str):
        raise InvalidDocument(f"{path}: key: expected the name of a column of {shown(table)}")
    rows = {row.get(key): row for row in kb.tables[table] if isinstance(row.get(key), str)}
    starts = document.get("starts") or [kb.start]
    if not isinstance(starts, list) or not all(_is_point(s) for s in starts):
        raise InvalidDocument(f"{path}: starts must be a list of {{address, latitude, longitude}}")
    goals, seen = [], set()
    for n, goal in enumerate(document["goals"]):
        where = f"{path}: goals[{n}]"
        if not isinstance(goal, dict):
            raise InvalidDocument(f"{where}: expected an object")
        goal_id, text, destination = goal.get("id"), goal.get("goal"), goal.get("destination")
        if not isinstance(goal_id, str) or not _GOAL_ID.fullmatch(goal_id) or goal_id in seen:
            raise InvalidDocument(f"{where}.id: a new id of letters, digits, - and _ (at most 60)")
        if not isinstance(text, str) or not text.strip():
            raise InvalidDocument(f"{where}.goal: the goal the user reads, as text")
        if not isinstance(destination, str) or destination not in rows:
            raise InvalidDocument(f"{where}.destination: no row of {shown(table)} has {cut(key)} "
                                  f"{shown(destination)}")
        if not _is_point(rows[destination]):
            raise InvalidDocument(f"{where}.destination: row {shown(destination)} has no latitude and "
                                  "longitude")
        seen.add(goal_id)
        goals.append({"id": goal_id, "goal": text.strip(), "destination": dict(rows[destination])})
    return [dict(s) for s in starts], goals


def _is_point(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(value.get(k), (int, float)) and not isinstance(value.get(k), bool)
        for k in ("latitude", "longitude"))


def read_tasks(path: Path) -> list[Task]:
    """The requester's MEEP folder (``apis.json`` and its tables, ``templates.json``, ``scenarios.json``) as
    unsaved tasks, one per goal; everything is checked before anything is returned."""
    folder = Path(path).resolve()
    if not folder.is_dir():
        raise InvalidDocument(f"{path}: not a folder with apis.json, templates.json and {SCENARIOS}")
    files = requester_files(folder)
    starts, goals = _read_scenarios(folder / SCENARIOS, files.kb)
    domain = folder.name.split("_")[0] or "meep"
    return [Task(key=KEY_PREFIX + goal["id"], protocol=MEEP.name, title=goal["goal"], domain=domain,
                 star={"folder": str(folder), "goal": goal["goal"], "goal_id": goal["id"],
                       "destination": goal["destination"], "starts": starts})
            for goal in goals]


# ---- scenarios ------------------------------------------------------------------------------------------


def make_scenarios(tasks: Sequence[Task], conversations: int, *, seed: int = 0,
                   **options: Any) -> list[tuple[Task, dict[str, Any]]]:
    """One scenario per conversation: the goals round-robin (the user's destination), each with a start
    location drawn (seeded) from the folder's starts."""
    if options:
        raise InvalidInput("MEEP scenarios take no options", sorted(options)[0])
    rng = random.Random(f"{seed}:meep-scenarios")
    made = []
    for n in range(conversations):
        task = tasks[n % len(tasks)]
        made.append((task, {"goal": task.star["goal"], "goal_id": task.star["goal_id"],
                            "destination": task.star["destination"],
                            "start": rng.choice(task.star["starts"])}))
    return made


# ---- the event log --------------------------------------------------------------------------------------


def _writers(session: Session, turn_ids: set[int]) -> dict[int, int]:
    """Who wrote each submitted turn, or holds each open one."""
    held = dict(session.exec(
        select(Hit.turn_id, Assignment.worker_id).join(Assignment, Assignment.hit_id == Hit.id)
        .where(col(Hit.turn_id).in_(turn_ids), Hit.status == HitStatus.open,
               Assignment.status == AssignmentStatus.accepted)).all())
    written = dict(session.exec(select(Turn.id, Turn.worker_id).where(
        col(Turn.id).in_(turn_ids), Turn.status == TurnStatus.submitted)).all())
    return {**held, **written}


def kept_events(session: Session, events: Sequence[DialogEvent]) -> list[DialogEvent]:
    """The dialog as written: clicks of a worker whose lease ran out, in a turn another worker then took,
    are left out (its answers with it: each click's events carry its worker)."""
    writers = _writers(session, {e.turn_id for e in events if e.turn_id is not None})
    return [e for e in events if e.worker_id is None or writers.get(e.turn_id) == e.worker_id]


def batch_templates(session: Session, conversation: Conversation, files: Files) -> dict[str, str]:
    """The templates every agent of the conversation's batch sees: the requester's file, then each one an
    agent added ("+"), in the order they were added."""
    added = session.exec(
        select(DialogEvent.data).join(Conversation, Conversation.id == DialogEvent.conversation_id)
        .where(Conversation.batch_id == conversation.batch_id, DialogEvent.agent == "Agent",
               DialogEvent.action == "add_template").order_by(col(DialogEvent.id))).all()
    templates = dict(files.templates)
    for data in added:
        templates.setdefault(data["Template"], data["TemplateText"])
    return templates


def _given(conversation: Conversation, files: Files) -> EventShape:
    return start_event(clicks.start(files.kb, conversation.scenario.get("start")))


def session_log(session: Session, conversation: Conversation, files: Optional[Files] = None) -> SessionLog:
    """The conversation's log as its kept events hold it (before anything is said: the start alone)."""
    events: list[Any] = kept_events(session, dialog_events(session, conversation.id))
    if not any(e.action == "start" for e in events):
        files = files or requester_files(task_of(session, MEEP, conversation).star["folder"])
        events.insert(0, _given(conversation, files))
    return from_events(events)


def record_action(session: Session, turn: Turn, worker: Worker, action: Any,
                  fields: Mapping[str, Any]) -> list[DialogEvent]:
    """Check one click of the worker holding ``turn`` against the log so far and append its events.

    ``fields`` are the click's own: a user's ``text`` (``utter``), ``approved`` (``judge``: yes or no) or
    none (``complete``); an agent's ``api`` and ``arguments`` (``call_api``), ``words`` (``add_template``),
    ``template`` and ``fillers`` (``pick_template``) or none (``send``), as ``turkflow.protocols.meep.clicks``
    reads them. Anything else, free text where a click
    belongs, or a click out of order is an ``InvalidInput`` naming the field (``fillers[1]``,
    ``arguments.query``), and nothing is written. An API call is answered at once, in the same events.
    """
    conversation = loggable(session, MEEP, turn, worker, not_held=Forbidden("you do not hold this turn"))
    allowed = MEEP.form(turn.role).actions
    if not isinstance(action, str) or action not in allowed:
        raise InvalidInput(f"a {'user' if turn.role == 'user' else 'agent'} can: {', '.join(allowed)}", "action")
    if not isinstance(fields, Mapping):
        raise InvalidInput("expected the click's fields as an object", "fields")
    rest = actions.typed(meep_actions.ROLES, turn.role, action, fields)
    files = requester_files(task_of(session, MEEP, conversation).star["folder"])
    log = session_log(session, conversation, files)
    done = [e.action for e in own_events(session, turn, worker)]
    driving = clicks.destination(log, files.kb)
    if turn.role == "user":
        if action == "utter" and driving is not None:
            raise InvalidInput("the agent is driving you: approve or disapprove the destination on the map",
                               "action")
        if action == "utter" and "utter" in done:
            raise InvalidInput("a user turn says one thing; submit it", "action")
        if action == "judge" and (driving is None or "judge" in done):
            raise InvalidInput("there is no destination to judge yet" if driving is None
                               else "this destination is judged; submit it", "action")
        if action == "complete" and (not {"utter", "judge"} & set(done) or "complete" in done):
            raise InvalidInput("write your last message first, then end the dialog", "action")
    elif "send" in done:
        raise InvalidInput("this turn's message is sent; submit it", "action")
    elif action in ("call_api", "add_template") and driving is not None:
        raise InvalidInput("the car is driving: say where you are going and send", "action")

    own = {"utter": ("text",), "judge": ("approved",), "call_api": ("api", "arguments"),
           "add_template": ("words",), "pick_template": ("template", "fillers")}
    given = {name: rest.pop(name, None) for name in own.get(action, ())}
    if rest:
        raise InvalidInput("not a field of this click", str(sorted(rest)[0])[:60])
    if action == "utter":
        if not isinstance(given["text"], str):
            raise InvalidInput("write a message", "text")
        shapes = record_events(clicks.user_says(log, clean_text(given["text"], "text")))
    elif action == "judge":
        if given["approved"] not in (*YES, False, "no", "false", "0", "off"):
            raise InvalidInput("approve (yes) or disapprove (no) the destination", "approved")
        shapes = [judged(given["approved"] in YES, driving)]
    elif action == "complete":
        shapes = [EventShape("User", "complete", {})]
    elif action == "call_api":
        shapes = record_events(clicks.call_api(log, files.kb, given["api"], given["arguments"]))
    elif action == "add_template":
        shapes = record_events(clicks.add_template(log, batch_templates(session, conversation, files),
                                                   given["words"]))
    elif action == "pick_template":
        shapes = record_events(clicks.pick_template(log, batch_templates(session, conversation, files),
                                                    given["template"], given["fillers"]))
    else:  # send
        shapes = record_events(clicks.send(log))
    if not any(e.action == "start" for e in dialog_events(session, conversation.id)):
        shapes.insert(0, _given(conversation, files))
    written = []
    for shape in shapes:
        system = shape.agent == "Scenario"
        event = DialogEvent(conversation_id=conversation.id, turn_id=None if system else turn.id,
                            turn_index=turn.index, worker_id=None if system else worker.id,
                            agent=shape.agent, action=shape.action, data=dict(shape.data))
        session.add(event)
        written.append(event)
    session.flush()
    return written


# ---- clicks as a form sends them -----------------------------------------------------------------------

_WORDS = re.compile(r"u([0-9]{1,4})_([0-9]{1,4})")
_FIELD = re.compile(r"(source|v[0-9]{1,6})\.([A-Za-z0-9_]{1,60})")
_TEMPLATE_WORD = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,59})\.([0-9]{1,4})")
BLANK = "{}"
MAX_SLOTS = 20


def filler_of(reference: Any, field: str) -> dict[str, Any]:
    """A slot as the page's forms fill it, in MEEP's names: words ``u2_5 u2_6`` (user message 2, tokens 5
    and 6) or a result field ``v1.name`` (``source.latitude``), as ``turkflow.protocols.meep.clicks`` reads fillers."""
    text = reference.strip() if isinstance(reference, str) else ""
    field_click = _FIELD.fullmatch(text)
    if field_click:
        return {"result": field_click.group(1), "field": field_click.group(2)}
    words = [_WORDS.fullmatch(w) for w in text.split()]
    if not words or not all(words):
        raise InvalidInput("click words of the user's message (u2_5) or a result field (v1.name)", field)
    numbers = {int(w.group(1)) for w in words}
    if len(numbers) != 1:
        raise InvalidInput("click words of one user message", field)
    return {"message": numbers.pop(), "tokens": [int(w.group(2)) for w in words]}


def pieces_of(references: str) -> list[dict[str, Any]]:
    """The "+" composer's words as its form sends them: ``u2_5`` (word 5 of user message 2), ``t3.2``
    (word 2 of template t3) and ``{}`` (a blank), separated by spaces."""
    pieces: list[dict[str, Any]] = []
    for n, reference in enumerate(references.split()):
        word, template_word = _WORDS.fullmatch(reference), _TEMPLATE_WORD.fullmatch(reference)
        if reference == BLANK:
            pieces.append({"blank": True})
        elif word:
            pieces.append({"message": int(word.group(1)), "token": int(word.group(2))})
        elif template_word:
            pieces.append({"template": template_word.group(1), "token": int(template_word.group(2))})
        else:
            raise InvalidInput("click words (u2_5, t3.2) and blanks ({})", f"words[{n}]")
    return pieces


def form_click(body: Mapping[str, Any]) -> dict[str, Any]:
    """A click's fields from the page's slots: ``filler-0``, ``filler-1``, ... make the template's
    ``fillers``, ``arg-<name>`` the API's ``arguments`` and a ``words`` string the composer's pieces;
    other fields pass as they are."""
    rest = {k: v for k, v in body.items() if not k.startswith(("filler-", "arg-"))}
    if isinstance(rest.get("words"), str):
        rest["words"] = pieces_of(rest["words"])
    slots = {k: v for k, v in body.items() if k.startswith("filler-")}
    if slots:
        if len(slots) > MAX_SLOTS or set(slots) != {f"filler-{n}" for n in range(len(slots))}:
            raise InvalidInput("send filler-0, filler-1, ... one per blank", sorted(slots)[0][:60])
        rest["fillers"] = [filler_of(slots[f"filler-{n}"], f"fillers[{n}]") for n in range(len(slots))]
    arguments = {k[4:]: v for k, v in body.items() if k.startswith("arg-")}
    if arguments:
        rest["arguments"] = {name: filler_of(v, f"arguments.{name}"[:60]) for name, v in arguments.items()}
    if "template" in rest and "fillers" not in rest:  # a template without blanks
        rest["fillers"] = []
    return rest


# ---- what the pages show --------------------------------------------------------------------------------


def _tokens(text: str) -> list[dict[str, Any]]:
    return [{"index": t.index, "text": t.text} for t in tokenize(text)]


def agent_view(session: Session, turn: Turn, worker_id: Optional[int] = None) -> dict[str, Any]:
    """Everything the agent's page shows: the user's messages as clickable words (the last one for
    templates, any for API arguments), the APIs with their argument slots, the results panel, the batch's
    templates with their blanks and clickable words (for "+"), the message being built, whether the car is
    driving and whether this turn's message is sent."""
    conversation = session.get(Conversation, turn.conversation_id)
    files = requester_files(task_of(session, MEEP, conversation).star["folder"])
    log = session_log(session, conversation, files)
    templates = batch_templates(session, conversation, files)
    said = clicks.messages(log)
    mine = [e.action for e in dialog_events(session, conversation.id)
            if e.turn_id == turn.id and (worker_id is None or e.worker_id == worker_id)]
    return {
        "last_message": max(said) if said else None,
        "messages": [{"number": n, "text": text, "tokens": _tokens(text)} for n, text in said.items()],
        "apis": [{"name": api.name, "description": api.description, "returns": list(api.returns),
                  "arguments": [{"name": name, "kind": kind, "description": api.described.get(name, "")}
                                for name, kind in api.arguments.items()]}
                 for api in files.kb.apis.values()],
        "panel": [{"id": r.id, "api": r.api, "fields": dict(r.fields)} for r in clicks.panel(log).values()],
        "templates": [{"id": tid, "text": text, "parts": parts(text),
                       "words": [{"index": i, "text": w} for i, w in clicks.template_words(text)]}
                      for tid, text in templates.items()],
        "driving": clicks.destination(log, files.kb),
        "pending": [{"template": p.template, "text": p.text} for p in clicks.pending(log)],
        "message": " ".join(p.text for p in clicks.pending(log)),
        "sent": "send" in mine,
    }


def user_view(session: Session, turn: Turn) -> dict[str, Any]:
    """The user's page: the goal and where the car is, never the knowledge base; once the agent has
    called ``start_driving``, the destination to approve or disapprove on the map (with the name of the
    place it is, when a result the agent found stands there)."""
    conversation = session.get(Conversation, turn.conversation_id)
    scenario = conversation.scenario
    files = requester_files(task_of(session, MEEP, conversation).star["folder"])
    log = session_log(session, conversation, files)
    point = clicks.destination(log, files.kb)
    if point is not None:
        named = [r.fields.get("name") for r in clicks.panel(log).values()
                 if (r.fields.get("latitude"), r.fields.get("longitude")) == (point["latitude"], point["longitude"])
                 and isinstance(r.fields.get("name"), str)]
        point = {**point, "name": named[-1] if named else ""}
    return {"goal": scenario.get("goal", ""), "start": scenario.get("start", {}).get("address", ""),
            "destination": point}


# ---- submitting a turn ----------------------------------------------------------------------------------


def submit_turn(session: Session, assignment_external_id: str, worker: Worker, body: Mapping[str, Any],
                *, as_answers: bool = False) -> lifecycle.Submission:
    """Close a MEEP turn and submit it through ``lifecycle.submit_turn``.

    From MEEP's pages, ``body`` may carry the user's ``text`` and ``complete`` (or, once the car is
    driving, ``approved``: yes or no, the destination's verdict, which ends the dialog), or the agent's
    ``action: send``, logged now, and the writing ``signals``. With ``as_answers`` it holds the protocol's
    answers instead (the label question, ``response``), as the generic turn route sends them. The turn
    must then hold its one closing click (the user's ``utter``, the agent's ``send``), and answers given
    must agree with it: the stored answers are read off the events. A repeated submit returns the stored
    turn and logs nothing, so a double send stores once.
    """
    sent = open_submit(session, MEEP, assignment_external_id, worker, body, as_answers=as_answers)
    if sent is None:
        return submitted_before(session, assignment_external_id, worker, body)
    turn, rest = sent.turn, sent.rest
    if as_answers:
        if rest:  # a MEEP turn's generic submit names a stray field as its own pages' submit does
            raise InvalidInput("not a field of a submit", str(sorted(rest)[0])[:60])
    elif turn.role == "user":
        text, complete, approved = one(rest, "text"), one(rest, "complete") in YES, one(rest, "approved")
        if approved is not None:
            if text is not None:
                raise InvalidInput("the car is driving: approve or disapprove, nothing more", "text")
            record_action(session, turn, worker, "judge", {"approved": approved})
            complete = True
        if text is not None:
            record_action(session, turn, worker, "utter", {"text": text})
        if complete:
            record_action(session, turn, worker, "complete", {})
    else:
        action = one(rest, "action")
        if action not in (None, "send"):
            raise InvalidInput("an agent's turn closes with send", "action")
        if action == "send" and "send" not in [e.action for e in own_events(session, turn, worker)]:
            record_action(session, turn, worker, "send", {})
    closing = CLOSING[turn.role]
    closes = ("utter", "judge") if turn.role == "user" else (closing,)
    return close_logged_turn(session, sent, closing=closes, holds=f"one {' or '.join(closes)}", logged_as="clicks")


# ---- success against the goal ---------------------------------------------------------------------------


def verified_outcomes(session: Session, conversation_ids: Sequence[int]) -> dict[int, Verified]:
    """Each dialog's success checked against its goal (``registry``'s ``verified_outcomes``): the agent's
    ``start_driving``, executed, drives to the destination the user wanted; a dialog that ended without
    driving, or drove elsewhere, failed. (The user's approval on the map is their claim, beside it.)"""
    found = {}
    for conversation in session.exec(select(Conversation).where(col(Conversation.id).in_(list(conversation_ids)))):
        files = requester_files(task_of(session, MEEP, conversation).star["folder"])
        driven = clicks.destination(session_log(session, conversation, files), files.kb)
        wanted = conversation.scenario.get("destination", {})
        there = driven is not None and all(
            isinstance(driven.get(k), (int, float))
            and math.isclose(driven[k], wanted.get(k, math.inf), abs_tol=1e-6) for k in ("latitude", "longitude"))
        found[conversation.id] = Verified(there, {
            "goal": conversation.scenario.get("goal_id"), "driven": driven,
            "wanted": {k: wanted.get(k) for k in ("latitude", "longitude", "name") if k in wanted}})
    return found


# ---- replay ---------------------------------------------------------------------------------------------


_NOT_RECORDS = {("Scenario", "start"), ("API", "return_results"), ("User", "complete"), ("User", "judge")}


def replay(session: Session, conversation_ids: Sequence[int]) -> tuple[int, list[ReplayDifference]]:
    """Execute every conversation's log against the requester's files as they are now: every utterance
    rebuilt from its template and fillers, every API called again. Returns how many clicks ran (API calls,
    template picks, templates added, sends) and every difference, naming its click: a template added
    ("+") is composed again from its clicked words, and a judged destination must be where the log's
    ``start_driving`` drives now."""
    ran, differences = 0, []
    for conversation_id in conversation_ids:
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            raise NotFound(f"no conversation {conversation_id}")
        files = requester_files(task_of(session, MEEP, conversation).star["folder"])
        events = kept_events(session, dialog_events(session, conversation_id))
        turns = [e.turn_index for e in events if (e.agent, e.action) not in _NOT_RECORDS]
        log = session_log(session, conversation, files)
        ran += sum(1 for r in log.records if not isinstance(r, UserMessage))
        for found in execute(log, batch_templates(session, conversation, files), files.kb):
            turn = turns[found.click] if 0 <= found.click < len(turns) else None
            differences.append(ReplayDifference(conversation_id, found.describe(), turn_index=turn,
                                                difference=found))
        differences += _judged_elsewhere(conversation_id, events, log, files)
    return ran, differences


def _judged_elsewhere(conversation_id: int, events: Sequence[DialogEvent], log: SessionLog,
                      files: Files) -> list[ReplayDifference]:
    """The user's verdict names the point they saw on the map; executing ``start_driving`` must drive
    there still (its results are checked by ``execute``; this checks the verdict's point against them)."""
    found = []
    call = clicks.drive_call(log, files.kb)
    for event in events:
        if (event.agent, event.action) != ("User", "judge"):
            continue
        seen = {"latitude": event.data.get("Latitude"), "longitude": event.data.get("Longitude")}
        try:
            now = files.kb.call(call.api, {n: f.value for n, f in call.arguments.items()})[0] if call else {}
        except InvalidInput as exc:
            now = {"error": exc.reason}
        driven = {"latitude": now.get("latitude"), "longitude": now.get("longitude")}
        if driven != seen:
            found.append(ReplayDifference(conversation_id, f"the user judged the destination {json.dumps(seen)}, "
                                          f"executing start_driving drives to {json.dumps(driven)}",
                                          turn_index=event.turn_index))
    return found


# ---- export as Schema-Guided Dialogue ------------------------------------------------------------------


def _shown(value: Any) -> str:
    """SGD's values are strings: text as it is, anything else as JSON (3.5, true)."""
    return value if isinstance(value, str) else json.dumps(value)


def _action(act: str, slot: str, values: Sequence[Any]) -> dict[str, Any]:
    shown = [_shown(v) for v in values]
    return {"act": act, "slot": slot, "values": shown, "canonical_values": shown}


def _word_spans(text: str, clicks: Sequence[Any]) -> Optional[tuple[int, int]]:
    """The characters of ``text`` the clicked words cover, first to last (SGD's slot span)."""
    tokens = tokenize(text)
    indexes = [c.token for c in clicks if 0 <= c.token < len(tokens)]
    return (tokens[min(indexes)].start, tokens[max(indexes)].end) if indexes else None


def _frame_of(frames: list[dict[str, Any]], service: str) -> dict[str, Any]:
    found = next((f for f in frames if f["service"] == service), None)
    if found is None:
        found = {"service": service, "slots": [], "actions": []}
        frames.append(found)
    return found


def sgd_dialogue(conversation: Conversation, task: Task, log: SessionLog) -> dict[str, Any]:
    """One MEEP log as an SGD dialogue (see ``sgd_dialogues``)."""
    turns: list[dict[str, Any]] = []
    frames: list[dict[str, Any]] = []  # the agent's, until it sends
    picked: list[dict[str, Any]] = []
    fillers: list[Filler] = []  # the picked templates' fillers, until the agent sends
    services = [task.domain]
    users: dict[int, dict[str, Any]] = {}  # a user message's turn, by its number
    apis: dict[str, str] = {}  # a result's id -> the API that returned it
    for record in log.records:
        if isinstance(record, UserMessage):
            users[record.number] = {"speaker": "USER", "utterance": record.text,
                                    "frames": [{"service": task.domain, "slots": [], "actions": []}]}
            turns.append(users[record.number])
        elif isinstance(record, ApiCall):
            apis.update((r.id, record.api) for r in record.results)
            for name, filler in record.arguments.items():  # the words an argument took, where the user said them
                words = [c for c in filler.clicks if isinstance(c, WordClick)]
                said = users.get(words[0].message) if words else None
                span = _word_spans(said["utterance"], words) if said else None
                if span is not None:
                    _frame_of(said["frames"], record.api)["slots"].append(
                        {"slot": name, "start": span[0], "exclusive_end": span[1]})
            arguments = {name: f.value for name, f in record.arguments.items()}
            frames.append({"service": record.api, "slots": [],
                           "actions": [_action("INFORM", n, [v]) for n, v in arguments.items()],
                           "service_call": {"method": record.api,
                                            "parameters": {n: _shown(v) for n, v in arguments.items()}},
                           "service_results": [{k: _shown(v) for k, v in r.fields.items()}
                                               for r in record.results]})
            services.append(record.api)
        elif isinstance(record, TemplatePick):
            picked.append(_action("TEMPLATE", record.template, [f.value for f in record.fillers]))
            fillers += record.fillers
        elif isinstance(record, TemplateAdded):
            continue  # a template the agent made: no utterance of its own
        elif isinstance(record, Send):
            said = [{"service": task.domain, "slots": [], "actions": picked}, *frames]
            at = 0
            for filler in fillers:  # a result field a blank took, where the sent text says it
                field = filler.clicks[0] if len(filler.clicks) == 1 and isinstance(filler.clicks[0], FieldClick) \
                    else None
                value = _shown(filler.value) if filler.value is not None else ""
                start = record.text.find(value, at) if value else -1
                if start < 0:
                    continue
                at = start + len(value)
                if field is not None and field.result in apis:
                    _frame_of(said, apis[field.result])["slots"].append(
                        {"slot": field.field, "start": start, "exclusive_end": at})
            turns.append({"speaker": "SYSTEM", "utterance": record.text, "frames": said})
            frames, picked, fillers = [], [], []
    return {"dialogue_id": f"meep_{conversation.id}", "services": list(dict.fromkeys(services)),
            "turns": turns}


def sgd_dialogues(session: Session, hash_key: str, filters: ExportFilters,
                  page_size: int = 200) -> Iterator[dict[str, Any]]:
    """The selected MEEP conversations as SGD dialogues, in id order.

    A user message is a USER turn, a sent message a SYSTEM turn, both in a frame of the dialog's service
    (the task's domain). The SYSTEM turn's frame lists each template picked for it as a ``TEMPLATE``
    action (slot: the template id; values: its fillers' values); each API the agent called before sending
    adds a frame whose service is the API, with one ``INFORM`` action per argument (slot: the argument;
    value: what the clicks gave), and the call and its results as SGD's ``service_call`` and
    ``service_results``. Where a value came from has SGD's place for it, a slot's span in an utterance: an
    argument's clicked words are a span of the user's message, in a frame of the API's service; a result field
    a template's blank took is a span of the sent message, in a frame of the service that returned it. The
    user's verdict on the destination is a last USER turn whose action is
    ``AFFIRM`` (approved) or ``NEGATE`` (slot ``destination``, value ``latitude,longitude``). Nothing in SGD names a worker, so ``hash_key`` hides nothing here.
    """
    for page in conversation_pages(session, MEEP, filters, page_size):
        for conversation, _ in page:
            task = task_of(session, MEEP, conversation)
            events = kept_events(session, dialog_events(session, conversation.id))
            if not any(e.action == "start" for e in events):
                continue  # nobody has said anything yet
            dialogue = sgd_dialogue(conversation, task, from_events(events))
            for judge in (e for e in events if (e.agent, e.action) == ("User", "judge")):
                dialogue["turns"].append({"speaker": "USER", "utterance": judge.data["Text"], "frames": [{
                    "service": task.domain, "slots": [],
                    "actions": [_action("AFFIRM" if judge.data["Approved"] else "NEGATE", "destination",
                                        [f"{judge.data['Latitude']},{judge.data['Longitude']}"])]}]})
            yield dialogue


def sgd_services(session: Session, names: set[str]) -> list[dict[str, Any]]:
    """``schema.json`` entries for the MEEP services named: a task domain (the dialog; no slots) or an API
    of a loaded folder's knowledge base (its arguments as slots, what it returns as result slots)."""
    tasks = list(session.exec(select(Task).where(Task.protocol == MEEP.name)))
    found: dict[str, dict[str, Any]] = {}
    for task in tasks:
        if task.domain in names and task.domain not in found:
            found[task.domain] = {"service_name": task.domain, "description": "Reach the destination the user "
                                  "has in mind, by clicks (MEEP)", "slots": [], "intents": [{
                                      "name": "reach_destination", "description": "Drive the user there",
                                      "is_transactional": True, "required_slots": [], "optional_slots": {},
                                      "result_slots": []}]}
    for folder in sorted({t.star["folder"] for t in tasks}):
        try:
            apis = requester_files(folder).kb.apis.values()
        except InvalidDocument:
            continue  # the folder moved or broke since loading: its APIs stay unnamed
        for api in apis:
            if api.name not in names or api.name in found:
                continue
            found[api.name] = {
                "service_name": api.name, "description": api.description,
                "slots": [{"name": n, "description": api.described.get(n, ""), "is_categorical": False,
                           "possible_values": []} for n in api.arguments],
                "intents": [{"name": api.name, "description": api.description,
                             "is_transactional": api.function == "drive", "required_slots": list(api.arguments),
                             "optional_slots": {}, "result_slots": list(api.returns)}]}
    return [found[name] for name in sorted(found)]
