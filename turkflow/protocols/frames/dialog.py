"""Frames dialogs on the asynchronous pipeline: the requester's domain as tasks, goals as scenarios, the
search log, replay, the SGD export and the analysis of success.

A Frames dialog (El Asri et al. 2017; ``turkflow.protocols.frames``) is an event log (``DialogEvent`` rows) written by
one function, ``record_action``, while a worker holds a paid turn (a ``Turn`` row, one per HIT):

- a *user* turn is one ``utter``, perhaps followed by ``complete`` (the turn's label is then ``complete``,
  which ends the conversation);
- a *wizard* turn is any number of ``search`` actions, each answered at once by the database (the shapes
  are ``turkflow.protocols.frames.events``: the wizard's ``search``, the database's ``search_results`` and, when the
  draw allowed them, the ``suggestions`` shown), perhaps one ``book`` of an item those searches showed
  (no search after it), closed by one ``utter``. A turn that booked is labelled ``book`` and ends the
  dialog, as most Frames dialogues end.

A task is one goal template of a domain file (``tasks load --protocol frames DOMAIN.yaml``); a launch draws
one goal per conversation (``make_scenarios``), stored as ``Conversation.scenario`` (``Goal.as_dict``), with
the instruction that dialog's wizards follow (``wizard_instruction``, one of the domain's, drawn per dialog).
Whether a search that finds nothing shows suggestions is drawn from a generator seeded by the conversation
and the search's number in it (logged as ``draw``), so the same log gives the same draws. The domain file
and its database are read again whenever either changes on disk, so ``replay`` after a row changed names
the search that now finds something else.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.protocols.registry import (
    LogPage, ReplayDifference, Verified, close_logged_turn, conversation_pages, dialog_events, log_closing_action,
    log_page, loggable, message_text, open_submit, own_events, task_of, submitted_before,
)
from turkflow.errors import InvalidDocument, InvalidInput, NotFound
from turkflow.dataset.export import ExportFilters
from turkflow.protocols import actions
from turkflow.protocols.frames import actions as frames_actions
from turkflow.protocols.frames import events as frames_events
from turkflow.protocols.frames.database import Constraint, Database, convert, to_json
from turkflow.protocols.frames.domain import Domain, load_domain
from turkflow.protocols.frames.goals import MEETS_ALTERNATE, MEETS_GOAL, generate, goal_from_dict, judge_booking
from turkflow.protocols.frames.search import Suggestion, describe, parse_search, run_search
from turkflow.protocols.frames.survey import NOT_BOOKED, success_report
from turkflow.hits import lifecycle
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task, Turn, TurnStatus, Worker
from turkflow.protocols.questions import FRAMES, clean_text

KEY_PREFIX = "frames:"
AGENTS = {"user": "User", "wizard": frames_events.WIZARD}
MAX_VALUE = 200  # characters of one search field's value
CHOICES = 60  # a text field with at most this many values is a drop-down on the wizard's form


# ---- the domain ----------------------------------------------------------------------------------------


def _stamp(*paths: Path) -> tuple:
    try:
        return tuple((p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
    except OSError as exc:
        raise InvalidDocument(f"{exc.filename}: the domain's file is gone; load the Frames tasks again") from None


@dataclass(frozen=True)
class Loaded:
    domain: Domain
    items: dict[Any, dict[str, Any]]  # the database's items by id


@lru_cache(maxsize=8)
def _loaded(path: str, stamp: tuple) -> Loaded:
    domain = load_domain(Path(path))
    return Loaded(domain, {item["id"]: item for item in domain.db.items})


def loaded(task: Task) -> Loaded:
    """The task's domain as its files say now (read once per change of either file)."""
    path, database = Path(task.star["domain_file"]), Path(task.star["database_file"])
    return _loaded(str(path), _stamp(path, database))


def domain_of(task: Task) -> Domain:
    return loaded(task).domain


def database_values(task: Task) -> dict[str, list[str]]:
    """Every value of each column of the task's database as the pages show it: what an annotator may pick
    for a slot of that column (``protocols.annotate``, through the registry)."""
    db = domain_of(task).db
    return {c: sorted({str(to_json(v)) for v in db.values(c) if v is not None}) for c in db.columns}


def read_tasks(path: Path) -> list[Task]:
    """A domain file's goal templates as unsaved tasks, one per template (``frames:<database>:<template>``);
    a bad file or database is one ``InvalidDocument`` naming it, before anything is returned."""
    path = Path(path).resolve()
    domain = load_domain(path)
    database = domain.database_file
    return [Task(key=f"{KEY_PREFIX}{domain.db.name}:{t.name}", protocol=FRAMES.name,
                 title=t.name.replace("_", " ").capitalize(), domain=domain.db.name,
                 star={"template": t.name, "kind": t.kind, "probability": t.probability,
                       "domain_file": str(path), "database_file": str(database)})
            for t in domain.templates]


# ---- scenarios: one goal per conversation ----------------------------------------------------------------


def make_scenarios(tasks: Sequence[Task], conversations: int, *, seed: int = 0,
                   success: Optional[float] = None) -> list[tuple[Task, dict[str, Any]]]:
    """One goal per conversation from the loaded templates, chosen at random (role-play and generic mixed);
    each goal succeeds with probability ``success`` (None: its template's own), so about pN match at least
    one item and (1-p)N match none. Templates of several domain files share the conversations in
    proportion to their number. Each dialog's wizard instruction is drawn from its own seed, so adding it
    left every goal a seed draws as it was."""
    if success is not None and (isinstance(success, bool) or not isinstance(success, (int, float))
                                or not 0.0 <= success <= 1.0):
        raise InvalidInput("a probability is between 0 and 1", "success")
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.star["domain_file"], []).append(task)
    rng = random.Random(seed)
    files = list(groups)
    chosen = [files[0] if len(files) == 1 else rng.choices(files, [len(groups[f]) for f in files])[0]
              for _ in range(conversations)]
    drawn: dict[str, Iterator[tuple[Task, dict[str, Any]]]] = {}
    for n, file in enumerate(files):
        domain = domain_of(groups[file][0])
        by_name = {t.star["template"]: t for t in groups[file]}
        templates = [t for t in domain.templates if t.name in by_name]
        gone = sorted(set(by_name) - {t.name for t in templates})
        if gone:
            raise InvalidInput(f"template {gone[0]!r} is no longer in {file}; load the Frames tasks again",
                               "tasks")
        goals = generate(templates, domain.db, chosen.count(file), success,
                         rng if len(files) == 1 else random.Random(f"{seed}:{n}"))
        drawn[file] = iter([(by_name[g.template], {**g.as_dict(), "domain": domain.db.name}) for g in goals])
    scenarios = [next(drawn[file]) for file in chosen]
    return [(task, {**goal, "wizard_instruction": random.Random(f"{seed}:wizard:{n}").choice(
        domain_of(task).wizard_instructions)}) for n, (task, goal) in enumerate(scenarios)]


# ---- the event log --------------------------------------------------------------------------------------


def _value(name: str, value: Any) -> Any:
    """A search field's value as typed: text is cleaned (a control character is refused, naming the field)."""
    if isinstance(value, str):
        value = clean_text(value, name)
        if len(value) > MAX_VALUE:
            raise InvalidInput(f"write at most {MAX_VALUE} characters", name)
    return value


def _conditions(raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise InvalidInput("expected {field: value} or {field: {at_least, at_most}}", "constraints")
    return {name: ({op: _value(str(name), v) for op, v in value.items()} if isinstance(value, Mapping)
                   else _value(str(name), value)) for name, value in raw.items()}


def record_action(session: Session, turn: Turn, worker: Worker, action: Any,
                  fields: Mapping[str, Any]) -> list[DialogEvent]:
    """Validate one action of the worker holding ``turn`` and append it to the dialog's log.

    ``fields`` are the action's own: ``text`` (utter); ``constraints``, ``sort``, ``descending`` and
    ``flexible`` (search); ``id`` (book: an item this dialog's searches showed). Anything else, a wrong
    type, a field that is not searchable or a value that does not fit its column, or an action out of order
    is an ``InvalidInput`` naming the field, and nothing is written. A search is answered at once: its
    results and any suggestions are logged with it.
    """
    conversation = loggable(session, FRAMES, turn, worker)
    form = FRAMES.form(turn.role)
    if not isinstance(action, str) or action not in form.actions:
        raise InvalidInput(f"a {turn.role} can: {', '.join(form.actions)}", "action")
    if not isinstance(fields, Mapping):
        raise InvalidInput("expected the action's fields as an object", "fields")
    fields = actions.typed(frames_actions.ROLES, turn.role, action, fields)
    # this holder's own: a worker whose lease ran out may have said something and never submitted it
    earlier = [e.action for e in own_events(session, turn, worker)]
    if action == "utter" and "utter" in earlier:
        raise InvalidInput(f"this turn's {'message' if turn.role == 'user' else 'reply'} is already sent; "
                           "submit it", "action")
    if action in ("search", "book") and "utter" in earlier:
        raise InvalidInput("this turn's reply is already sent; submit it", "action")
    if action in ("search", "book") and "book" in earlier:
        raise InvalidInput("you booked a package: tell the user and send your reply", "action")
    if action == "complete" and ("utter" not in earlier or "complete" in earlier):
        raise InvalidInput("say goodbye first, then end the dialog", "action")

    rest = dict(fields)
    if action == "utter":
        text = message_text(rest, "text", FRAMES.max_response_chars)
        shaped = [frames_events.FramesEvent(AGENTS[turn.role], "utter", {"Text": text})]
    elif action == "complete":
        shaped = [frames_events.FramesEvent("User", "complete", {})]
    elif action == "book":
        files = loaded(task_of(session, FRAMES, conversation))
        shown = {str(i): i for i in shown_ids(dialog_events(session, conversation.id))}
        given = rest.pop("id", None)
        if isinstance(given, (dict, list)) or str(given) not in shown:
            raise InvalidInput("book a package one of this dialog's searches showed", "id")
        shaped = [frames_events.book_event(files.items[shown[str(given)]])]
    else:
        domain = domain_of(task_of(session, FRAMES, conversation))
        search = parse_search(domain.db, _conditions(rest.pop("constraints", {})), rest.pop("sort", None),
                              rest.pop("descending", False), rest.pop("flexible", 0), domain.flexible_days)
        draw = len(session.exec(select(DialogEvent.id).where(
            DialogEvent.conversation_id == conversation.id, DialogEvent.action == frames_events.SEARCH)).all())
        result = run_search(domain.db, search, random.Random(f"frames:{conversation.id}:{draw}"),
                            domain.suggestion_probability)
        shaped = frames_events.search_events(search, result)
        shaped[0].data["draw"] = draw
    if rest:
        raise InvalidInput("not a field of this action", str(sorted(rest, key=str)[0])[:60])
    written = [DialogEvent(conversation_id=conversation.id, turn_id=turn.id, turn_index=turn.index,
                           worker_id=worker.id if e.agent == AGENTS[turn.role] else None,
                           agent=e.agent, action=e.action, data=e.data) for e in shaped]
    for event in written:
        session.add(event)
    session.flush()
    return written


def shown_ids(events: Sequence[DialogEvent]) -> list[Any]:
    """The items this dialog's searches showed (results and suggestions), in the order first shown: what a
    wizard may book."""
    ids: dict[Any, None] = {}
    for event in events:
        if event.action == frames_events.RESULTS:
            ids.update(dict.fromkeys(event.data["ids"]))
        elif event.action == frames_events.SUGGESTIONS:
            for s in event.data["suggestions"]:
                ids.update(dict.fromkeys(s["ids"]))
    return list(ids)


def form_search(values: Any) -> dict[str, Any]:
    """The wizard's search form (``field`` for "is", ``field.at_least`` and ``field.at_most`` for a range)
    as ``record_action``'s constraints; a blank field asks nothing."""
    if not isinstance(values, Mapping):
        raise InvalidInput("expected the form's fields as an object", "form")
    found: dict[str, Any] = {}
    for name, value in values.items():
        field, _, op = str(name).partition(".")
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if isinstance(found.get(field), Mapping) != bool(op) and field in found:
            raise InvalidInput("give one value or a range, not both", field)
        if op:
            found.setdefault(field, {})[op] = value
        else:
            found[field] = value
    return found


def take_action(session: Session, turn: Turn, worker: Worker, action: Any,
                fields: Mapping[str, Any]) -> list[DialogEvent]:
    """``record_action`` as the pages call it: a search may come as the form's plain values (``form``, with
    ``descending`` as a checkbox)."""
    rest = actions.typed(frames_actions.ROLES, turn.role, action, fields)
    if action == "search" and "form" in rest:
        if "constraints" in rest:
            raise InvalidInput("send the form or the constraints, not both", "constraints")
        rest["constraints"] = form_search(rest.pop("form"))
    return record_action(session, turn, worker, action, rest)


# ---- what the pages show --------------------------------------------------------------------------------


def _row(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: to_json(value) for name, value in item.items()}


def condition_text(c: Mapping[str, Any], domain: Optional[Domain] = None) -> str:
    """A condition as the wizard's page says it, under the column's label ("Travellers at least 3")."""
    name = domain.label(c["field"]) if domain is not None else c["field"]
    return f"{name} {c['op'].replace('_', ' ')} {c['value']}"


def search_text(data: Mapping[str, Any], domain: Optional[Domain] = None) -> str:
    """A logged search's conditions in a line, with its flexible dates."""
    said = "; ".join(condition_text(c, domain) for c in data.get("constraints", [])) or "every item"
    return said + (f" (dates ± {data['flexible']} days)" if data.get("flexible") else "")


def search_form(db: Database, domain: Optional[Domain] = None) -> list[dict[str, Any]]:
    """The search form: every searchable field under its label; numbers and dates as a range (or the one
    bound the domain's ``ask`` names), text with few values and yes/no as drop-downs."""
    fields = []
    for column in db.searchable:
        values = db.values(column.name)
        kind = ("range" if column.ordered else "boolean" if column.type == "boolean"
                else "choice" if len(values) <= CHOICES else "text")
        fields.append({"name": column.name, "type": column.type, "kind": kind,
                       "label": domain.label(column.name) if domain is not None else column.name,
                       "ops": ([domain.ask[column.name]] if domain is not None and column.name in domain.ask
                               else ["at_least", "at_most"]) if kind == "range" else [],
                       "choices": [to_json(v) for v in values] if kind == "choice" else [],
                       "low": to_json(values[0]) if kind == "range" and values else None,
                       "high": to_json(values[-1]) if kind == "range" and values else None})
    return fields


def search_log(events: Sequence[DialogEvent], items: Mapping[Any, Mapping[str, Any]],
               domain: Optional[Domain] = None) -> list[dict[str, Any]]:
    """Every search of the dialog, newest first: its conditions, the items shown and the suggestions."""
    log = []
    for n, event in enumerate(events):
        if event.action != frames_events.SEARCH:
            continue
        following = events[n + 1:n + 3]
        results = next((e.data for e in following[:1] if e.action == frames_events.RESULTS), {})
        offered = next((e.data for e in following[1:] if e.action == frames_events.SUGGESTIONS), None)
        suggestions = []
        for s in (offered or {}).get("suggestions", []):
            shown = Suggestion(Constraint(**s["relaxed"]), Constraint(**s["instead"]) if s["instead"] else None,
                               tuple(s["ids"]), s["total"])
            suggestions.append({"text": describe(shown, domain.labels if domain else None),
                                "total": s["total"],
                                "items": [_row(items[i]) for i in s["ids"] if i in items]})
        log.append({"event_id": event.id, "turn_index": event.turn_index,
                    "conditions": [condition_text(c, domain) for c in event.data["constraints"]],
                    "flexible": event.data.get("flexible", 0),
                    "sort": event.data["sort"], "total": results.get("total", 0),
                    "items": [_row(items[i]) for i in results.get("ids", []) if i in items],
                    "offered": offered is not None, "suggestions": suggestions})
    return log[::-1]


def form_values(search: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """A logged search's conditions as the form's fields (``field`` for "is", ``field.at_least``...): the form
    comes back filled with the newest search, so refining one condition is changing one field."""
    values: dict[str, Any] = {}
    for c in (search or {}).get("constraints", []):
        values[c["field"] if c["op"] == "is" else f"{c['field']}.{c['op']}"] = c["value"]
    return values


def wizard_view(session: Session, turn: Turn, worker_id: Optional[int] = None,
                typed: Optional[Mapping[str, Any]] = None, older: int = 0) -> dict[str, Any]:
    """The wizard's page: the dialog's instruction, the search form under the domain's labels (filled with
    ``typed``, a refused search's fields, else with the dialog's newest search), the dialog's searches with
    their results (the domain's result columns, the rest on demand) and suggestions, a page (``log_page``) at a
    time from the ``older``-th newest, and what this turn did so far (``worker_id``'s actions: searches, a
    booking, the reply)."""
    conversation = session.get(Conversation, turn.conversation_id)
    files = loaded(task_of(session, FRAMES, conversation))
    domain = files.domain
    events = dialog_events(session, conversation.id)
    mine = [e for e in events if e.turn_id == turn.id and e.worker_id is not None
            and (worker_id is None or e.worker_id == worker_id)]
    newest = next((e.data for e in reversed(events) if e.action == frames_events.SEARCH), None)
    sort = (newest or {}).get("sort") or domain.sort.as_dict()
    booked = next((e.data["item"] for e in mine if e.action == frames_events.BOOK), None)
    replied = any(e.action == "utter" for e in mine)
    typed_form = {str(k): v for k, v in typed.items() if not isinstance(v, (dict, list))} if typed else None
    return {
        "database": domain.db.name,
        "instruction": conversation.scenario.get("wizard_instruction"),
        "form": search_form(domain.db, domain),
        "values": typed_form if typed_form is not None else form_values(newest),
        "sorts": [{"name": c.name, "label": domain.label(c.name)} for c in domain.db.columns.values()
                  if c.ordered or c.type == "text" or c.name == "id"],
        "sort": sort,
        "flexible": (newest or {}).get("flexible", 0),
        "flexible_days": domain.flexible_days,
        "has_dates": any(c.type == "date" for c in domain.db.searchable),
        "columns": list(domain.results),
        "labels": {name: domain.label(name) for name in domain.db.columns},
        **_searches_shown(log_page(search_log(events, files.items, domain), older)),
        "this_turn": [{"action": e.action, "text": e.data.get("Text", ""),
                       "conditions": [condition_text(c, domain) for c in e.data.get("constraints", [])],
                       **({"id": e.data["id"]} if e.action == frames_events.BOOK else {})} for e in mine],
        "booked": booked,
        "can_book": not replied and booked is None,
        "replied": replied,
    }


def _searches_shown(page: LogPage) -> dict[str, Any]:
    return {"searches": page.entries, "searches_total": page.total, "older_searches": page.older,
            "newer_searches": page.newer}


def user_view(session: Session, turn: Turn) -> dict[str, Any]:
    """The user's page: their goal and what to do if nothing matches, never the database."""
    goal = session.get(Conversation, turn.conversation_id).scenario
    return {"goal": {"instructions": goal.get("instructions", ""), "kind": goal.get("kind", ""),
                     "character": goal.get("character", ""), "personality": goal.get("personality", "")}}


def survey_shows(session: Session, conversation_id: int, role: str) -> Optional[str]:
    """What the role's end-of-dialog page shows beside the questions: the wizard judges whether the user
    reached this goal, as Frames showed it; the user sees nothing more."""
    conversation = session.get(Conversation, conversation_id)
    if role != "wizard" or conversation is None:
        return None
    return conversation.scenario.get("instructions") or None


# ---- submitting a turn ----------------------------------------------------------------------------------


def submit_turn(session: Session, assignment_external_id: str, worker: Worker, body: Mapping[str, Any],
                *, as_answers: bool = False) -> lifecycle.Submission:
    """Close a Frames turn and submit it through ``lifecycle.submit_turn``.

    From Frames' pages, ``body`` may carry the closing ``action`` (``utter``) with its ``text``,
    ``complete`` (a user ends the dialog) and the writing ``signals``; with ``as_answers``, the protocol's
    answers instead (the label question, ``response``, ``signals``), which must agree with the events. The
    turn must hold exactly one ``utter``; the stored answers are read off the events. A repeated submit
    returns the stored turn, logging nothing.
    """
    sent = open_submit(session, FRAMES, assignment_external_id, worker, body, as_answers=as_answers)
    if sent is None:
        return submitted_before(session, assignment_external_id, worker, body)
    if not as_answers:
        log_closing_action(session, sent, take_action, ("utter",))
    return close_logged_turn(session, sent, closing=("utter",), holds="exactly one message",
                             ending=("complete", frames_events.BOOK))


# ---- replay ---------------------------------------------------------------------------------------------


def replay(session: Session, conversation_ids: Sequence[int]) -> tuple[int, list[ReplayDifference]]:
    """Run every logged search again on the domain's database as it is now (``frames.events.replay``);
    returns how many searches ran and each one whose results or suggestions differ."""
    replayed, differences = 0, []
    for conversation_id in conversation_ids:
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            raise NotFound(f"no conversation {conversation_id}")
        events = [{"agent": e.agent, "action": e.action, "data": e.data}
                  for e in dialog_events(session, conversation_id)]
        replayed += sum(1 for e in events if e["action"] == frames_events.SEARCH)
        try:
            found = frames_events.replay(domain_of(task_of(session, FRAMES, conversation)).db, events)
        except InvalidInput as error:
            found = [f"a logged search no longer fits the database: {error.field}: {error.reason}"]
        differences += [ReplayDifference(conversation_id, what) for what in found]
    return replayed, differences


# ---- the SGD export -------------------------------------------------------------------------------------


def _slot(c: Mapping[str, Any]) -> str:
    """A condition's SGD slot: the field for "is", ``field_at_least`` / ``field_at_most`` for a range."""
    return c["field"] if c["op"] == "is" else f"{c['field']}_{c['op']}"


def _action(act: str, slot: str = "", values: Sequence[Any] = ()) -> dict[str, Any]:
    shown = [str(v) for v in values]
    return {"act": act, "slot": slot, "values": shown, "canonical_values": shown}


def _kept(events: Sequence[DialogEvent], writers: Mapping[int, int]) -> list[DialogEvent]:
    """The events of the paid turns as submitted: what a worker whose lease ran out logged is left out, with
    the database's answers to their searches."""
    kept, dropping = [], False
    for event in events:
        if event.worker_id is not None:
            dropping = writers.get(event.turn_id) != event.worker_id
        if not dropping:
            kept.append(event)
    return kept


def sgd_dialogue(conversation: Conversation, task: Task, events: Sequence[DialogEvent],
                 items: Mapping[Any, Mapping[str, Any]], answers: Mapping[str, Any]) -> dict[str, Any]:
    """One SGD dialogue from the log. Only what was logged is annotated, so a USER turn carries no slots (the
    text says what the user wants; nobody labelled it) and only ending the dialog, ``GOODBYE``.

    A SYSTEM turn after searches carries the turn's last search: ``service_call`` (its conditions as slot
    values) and ``service_results`` (the items shown), as SGD logs API calls; ``state`` holds the same
    conditions as ``slot_values`` (what the wizard understood the user to want, not a label of the user's
    turn); ``actions`` are ``INFORM`` of each condition's value and ``INFORM_COUNT`` of the items found:
    what the wizard looked up and saw, not a label of what their reply said.

    Beside SGD's keys, ``goal`` is the user's goal as drawn and ``labels`` the end-of-dialog answers under
    the Frames corpus' names (``userSurveyRating``, ``wizardSurveyTaskSuccessful``; None if not answered).
    """
    service = task.domain
    intent = f"search_{service}"
    turns: list[dict[str, Any]] = []
    search: Optional[dict[str, Any]] = None
    found: Optional[dict[str, Any]] = None
    for event in events:
        if event.action == frames_events.SEARCH:
            search, found = event.data, None
        elif event.action == frames_events.RESULTS:
            found = event.data
        elif event.action == "complete" and turns:
            turns[-1]["frames"][0]["actions"].append(_action("GOODBYE"))
        elif event.action == "utter":
            frame: dict[str, Any] = {"service": service, "slots": [], "actions": []}
            if event.agent == frames_events.WIZARD and search is not None:
                values = {_slot(c): [str(c["value"])] for c in search["constraints"]}
                frame["actions"] = [_action("INFORM", slot, shown) for slot, shown in values.items()]
                frame["actions"].append(_action("INFORM_COUNT", "count", [(found or {}).get("total", 0)]))
                frame["service_call"] = {"method": intent,
                                         "parameters": {slot: shown[0] for slot, shown in values.items()}}
                frame["service_results"] = [{k: str(v) for k, v in _row(items[i]).items()}
                                            for i in (found or {}).get("ids", []) if i in items]
                frame["state"] = {"active_intent": intent, "requested_slots": [], "slot_values": values}
                search = found = None
            turns.append({"speaker": "USER" if event.agent == "User" else "SYSTEM",
                          "utterance": event.data.get("Text", ""), "frames": [frame]})
    goal = {k: v for k, v in conversation.scenario.items() if k != "domain"}
    return {"dialogue_id": f"frames_{conversation.id}", "services": [service], "turns": turns, "goal": goal,
            "labels": {"userSurveyRating": answers.get("cooperativity"),
                       "wizardSurveyTaskSuccessful": answers.get("goal_reached")}}


def sgd_dialogues(session: Session, hash_key: str, filters: ExportFilters,
                  page_size: int = 200) -> Iterator[dict[str, Any]]:
    """The selected Frames conversations (``filters``, as the other formats apply them) as SGD dialogues,
    in id order, a page of conversations at a time. Workers are not named in SGD, so ``hash_key`` is unused."""
    for page in conversation_pages(session, FRAMES, filters, page_size):
        ids = [c.id for c, _ in page]
        events = list(session.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids))
                                   .order_by(col(DialogEvent.id))))
        writers = dict(session.exec(select(Turn.id, Turn.worker_id).where(
            col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)).all())
        by_conversation: dict[int, list[DialogEvent]] = {i: [] for i in ids}
        for event in _kept(events, writers):
            by_conversation[event.conversation_id].append(event)
        answers = survey_answers(session, ids)
        for conversation, task in page:
            yield sgd_dialogue(conversation, task, by_conversation[conversation.id], loaded(task).items,
                               answers[conversation.id])


def sgd_services(session: Session, names: set[str]) -> list[dict[str, Any]]:
    """``schema.json`` entries of the Frames domains named: one search intent, a slot per searchable field
    and per range (``price_at_most``), text and yes/no fields with few values as categorical slots."""
    tasks = {t.domain: t for t in session.exec(select(Task).where(Task.protocol == FRAMES.name))
             if t.domain in names}
    services = []
    for name, task in sorted(tasks.items()):
        db = domain_of(task).db
        slots = []
        for field in search_form(db):
            categorical = field["kind"] in ("choice", "boolean")
            possible = [str(v) for v in field["choices"]] if field["kind"] == "choice" else (
                ["True", "False"] if categorical else [])
            slots.append({"name": field["name"], "description": f"{field['name']} is",
                          "is_categorical": categorical, "possible_values": possible})
            if field["kind"] == "range":
                slots += [{"name": f"{field['name']}_{op}", "description": f"{field['name']} {op.replace('_', ' ')}",
                           "is_categorical": False, "possible_values": []} for op in ("at_least", "at_most")]
        services.append({
            "service_name": name, "description": f"Search the {name} database (Frames)", "slots": slots,
            "intents": [{"name": f"search_{name}", "description": f"Find {name} that meet the conditions",
                         "is_transactional": False, "required_slots": [],
                         "optional_slots": {s["name"]: "dontcare" for s in slots},
                         "result_slots": list(db.columns)}]})
    return services


# ---- the analysis: success against each template's probability -------------------------------------------


def survey_answers(session: Session, conversation_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """Each dialog's end-of-dialog answers by question (``cooperativity``, ``goal_reached``)."""
    answers: dict[int, dict[str, Any]] = {i: {} for i in conversation_ids}
    for row in session.exec(select(SurveyAnswer).where(col(SurveyAnswer.conversation_id).in_(list(answers)))):
        answers[row.conversation_id][row.question] = row.answer
    return answers


def booked_items(session: Session, conversations: Sequence[tuple[Conversation, Task]]
                 ) -> dict[int, Optional[dict[str, Any]]]:
    """What each dialog booked, as its database's typed row (None: nothing booked); a booking of a turn that
    was not stored (its lease ran out) does not count."""
    ids = [c.id for c, _ in conversations]
    booked = dict(session.exec(select(DialogEvent.conversation_id, DialogEvent.data).join(
        Turn, (Turn.id == DialogEvent.turn_id) & (Turn.worker_id == DialogEvent.worker_id)).where(
        col(DialogEvent.conversation_id).in_(ids), DialogEvent.action == frames_events.BOOK,
        Turn.status == TurnStatus.submitted)).all())
    found: dict[int, Optional[dict[str, Any]]] = {}
    for c, task in conversations:
        db = domain_of(task).db
        item = booked.get(c.id, {}).get("item")
        found[c.id] = ({k: convert(db.columns[k].type, v) if k in db.columns else v for k, v in item.items()}
                       if item else None)
    return found


def success_summary(session: Session, batch_id: int) -> dict[str, Any]:
    """Per template of the batch's goals (and "all"): how many goals could succeed against the binomial 99%
    interval of the template's probability, how many the wizards judged reached (by the goal's draw and
    what an unsuccessful user was told), what was booked against each goal (meets it, meets only the
    alternate, breaks it, nothing booked) and the users' cooperativity ratings, as plain data."""
    conversations = list(session.exec(select(Conversation, Task).join(Task, Task.id == Conversation.task_id)
                                      .where(Conversation.batch_id == batch_id).order_by(col(Conversation.id))))
    answers = survey_answers(session, [c.id for c, _ in conversations])
    booked = booked_items(session, conversations)
    dialogs = [(goal_from_dict(c.scenario, domain_of(task).db), answers[c.id]) for c, task in conversations]
    rows = []
    for r in success_report(dialogs, [booked[c.id] for c, _ in conversations]):
        rows.append({"template": r.template, "probability": r.probability, "dialogs": r.dialogs,
                     "feasible": r.feasible, "expected": list(r.expected),
                     "feasible_as_expected": r.feasible_as_expected, "judged": r.judged, "reached": r.reached,
                     "reached_share": r.reached_share, "reached_feasible": list(r.reached_feasible),
                     "reached_alternate": list(r.reached_alternate), "reached_ending": list(r.reached_ending),
                     "ratings": {str(k): v for k, v in r.ratings.items()}, "mean_rating": r.mean_rating,
                     "booked": dict(r.booked)})
    return {"batch_id": batch_id, "dialogs": len(dialogs), "templates": rows}


def verified_outcomes(session: Session, conversation_ids: Sequence[int]) -> dict[int, Verified]:
    """Each dialog's success checked against its goal (``registry``'s ``verified_outcomes``): a booking that
    meets the goal, or its alternate, succeeded; one that breaks both failed. Booking nothing succeeded only
    where nothing in the database met the goal nor its alternate (the user was right to end the dialog)."""
    conversations = list(session.exec(select(Conversation, Task).join(Task, Task.id == Conversation.task_id)
                                      .where(col(Conversation.id).in_(list(conversation_ids)))))
    booked = booked_items(session, conversations)
    found = {}
    for c, task in conversations:
        goal = goal_from_dict(c.scenario, domain_of(task).db)
        item = booked[c.id]
        if item is not None:
            judged = judge_booking(goal, item)
            found[c.id] = Verified(judged.outcome in (MEETS_GOAL, MEETS_ALTERNATE), {
                "booked": to_json(item.get("id")), "outcome": judged.outcome,
                "broken": [condition_text(b.as_dict(), domain_of(task)) for b in judged.broken]})
            continue
        possible = goal.matches + (goal.alternate.matches if goal.alternate else 0)
        found[c.id] = Verified(possible == 0, {"booked": None, "outcome": NOT_BOOKED,
                                               "goal_matches": goal.matches, "alternate_matches":
                                               goal.alternate.matches if goal.alternate else None})
    return found
