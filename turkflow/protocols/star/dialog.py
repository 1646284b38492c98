"""STAR dialogs on the asynchronous pipeline: its tasks in the database, scenarios, the event log, replay.

A STAR dialog is STAR's event log (``DialogEvent`` rows), written by one function, ``record_action``, that
the worker pages call while a worker holds a turn. The paid turns stay ``Turn`` rows (one per HIT), each
holding the events its worker wrote:

- a *user* turn: one ``utter``, perhaps followed by ``complete`` (the turn's label is then ``complete``,
  which ends the conversation); the user guide's ``instruct`` nudges due at that turn come before it;
- a *wizard* turn: any number of ``select_task``, ``query`` (the knowledge base answers at once with a
  ``return_item`` event), ``select_primary``/``select_secondary`` (an item of a query's matches) and
  ``request_suggestions``, closed by one ``pick_suggestion`` or ``utter``.

STAR counts a turn as a User utter, a Wizard utter, a pick_suggestion or a query (``star_turns``), so one
paid wizard turn can be several STAR turns. The task schemas and knowledge base come from
``turkflow.protocols.star``; this module is what ties them to the database.

The pages (``turkflow.web.protocols.star``) read ``wizard_view`` and ``user_view``, log through ``take_action`` and
close a turn with ``submit_turn``, which reads the turn's answers off its events before
``lifecycle.submit_turn`` stores it. When a dialog ends, the last worker of each role answers the role's
questionnaire (``turkflow.protocols.surveys``; the questions are protocol data), exported beside the events.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.protocols.registry import (
    ReplayDifference, Verified, close_logged_turn, conversation_pages, dialog_events, log_closing_action, log_page,
    LOG_PAGE, loggable, message_text, open_submit, own_events, submitted_before,
)
from turkflow.errors import InvalidDocument, InvalidInput, NotFound
from turkflow.dataset.export import ExportError, ExportFilters, anonymize, staged, worker_id_hider
from turkflow.hits import lifecycle
from turkflow.models import (
    Agent, Batch, Conversation, ConversationStatus, DialogEvent, Task, Turn, TurnStatus, Worker,
)
from turkflow.protocols import surveys
from turkflow.protocols.questions import STAR, clean_text
from turkflow.protocols.files import read_json
from turkflow.protocols import actions
from turkflow.protocols.star import actions as star_actions
from turkflow.protocols.star import judged, outcomes, verified
from turkflow.protocols.star import scenarios as star_scenarios
from turkflow.protocols.star.kb import (
    FORM_OPS, Api, Column, KnowledgeBase, QueryResult, check_repeats, constraints_from, expression, form_kind,
)
from turkflow.protocols.star.schemas import TaskSchema, load_schemas, parse_schema
from turkflow.protocols.star.suggestions import DialogState, Ranker, Suggestion, fill

KEY_PREFIX = "star:"
AGENTS = {"user": "User", "wizard": "Wizard"}
SYSTEM_ACTIONS = {"return_item": "the knowledge base writes it after a query",
                  "instruct": "the user guide writes it when a user turn opens"}
CLOSING = {"user": ("utter",), "wizard": ("pick_suggestion", "utter")}  # the action that says something
TURN_ACTIONS = {("User", "utter"), ("Wizard", "utter"), ("Wizard", "pick_suggestion"), ("Wizard", "query")}


# ---- tasks --------------------------------------------------------------------------------------------


def _scenario_texts(schema: TaskSchema) -> dict[str, Any]:
    """A task file may carry a ``turkflow`` section: the user's and wizard's task texts and nudges.
    STAR's own files do not; their scenarios then say what the task's name says."""
    section = read_json(schema.source).get("turkflow", {})
    if not isinstance(section, dict):
        raise InvalidDocument(f"{schema.source}: 'turkflow' must be an object")
    readable = schema.name.replace("_", " ")
    texts = {
        "domain": section.get("domain", schema.name.split("_")[0]),
        "user_task": section.get("user_task", f"You want help with this: {readable}."),
        "unhappy_user_task": section.get("unhappy_user_task",
                                         "Change your mind about one thing you asked for, once."),
        "wizard_task": section.get("wizard_task", f"Help the user with this: {readable}."),
        "nudges": section.get("nudges", []),
        **({"user_question": section["user_question"]} if "user_question" in section else {}),
    }
    for key, value in texts.items():
        if key != "nudges" and not (isinstance(value, str) and value.strip()):
            raise InvalidDocument(f"{schema.source}: turkflow.{key} must be non-empty text")
    nudges = texts["nudges"]
    if not isinstance(nudges, list) or not all(
            isinstance(n, dict) and isinstance(n.get("turn"), int) and not isinstance(n.get("turn"), bool)
            and n["turn"] >= 0 and isinstance(n.get("text"), str) and n["text"].strip() for n in nudges):
        raise InvalidDocument(f"{schema.source}: turkflow.nudges must be a list of {{turn: N >= 0, text}}")
    return texts


def kb_dir_for(tasks_dir: Path) -> Path:
    """STAR keeps its knowledge base next to the tasks: ``tasks/`` and ``apis/{apis,dbs}/``."""
    return tasks_dir.resolve().parent / "apis"


@lru_cache(maxsize=8)
def knowledge_base(kb_dir: str) -> KnowledgeBase:
    """The knowledge base in ``kb_dir``, loaded once per process (its rows are drawn from fixed seeds)."""
    return KnowledgeBase.load(Path(kb_dir))


def read_tasks(tasks_dir: Path) -> list[Task]:
    """Every STAR task folder under ``tasks_dir`` as an unsaved ``Task``; any bad file is one
    ``InvalidDocument`` naming it, before anything is written. The knowledge base next to the folder must
    define each task's API."""
    schemas = load_schemas(tasks_dir)
    if not schemas:
        raise InvalidDocument(f"{tasks_dir}: no STAR task folders in it")
    kb_dir = kb_dir_for(tasks_dir)
    kb = knowledge_base(str(kb_dir))
    found = []
    for schema in schemas.values():
        if schema.api not in kb.apis:
            raise InvalidDocument(f"{schema.source}: no API {schema.api!r} in the knowledge base {kb_dir}")
        texts = _scenario_texts(schema)
        found.append(Task(
            key=KEY_PREFIX + schema.name, protocol=STAR.name, title=schema.declared_name,
            domain=texts["domain"], star={
                "task": schema.name, "api": schema.api, "kb_dir": str(kb_dir), "start": schema.graph.start,
                "tasks_dir": str(tasks_dir.resolve()),
                "graph": dict(schema.graph.edges),
                "replies": {t.label: t.text for t in schema.templates.values()},
                "image": schema.image.name if schema.image else None,
                **{k: v for k, v in texts.items() if k != "domain"},
            }))
    return found


# ---- scenarios ------------------------------------------------------------------------------------------


def survey_wording(conversation: Conversation, role: str) -> dict[str, str]:
    """The user's question about the task in STAR's words for the dialog's task (its scenario says which;
    a dialog launched before scenarios held one keeps the generic wording)."""
    question = conversation.scenario.get("task_question")
    return {"task_done": question} if role == "user" and question else {}


def make_scenarios(tasks: Sequence[Task], conversations: int, *, unhappy: float = 0.0,
                   conflicts: float = star_scenarios.CONFLICTS, tasks_per_dialog: int = 1,
                   seed: int = 0) -> list[tuple[Task, dict[str, Any]]]:
    """One scenario per conversation, drawn from its own seed (``scenarios.make_scenario``): tasks that go
    together (a multi-task dialog takes a chain of them), the share ``unhappy`` of them unhappy and, drawn
    apart from it, the share ``conflicts`` whose instructions conflict (STAR's IntroducesConflicts), the
    entities and values the user asks for taken from each task's knowledge base, the wizard's facts and the
    nudges."""
    for name, share in (("unhappy", unhappy), ("conflicts", conflicts)):
        if not 0.0 <= share <= 1.0:
            raise InvalidInput("must be between 0 and 1", name)
    if not 1 <= tasks_per_dialog <= min(5, len(tasks)):
        raise InvalidInput(f"must be between 1 and {min(5, len(tasks))} (the loaded STAR tasks, at most 5)",
                           "tasks_per_dialog")
    by_name = {t.star["task"]: t for t in tasks}
    names = [t.star["task"] for t in tasks]
    # the share asked for, as near as whole conversations allow (not a coin per conversation)
    unhappy_ones = set(random.Random(f"{seed}:star-unhappy").sample(range(conversations),
                                                                     round(unhappy * conversations)))
    conflicting = set(random.Random(f"{seed}:star-conflicts").sample(range(conversations),
                                                                     round(conflicts * conversations)))
    made = []
    for n in range(conversations):
        rng = random.Random(f"{seed}:star-scenario:{n}")
        happy = n not in unhappy_ones
        chosen = [by_name[name] for name in star_scenarios.chain(names, tasks_per_dialog, n, rng)]
        scenario = star_scenarios.make_scenario([t.star for t in chosen],
                                                lambda star: knowledge_base(star["kb_dir"]), rng, happy=happy,
                                                conflicts=n in conflicting)
        made.append((chosen[0], {"tasks": [t.star["task"] for t in chosen],
                                 "domains": list(dict.fromkeys(t.domain for t in chosen)), **scenario}))
    return made


# ---- the event log --------------------------------------------------------------------------------------


def _tasks_of(session: Session, conversation: Conversation) -> dict[str, Task]:
    names = conversation.scenario.get("tasks", [])
    found = {t.star["task"]: t for t in session.exec(
        select(Task).where(col(Task.key).in_([KEY_PREFIX + name for name in names])))}
    return {name: found[name] for name in names if name in found}


def _kb_of(tasks: Mapping[str, Task], api: str) -> KnowledgeBase:
    """The knowledge base of the dialog's task with this API (tasks loaded from different folders each
    keep their own)."""
    task = next((t for t in tasks.values() if t.star["api"] == api), None)
    if task is None:
        raise NotFound(f"no loaded STAR task of this conversation uses the API {api!r}")
    return knowledge_base(task.star["kb_dir"])


def record_action(session: Session, turn: Turn, worker: Worker, action: Any, fields: Mapping[str, Any],
                  kb: Optional[KnowledgeBase] = None) -> list[DialogEvent]:
    """Validate one action of the worker holding ``turn`` and append it to the dialog's log.

    ``fields`` are the action's own (``text``; ``api`` and ``constraints``; ``label``, ``text`` and
    ``options``; ``task``); anything else, a wrong type, an unknown constraint field (through the
    knowledge base's validation) or an action out of order is an ``InvalidInput`` naming the field, and
    nothing is written. A query is answered at once: its ``return_item`` event holds the first match and
    the count, as STAR's knowledge base logged them. ``kb`` overrides the task's knowledge base.
    """
    conversation = loggable(session, STAR, turn, worker)
    form = STAR.form(turn.role)
    if not isinstance(action, str):
        raise InvalidInput("expected the action's name", "action")
    if action in SYSTEM_ACTIONS:
        raise InvalidInput(f"{action} is not sent by a worker: {SYSTEM_ACTIONS[action]}", "action")
    if action not in form.actions:
        raise InvalidInput(f"a {turn.role} can: {', '.join(form.actions)}", "action")
    if not isinstance(fields, Mapping):
        raise InvalidInput("expected the action's fields as an object", "fields")
    fields = actions.typed(star_actions.ROLES, turn.role, action, fields)
    # this holder's own: a worker whose lease ran out may have said something and never submitted it
    earlier = [e.action for e in own_events(session, turn, worker)]
    said = [a for a in earlier if a in CLOSING[turn.role]]
    if turn.role == "user":
        if action == "utter" and said:
            raise InvalidInput("a user turn says one thing; submit it", "action")
        if action == "complete" and (not said or "complete" in earlier):
            raise InvalidInput("say goodbye first, then complete the dialog", "action")
    elif said:
        raise InvalidInput("this turn's reply is already sent; submit it", "action")

    rest = dict(fields)
    agent = AGENTS[turn.role]
    data: dict[str, Any]
    extra: Optional[dict[str, Any]] = None
    tasks = _tasks_of(session, conversation)
    if action in ("utter", "request_suggestions"):
        data = {"Text": message_text(rest, "text", STAR.max_response_chars, required=action == "utter")}
    elif action == "complete":
        data = {}
    elif action == "select_task":
        name = rest.pop("task", None)
        if name not in tasks:
            raise InvalidInput(f"choose one of this dialog's tasks: {', '.join(tasks)}", "task")
        data = {"Task": name}
    elif action == "pick_suggestion":
        label = rest.pop("label", None)
        replies = {label for t in tasks.values() for label in t.star["replies"]}
        if not isinstance(label, str) or label not in replies or label.split("_")[0] == "query":
            raise InvalidInput("not a reply of this dialog's tasks", "label")
        options = rest.pop("options", [label])
        if not isinstance(options, list) or not all(isinstance(o, str) and o in replies for o in options):
            raise InvalidInput("expected a list of this dialog's reply labels", "options")
        text = message_text(rest, "text", STAR.max_response_chars)
        data = {"ActionLabel": label, "ActionLabelOptions": options, "Text": text}
    elif action in SELECTIONS:
        query_id = _whole(rest.pop("query", None), "query")
        position = _whole(rest.pop("position", 0), "position")
        counted = counted_events(session, dialog_events(session, conversation.id), turn, worker.id)
        selected = item_at(counted, tasks, query_id, position, kb)
        data = {"Selected": selected, "Query": query_id, "Position": position}
    else:  # query
        api = rest.pop("api", None)
        apis = {t.star["api"] for t in tasks.values()}
        if api not in apis:
            raise InvalidInput(f"query one of this dialog's APIs: {', '.join(sorted(apis))}", "api")
        constraints = rest.pop("constraints", None)
        if isinstance(constraints, Mapping):
            constraints = [{name: value} for name, value in constraints.items()]
        if not isinstance(constraints, list):
            raise InvalidInput("expected a list of {field: condition}", "constraints")
        knowledge = kb or _kb_of(tasks, api)
        check_repeats(constraints_from(constraints))
        result = (star_scenarios.forced_answer(conversation.scenario, knowledge, api, constraints)
                  or outcomes.call(knowledge, api, constraints))  # validates: an unknown field is named
        data = {"APIName": api, "Constraints": constraints}
        extra = returned_item(result)
    if rest:
        raise InvalidInput("not a field of this action", sorted(rest)[0])

    written = [DialogEvent(conversation_id=conversation.id, turn_id=turn.id, turn_index=turn.index,
                           worker_id=worker.id, agent=agent, action=action, data=data)]
    if extra is not None:
        written.append(DialogEvent(conversation_id=conversation.id, turn_id=turn.id, turn_index=turn.index,
                                   agent="KnowledgeBase", action="return_item", data=extra))
    for event in written:
        session.add(event)
    session.flush()
    return written


def returned_item(result: QueryResult) -> dict[str, Any]:
    """What STAR logged for a query's answer: the item shown and how many there were."""
    item = dict(result.first) if result.first is not None else None
    if item is not None:
        item = {"APIName": result.api, **item}
    return {"APIName": result.api, "Item": item, "TotalItems": result.total}


# ---- the items a wizard browses and selects ---------------------------------------------------------------

SELECTIONS = ("select_primary", "select_secondary")  # STAR's: the item replies describe, one to compare


def _whole(value: Any, name: str) -> int:
    """A query's event id or an item's position, from JSON or a form (digits)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput("expected a whole number", name)
    return value


def counted_events(session: Session, events: list[DialogEvent], turn: Turn,
                   worker_id: Optional[int]) -> list[DialogEvent]:
    """The dialog as it will be exported (``_kept``), without what another worker logged in the turn
    ``worker_id`` holds now (their lease ran out): the events the items' state follows."""
    return [e for e in _kept(session, events)
            if worker_id is None or e.turn_id != turn.id or e.worker_id in (None, worker_id)]


def _answered(events: Sequence[DialogEvent], query_id: int) -> tuple[DialogEvent, dict[str, Any]]:
    """A query of these events and the knowledge base's answer to it."""
    for n, event in enumerate(events):
        if event.id == query_id and event.action == "query":
            answer = next((e.data for e in events[n + 1:] if e.action == "return_item"), None)
            if answer is not None:
                return event, answer
    raise InvalidInput("not a query of this dialog", "query")


def item_at(events: Sequence[DialogEvent], tasks: Mapping[str, Task], query_id: int, position: int,
            kb: Optional[KnowledgeBase] = None) -> dict[str, Any]:
    """The item at ``position`` (0: the one the knowledge base returned) among a logged query's matches.
    The first is the logged one; the others are the query run again (the rows are drawn from fixed
    seeds, so they are the ones the wizard browsed)."""
    query, answer = _answered(events, query_id)
    if position == 0:
        if answer.get("Item") is None:
            raise InvalidInput("the query found nothing", "position")
        return answer["Item"]
    return _match(tasks, query, position, kb)


def _match(tasks: Mapping[str, Task], query: DialogEvent, position: int,
           kb: Optional[KnowledgeBase] = None) -> dict[str, Any]:
    """The query run again: its match at ``position``, as the knowledge base's answer holds an item."""
    api = query.data["APIName"]
    knowledge = kb or _kb_of(tasks, api)
    if not knowledge.api(api).searchable:
        raise InvalidInput("this API books or checks: its answer is the one item", "position")
    result = outcomes.call(knowledge, api, query.data["Constraints"])
    if position >= result.total:
        raise InvalidInput(f"the query found {result.total} item{'' if result.total == 1 else 's'}", "position")
    return json.loads(json.dumps({"APIName": api, **result.items[position]}))  # as stored: tuples are lists


Items = tuple[Optional[dict], Optional[dict]]  # the primary item and the secondary one


def _selecting(event: DialogEvent, items: Items) -> Items:
    """STAR's rule: a query's answer becomes the primary item (none when it found nothing) and clears the
    secondary; ``select_primary``/``select_secondary`` set one."""
    if event.action == "return_item":
        return event.data.get("Item"), None
    if event.action == "select_primary":
        return event.data.get("Selected"), items[1]
    if event.action == "select_secondary":
        return items[0], event.data.get("Selected")
    return items


def item_states(events: Iterable[DialogEvent]) -> Iterator[tuple[DialogEvent, Items]]:
    """Each event with the items selected just before it, as STAR's wizard events carry them."""
    items: Items = (None, None)
    for event in events:
        yield event, items
        items = _selecting(event, items)


def selected_items(events: Iterable[DialogEvent]) -> Items:
    """The primary and secondary items after these events."""
    items: Items = (None, None)
    for event in events:
        items = _selecting(event, items)
    return items


def give_nudges(session: Session, turn: Turn) -> list[DialogEvent]:
    """The user guide's instructions due as this user turn opens, once each, decided from the dialog's
    state (``scenarios.due_nudges``: what the user said so far, whether the wizard got a knowledge-base
    answer since, and whether it said no), never from fixed turn numbers (but a task file's own ``turn``)."""
    if turn.role != "user":
        return []
    conversation = session.get(Conversation, turn.conversation_id)
    nudges = conversation.scenario.get("nudges", [])
    events = dialog_events(session, conversation.id)
    if not nudges or any(e.turn_id == turn.id and e.action == "instruct" for e in events):
        return []
    said = [n for n, e in enumerate(events) if (e.agent, e.action) == ("User", "utter")]
    since = events[said[-1] + 1:] if said else events
    answers = [e.data for e in since if e.action == "return_item"]
    given = [e for e in events if e.action == "instruct"]
    numbered = [dict(n, id=n.get("id", k + 1)) for k, n in enumerate(nudges)]
    due = star_scenarios.due_nudges(
        numbered, {e.data.get("Nudge") for e in given}, turn_index=turn.index, user_turns=len(said),
        result=bool(answers), unwelcome=bool(answers) and star_scenarios.unwelcome(answers[-1].get("Item")))
    written = []
    for number, nudge in enumerate(due, start=len(given) + 1):
        event = DialogEvent(conversation_id=conversation.id, turn_id=turn.id, turn_index=turn.index,
                            agent="UserGuide", action="instruct",
                            data={"Text": f"{nudge['text']} [instruction {number} of {len(nudges)}]",
                                  "Nudge": nudge["id"]})
        session.add(event)
        written.append(event)
    session.flush()
    return written


def star_turns(events: Iterable[DialogEvent]) -> int:
    """STAR's turn count: User utters, Wizard utters, pick_suggestions and queries."""
    return sum(1 for e in events if (e.agent, e.action) in TURN_ACTIONS)


# ---- what the pages show --------------------------------------------------------------------------------

_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,12}")
_TRUTH = {"true": "True", "yes": "True", "false": "False", "no": "False"}


def tasks_dir_of(task: Task) -> Path:
    """The folder the task was loaded from (tasks loaded before it was recorded: next to the knowledge
    base, where STAR keeps them)."""
    return Path(task.star.get("tasks_dir") or Path(task.star["kb_dir"]).parent / "tasks")


def flow_chart_image(task: Task) -> Optional[Path]:
    """The task's flow-chart image: only the file its row names, inside the task's own folder."""
    name = task.star.get("image")
    if task.protocol != STAR.name or not isinstance(name, str) or not name:
        return None
    folder = (tasks_dir_of(task) / task.star["task"]).resolve()
    path = (folder / name).resolve()
    return path if path.parent == folder and path.is_file() else None


@lru_cache(maxsize=64)
def _ranker(name: str, title: str, replies: str, graph: str) -> Ranker:
    schema = parse_schema(Path(f"{name}.json"), {"task": title, "replies": json.loads(replies),
                                                 "graph": json.loads(graph)}, name)
    return Ranker.for_schema(schema)


def ranker_of(task: Task) -> Ranker:
    """The task's suggestion ranker, built from what its row holds (once per process and version)."""
    return _ranker(task.star["task"], task.title, json.dumps(task.star["replies"], sort_keys=True),
                   json.dumps(task.star["graph"], sort_keys=True))


def api_of(task: Task) -> Api:
    return knowledge_base(task.star["kb_dir"]).api(task.star["api"])


OP_LABELS = {"equals": "is", "is_one_of": "is one of", "is_not": "is not", "is_equal_to": "is equal to",
             "is_at_least": "at least", "is_at_most": "at most", "is_greater_than": "more than",
             "is_less_than": "less than", "between": "between", "contains": "contains",
             "contains_not": "does not contain"}
MAX_FORM_VALUES = 100  # of one field (its choices are fewer)
MAX_FORM_CHARS = {"LongString": 1000}  # STAR's long fields hold a message; any other value at most 200


def _max_chars(column: Column) -> int:
    return MAX_FORM_CHARS.get(column.type, 200)


def query_form(task: Task, last: Optional[Sequence[Mapping[str, str]]] = None) -> list[dict[str, Any]]:
    """The knowledge-base form of the task's API: one field per input, with the conditions it can ask
    (``ops``, the first is the default) and its choices; a required field must be given. ``last``: the
    constraints of the dialog's last query of this API, which the form keeps (``op``, ``values``, ``to``),
    as STAR's single wizard's form kept what they had typed: a Book after a Check asks only the request
    type again, whoever writes the next wizard turn."""
    api = api_of(task)
    kept = form_values(api, last or [])
    fields = []
    for column in api.inputs.values():
        kind = form_kind(column)
        choices = [c for c in column.categories or () if isinstance(c, str)] if kind in (
            "choice", "multi", "request") else []
        # "is equal to" asks what "is" asks; STAR's form wrote both, so a post may name it, the list does not
        ops = [{"name": op, "label": OP_LABELS[op]} for op in FORM_OPS[kind] if op != "is_equal_to"]
        fields.append({"name": column.name, "label": column.readable or column.name, "type": column.type,
                       "kind": kind, "choices": choices, "required": column.name in api.required,
                       "ops": ops, "max_chars": _max_chars(column),
                       **kept.get(column.name, {"op": ops[0]["name"] if ops else "equals", "values": [], "to": ""})})
    return fields


def form_values(api: Api, constraints: Sequence[Mapping[str, str]]) -> dict[str, dict[str, Any]]:
    """The form's fields as a query's logged constraints set them (``form_constraints`` read backwards):
    per field its condition, the values as the form writes them, and the end of a "between"."""
    found: dict[str, dict[str, Any]] = {}
    try:
        parsed = constraints_from(constraints)
    except InvalidInput:
        return {}  # a log written by hand that the form cannot show: a blank form, as before
    for c in parsed:
        column = api.inputs.get(c.field)
        if column is None:
            continue
        values = [_form_text(v) for v in (c.value if isinstance(c.value, (list, tuple)) else [c.value])]
        op = "is_not" if c.negated else "equals" if c.op == "is_equal_to" else c.op
        entry = found.setdefault(c.field, {"op": op, "values": [], "to": ""})
        if op == "is_at_most" and entry["op"] == "is_at_least":
            entry.update(op="between", to=values[0])
            continue
        if op in ("is_at_least", "is_at_most") and entry["op"] == "between":
            continue
        entry["values"] += values
    return found


def _form_text(value: Any) -> str:
    """A constraint's value as the form holds it: yes/no for a boolean, digits for a number."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def form_constraints(api: Api, values: Any) -> list[dict[str, str]]:
    """The query form's values as STAR's logged constraints (``{"Genre": '"Novel"'}``,
    ``{"Price": "api.is_at_most(900)"}``). Per field: a plain value (or the form's list of chosen values),
    with ``<Field>.op`` naming the condition (``FORM_OPS``; "equals" when absent) and ``<Field>.to`` the
    end of a "between"; or an object ``{"op", "value"}``, or a list of them. A blank field asks nothing.
    Anything else is an ``InvalidInput`` naming its field."""
    if not isinstance(values, Mapping):
        raise InvalidInput("expected the form's fields as an object", "form")
    for key in values:
        name, _, part = str(key).partition(".")
        if name not in api.inputs or part not in ("", "op", "to"):
            raise InvalidInput(f"no such field in API {api.name!r}", str(key)[:60])
    constraints: list[dict[str, str]] = []
    for name, column in api.inputs.items():
        given, op, to = values.get(name), values.get(f"{name}.op"), values.get(f"{name}.to")
        objects = given if isinstance(given, list) and given and all(
            isinstance(g, Mapping) for g in given) else [given] if isinstance(given, Mapping) else None
        if objects is None:
            constraints += _condition(column, op, given, to)
            continue
        if op is not None or to is not None:
            raise InvalidInput("give the condition as an object or as the form's fields, not both", name)
        for condition in objects:
            unknown = sorted(set(condition) - {"op", "value"})
            if unknown:
                raise InvalidInput(f"a condition has an op and a value, not {unknown[0][:40]!r}", name)
            value = condition.get("value")
            if condition.get("op") == "between" and isinstance(value, list) and len(value) == 2:
                constraints += _condition(column, "between", value[0], value[1])
            elif condition.get("op") == "between":
                raise InvalidInput("between takes two numbers: [from, to]", name)
            else:
                constraints += _condition(column, condition.get("op"), value, None)
    return constraints


def _condition(column: Column, op: Any, given: Any, to: Any) -> list[dict[str, str]]:
    """One field's condition from the form: no constraint when it is blank."""
    name, kind = column.name, form_kind(column)
    op = FORM_OPS[kind][0] if op in (None, "") else op
    if op not in FORM_OPS[kind]:
        offered = ", ".join(OP_LABELS[o] for o in FORM_OPS[kind])
        raise InvalidInput(f"this field can be: {offered}", f"{name}.op")
    raw = given if isinstance(given, list) else [given]
    if len(raw) > MAX_FORM_VALUES:
        raise InvalidInput(f"choose at most {MAX_FORM_VALUES} values", name)
    chosen = [v for v in (_form_value(column, r, name) for r in raw) if v is not None]
    if isinstance(to, list):
        raise InvalidInput("expected one number", f"{name}.to")
    end = _form_value(column, to, f"{name}.to")
    if end is not None and op != "between":
        raise InvalidInput("a second number is for 'between'", f"{name}.to")
    if op == "between":
        if len(chosen) > 1:
            raise InvalidInput("expected one number", name)
        if chosen and end is not None and chosen[0] > end:
            raise InvalidInput(f"between {chosen[0]} and {end}: the second number is the smaller", f"{name}.to")
        return ([{name: expression("is_at_least", chosen[0])}] if chosen else []) + (
            [{name: expression("is_at_most", end)}] if end is not None else [])
    if not chosen:
        return []
    if op == "is_one_of":
        return [{name: expression(op, chosen)}]
    if op in ("contains", "contains_not") and kind == "multi":
        return [{name: expression(op, value)} for value in chosen]
    if len(chosen) > 1:
        raise InvalidInput("choose one value here, or ask 'is one of'", name)
    return [{name: expression(op, chosen[0])}]


def _form_value(column: Column, value: Any, name: str) -> Any:
    """One value typed or chosen in the form, as the field's type holds it; ``None`` when blank."""
    if isinstance(value, bool) and column.type == "Boolean":
        return value
    if isinstance(value, int) and not isinstance(value, bool) and column.type == "Integer":
        value = str(value)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput("expected text", name)
    value = clean_text(value, name)
    if not value:
        return None
    if len(value) > _max_chars(column):
        raise InvalidInput(f"write at most {_max_chars(column)} characters", name)
    if column.type == "Integer":
        if not _WHOLE_NUMBER.fullmatch(value):
            raise InvalidInput(f"expected a whole number, got {value[:40]!r}", name)
        return int(value)
    if column.type == "Boolean":
        if value.lower() not in _TRUTH:
            raise InvalidInput("expected yes or no", name)
        return _TRUTH[value.lower()] == "True"
    if form_kind(column) in ("choice", "multi", "request") and value not in column.categories:
        shown = ", ".join(str(c) for c in column.categories[:8])
        more = ", ..." if len(column.categories) > 8 else ""
        raise InvalidInput(f"{value[:40]!r} is not one of the choices ({shown}{more})", name)
    return value


def dialog_state(events: Sequence[DialogEvent], task: Task, draft: str = "") -> DialogState:
    """Where the task's flow chart stands after these events, for ranking its replies."""
    replies, api = task.star["replies"], task.star["api"]
    last_label, queried, nothing_found, user_text = None, False, False, ""
    item: Optional[dict[str, Any]] = None
    used: list[str] = []
    for event in events:
        if event.action == "pick_suggestion" and event.data.get("ActionLabel") in replies:
            last_label, queried = event.data["ActionLabel"], False
            used.append(last_label)
        elif event.action == "query" and event.data.get("APIName") == api:
            queried = True
        elif event.action == "return_item" and event.data.get("APIName") == api:
            found = event.data.get("Item")
            nothing_found = found is None
            if found is not None:
                item = {k: v for k, v in found.items() if k != "APIName"}
        elif event.action == "select_primary" and (event.data.get("Selected") or {}).get("APIName") == api:
            item = {k: v for k, v in event.data["Selected"].items() if k != "APIName"}  # replies describe it
        elif (event.agent, event.action) == ("User", "utter"):
            user_text = event.data.get("Text", "")
    return DialogState(last_label=last_label, queried=queried, nothing_found=nothing_found,
                       user_text=user_text, draft=draft, item=item, used=tuple(used))


def _chains(graph: Mapping[str, str], start: str) -> list[list[str]]:
    """The flow chart as paths to draw: from the start, then from each node nothing leads to."""
    targets = set(graph.values())
    roots = [start] + [n for n in graph if n not in targets and n != start]
    chains, seen = [], set()
    for root in roots:
        chain, node = [], root
        while node is not None and node not in seen:
            seen.add(node)
            chain.append(node)
            node = graph.get(node)
        if node is not None:  # joins a path drawn already
            chain.append(node)
        chains.append(chain)
    return chains


def open_task_name(events: Sequence[DialogEvent], tasks: Mapping[str, Task]) -> str:
    """The task tab the wizards last opened in this dialog, else its first task."""
    chosen = [e.data["Task"] for e in events if e.action == "select_task" and e.data.get("Task") in tasks]
    return chosen[-1] if chosen else next(iter(tasks))


def _kb_log(events: Sequence[DialogEvent], tasks: Mapping[str, Task],
            browse: Optional[tuple[int, int]] = None) -> list[dict[str, Any]]:
    """Every query of the dialog and what the knowledge base returned, newest first: the first match, or
    the one at ``browse``'s position for its query (its id). A search's matches can be browsed."""
    log = []
    for n, event in enumerate(events):
        if event.action != "query":
            continue
        answer = next((e.data for e in events[n + 1:] if e.action == "return_item"), {})
        item, position = answer.get("Item"), 0
        if browse is not None and browse[0] == event.id:
            position = browse[1]
            item = item_at(events, tasks, event.id, position)
        total = answer.get("TotalItems", 0)
        log.append({"event_id": event.id, "turn_index": event.turn_index, "api": event.data["APIName"],
                    "constraints": event.data["Constraints"],
                    "item": {k: v for k, v in item.items() if k != "APIName"} if item else None,
                    "total": total, "position": position,
                    "browsable": _searchable(tasks, event.data["APIName"]) and total > 1})
    return log[::-1]


def _searchable(tasks: Mapping[str, Task], api: str) -> bool:
    try:
        return _kb_of(tasks, api).api(api).searchable
    except (NotFound, InvalidInput):
        return False


def _shown_item(item: Optional[dict]) -> Optional[dict[str, Any]]:
    """A selected item as the page shows it: its API and its fields."""
    if item is None:
        return None
    return {"api": item.get("APIName"), "item": {k: v for k, v in item.items() if k != "APIName"}}


def _suggestion(s: Suggestion) -> dict[str, Any]:
    return {"label": s.label, "text": s.text, "missing": list(s.missing)}


def wizard_view(session: Session, turn: Turn, draft: str = "", worker_id: Optional[int] = None,
                browse: Optional[tuple[int, int]] = None, older: int = 0) -> dict[str, Any]:
    """Everything the wizard's page shows: the task tabs, the open task's chart with the position, its
    knowledge-base form, the dialog's queries and their results a page (``log_page``) at a time from the
    ``older``-th newest (``browse``: a query's id and the position of the match to show, on the page that
    holds it), the primary and secondary items, the ranked replies (filled with the last item) and what this
    turn has done so far (``worker_id``'s actions, when given: the turn's holder)."""
    conversation = session.get(Conversation, turn.conversation_id)
    tasks = _tasks_of(session, conversation)
    if not tasks:
        raise NotFound("this dialog's STAR tasks are not loaded")
    events = dialog_events(session, conversation.id)
    name = open_task_name(events, tasks)
    task = tasks[name]
    state = dialog_state(events, task, draft)
    shown = session.exec(select(Batch.suggestions_shown).where(Batch.id == conversation.batch_id)).one()
    suggestions = ranker_of(task).rank(state, limit=shown)
    mine = [e for e in events if e.turn_id == turn.id and e.worker_id is not None
            and (worker_id is None or e.worker_id == worker_id)]
    counted = counted_events(session, events, turn, worker_id)
    return {
        "tasks": [{"name": n, "title": t.title, "open": n == name} for n, t in tasks.items()],
        "task": {"name": name, "title": task.title, "api": task.star["api"], "id": task.id,
                 "has_image": flow_chart_image(task) is not None, "wizard_task": conversation.scenario.get(
                     "wizard_task", task.star.get("wizard_task", ""))},
        "chart": {"chains": _chains(task.star["graph"], task.star["start"]), "current": state.last_label,
                  "replies": task.star["replies"]},
        "form": query_form(task, next((e.data.get("Constraints") for e in reversed(events) if e.action == "query"
                                       and e.data.get("APIName") == task.star["api"]), None)),
        **_queries_shown(_kb_log(counted, tasks, browse), older, browse),
        "selected": dict(zip(("primary", "secondary"), map(_shown_item, selected_items(counted)))),
        "item": state.item,
        "suggestions": [_suggestion(s) for s in suggestions],
        "this_turn": [{"action": e.action, **{k: v for k, v in e.data.items() if k in ("Text", "Task")}}
                      for e in mine],
        "replied": any(e.action in CLOSING["wizard"] for e in mine),
    }


def _queries_shown(log: list[dict[str, Any]], older: int, browse: Optional[tuple[int, int]]) -> dict[str, Any]:
    """A page of the dialog's queries: the one holding the browsed query, else the ``older``-th newest on (a turn
    of many queries made the next wizard's page huge)."""
    browsed = next((n for n, entry in enumerate(log) if browse and entry["event_id"] == browse[0]), None)
    page = log_page(log, older if browsed is None else browsed - browsed % LOG_PAGE)
    return {"kb_log": page.entries, "kb_total": page.total, "older_queries": page.older,
            "newer_queries": page.newer}


def user_view(session: Session, turn: Turn) -> dict[str, Any]:
    """The user's page: the scenario and the user guide's instructions, never the knowledge base."""
    conversation = session.get(Conversation, turn.conversation_id)
    scenario = conversation.scenario
    nudges = session.exec(select(DialogEvent).where(DialogEvent.conversation_id == conversation.id,
                                                    DialogEvent.action == "instruct")
                          .order_by(col(DialogEvent.id)))
    return {
        "scenario": {"task": scenario.get("user_task", ""), "happy": scenario.get("happy", True),
                     "multi_task": scenario.get("multi_task", False),
                     "tasks": len(scenario.get("tasks", [])), "personality": scenario.get("personality"),
                     "details": scenario.get("user_details") or {}},
        "nudges": [{"text": e.data.get("Text", ""), "turn_index": e.turn_index, "new": e.turn_id == turn.id}
                   for e in nudges],
    }


def take_action(session: Session, turn: Turn, worker: Worker, action: Any,
                fields: Mapping[str, Any]) -> list[DialogEvent]:
    """``record_action`` as the pages call it: a query may come as the form's plain values (``form``), and
    a picked reply without ``text`` is filled here from the dialog's last item, as the page showed it."""
    rest = actions.typed(star_actions.ROLES, turn.role, action, fields)
    if action == "query" and "form" in rest:
        if "constraints" in rest:
            raise InvalidInput("send the form or the constraints, not both", "constraints")
        conversation = session.get(Conversation, turn.conversation_id)
        task = next((t for t in _tasks_of(session, conversation).values()
                     if t.star["api"] == rest.get("api")), None)
        if task is None:
            raise InvalidInput("query one of this dialog's APIs", "api")
        rest["constraints"] = form_constraints(api_of(task), rest.pop("form"))
    if action == "pick_suggestion":
        rest["options"] = _options_shown(session, turn, worker, rest.get("label"), rest.get("options"))
    if action == "pick_suggestion" and rest.get("text") in (None, ""):
        rest["text"] = _filled_reply(session, turn, rest.get("label"))
    return record_action(session, turn, worker, action, rest)


def _options_shown(session: Session, turn: Turn, worker: Worker, label: Any, sent: Any) -> Any:
    """STAR's ``ActionLabelOptions``: the replies the wizard could pick from, as the page showed them
    (ranked for the draft this turn last asked suggestions for). Options the page sent keep their order,
    less any it showed disabled (a reply missing an item's slots cannot be picked); none sent, the page's."""
    drafts = [e.data.get("Text", "") for e in dialog_events(session, turn.conversation_id)
              if e.turn_id == turn.id and e.worker_id == worker.id and e.action == "request_suggestions"]
    shown = wizard_view(session, turn, drafts[-1] if drafts else "", worker_id=worker.id)["suggestions"]
    if isinstance(sent, list):
        disabled = {s["label"] for s in shown if s["missing"]} - {label}
        return [o for o in sent if o not in disabled]
    if sent is not None:
        return sent  # record_action names the field
    pickable = [s["label"] for s in shown if not s["missing"]]
    return pickable if label in pickable or not isinstance(label, str) else pickable + [label]


def _filled_reply(session: Session, turn: Turn, label: Any) -> str:
    conversation = session.get(Conversation, turn.conversation_id)
    tasks = _tasks_of(session, conversation)
    task = next((t for t in tasks.values() if isinstance(label, str) and label in t.star["replies"]), None)
    if task is None:
        raise InvalidInput("not a reply of this dialog's tasks", "label")
    template = ranker_of(task).schema.templates[label]
    text, missing = fill(template, dialog_state(dialog_events(session, conversation.id), task).item)
    if missing:
        raise InvalidInput(f"this reply needs a knowledge-base item with {', '.join(missing)}: query first, "
                           "or write your own reply", "label")
    return text


# ---- submitting a turn ----------------------------------------------------------------------------------

def submit_turn(session: Session, assignment_external_id: str, worker: Worker, body: Mapping[str, Any],
                *, as_answers: bool = False) -> lifecycle.Submission:
    """Close a STAR turn and submit it through ``lifecycle.submit_turn`` (the path every turn takes).

    From STAR's pages, ``body`` may carry the closing action to log now (``action`` with its ``text``,
    ``label``, ``options``), ``complete`` (a user ends the dialog) and the writing ``signals``. With
    ``as_answers`` it holds the protocol's own answers instead (the label question, ``response``,
    ``signals``), as the generic turn route sends them. The turn must then hold exactly one closing action
    (a wizard's ``pick_suggestion`` or ``utter``, a user's ``utter``) and answers given must agree with it:
    the stored answers are read off the events. A repeated submit returns the stored turn, logging nothing.
    """
    sent = open_submit(session, STAR, assignment_external_id, worker, body, as_answers=as_answers)
    if sent is None:
        return submitted_before(session, assignment_external_id, worker, body)
    closing = CLOSING[sent.turn.role]
    give_nudges(session, sent.turn)
    if not as_answers:
        log_closing_action(session, sent, take_action, closing)
    return close_logged_turn(session, sent, closing=closing, holds=f"exactly one {' or '.join(closing)}")


# ---- what judges a writer (STAR has no peer ratings) ------------------------------------------------------


def judged_turn(session: Session, turn: Turn) -> list[judged.Judged]:
    """The signals a submitted turn gives about its writer (``judged``): its content, and a wizard reply's
    agreement with the knowledge base. The pipeline passes them to the quality monitor."""
    tasks = _tasks_of(session, session.get(Conversation, turn.conversation_id))
    polarity = {name: ranker_of(task).facts.polarity for name, task in tasks.items()}
    searchable = {t.star["api"]: api_of(t).searchable for t in tasks.values()}
    return judged.turn_signals(turn, _kept(session, dialog_events(session, turn.conversation_id)), tasks, polarity,
                               searchable)


judged_survey = judged.judged_survey  # a worker's end-of-dialog answers, about the other role's writers


def slot_values(session: Session, turn: Turn) -> Optional[frozenset[str]]:
    """For a user turn that answers the wizard's question (the last reply asks something: a name, a day, a
    code), the values the dialog's knowledge-base forms offer, lowercase: a short answer naming one, or
    shaped like a name or a code, is an answer (``turkflow.quality.checks.short_value``). None otherwise."""
    if turn.role != "user":
        return None
    said = [e for e in dialog_events(session, turn.conversation_id)
            if e.agent == AGENTS["wizard"] and e.action in CLOSING["wizard"] and e.turn_index < turn.index]
    if not said or "?" not in said[-1].data.get("Text", ""):
        return None
    tasks = _tasks_of(session, session.get(Conversation, turn.conversation_id))
    return frozenset(choice.lower() for task in tasks.values() for field in query_form(task)
                     for choice in field["choices"])


# ---- success against the goal ---------------------------------------------------------------------------


def verified_outcomes(session: Session, conversation_ids: Sequence[int]) -> dict[int, Verified]:
    """Each dialog's success checked against its scenario (``registry``'s ``verified_outcomes``;
    ``star.verified``): every task reached the outcome the knowledge base allows. A dialog whose scenario
    names no values (made before scenarios did) has no verdict."""
    found = {}
    for conversation in session.exec(select(Conversation).where(col(Conversation.id).in_(list(conversation_ids)))):
        plans = conversation.scenario.get("plans")
        tasks = _tasks_of(session, conversation)
        if not plans or not tasks:
            continue
        events = _kept(session, dialog_events(session, conversation.id))
        done = [verified.task_verdict(plan, events, _books(tasks, plan["api"])) for plan in plans]
        found[conversation.id] = Verified(all(ok for ok, _ in done), {"tasks": [shown for _, shown in done]})
    return found


def _books(tasks: Mapping[str, Task], api: str) -> bool:
    """Whether ``api`` takes a RequestType (a check or a booking): its task is done by a booking."""
    try:
        return any(c.type == "RequestType" for c in _kb_of(tasks, api).api(api).inputs.values())
    except (NotFound, InvalidInput):
        return False


# ---- replay ---------------------------------------------------------------------------------------------


def replay(session: Session, conversation_ids: Sequence[int],
           kb: Optional[KnowledgeBase] = None) -> tuple[int, list[ReplayDifference]]:
    """Run every logged query again and compare with the ``return_item`` the wizard saw; find every
    selected item again among its query's matches.

    Returns how many queries and selections were replayed and each one whose answer differs now.
    """
    replayed, differences = 0, []
    for conversation_id in conversation_ids:
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            raise NotFound(f"no conversation {conversation_id}")
        tasks = _tasks_of(session, conversation)
        events = dialog_events(session, conversation_id)
        for n, event in enumerate(events):
            if event.action in SELECTIONS:
                replayed += 1
                differences += _replay_selection(conversation_id, events, tasks, event, kb)
                continue
            if event.action != "query":
                continue
            logged = next((e.data for e in events[n + 1:] if e.action == "return_item"), None)
            try:
                knowledge = kb or _kb_of(tasks, event.data["APIName"])
                answer = (star_scenarios.forced_answer(conversation.scenario, knowledge, event.data["APIName"],
                                                       event.data["Constraints"])
                          or outcomes.call(knowledge, event.data["APIName"], event.data["Constraints"]))
                now: Any = json.loads(json.dumps(returned_item(answer)))  # as stored: tuples are lists
            except InvalidInput as error:
                now = {"error": error.message}
            replayed += 1
            if now != logged:
                differences.append(ReplayDifference(conversation_id, (
                    f"query {event.id} to {event.data['APIName']} {json.dumps(event.data['Constraints'])}: "
                    f"the wizard saw {json.dumps(logged, default=str)}, now {json.dumps(now, default=str)}"),
                    event_id=event.id))
    return replayed, differences


def _replay_selection(conversation_id: int, events: Sequence[DialogEvent], tasks: Mapping[str, Task],
                      event: DialogEvent, kb: Optional[KnowledgeBase]) -> list[ReplayDifference]:
    """A selected item, found again at its position among its query's matches (the first is the logged
    answer, which the query's own replay checks)."""
    try:
        now: Any = item_at(events, tasks, event.data["Query"], event.data["Position"], kb)
    except (InvalidInput, NotFound) as error:
        now = {"error": error.message}
    if now == event.data["Selected"]:
        return []
    return [ReplayDifference(conversation_id, (
        f"{event.action} {event.id} (query {event.data['Query']}, item {event.data['Position'] + 1}): "
        f"the wizard selected {json.dumps(event.data['Selected'], default=str)}, now {json.dumps(now, default=str)}"),
        event_id=event.id)]


# ---- export in STAR's format ----------------------------------------------------------------------------

STAR_FORMAT_VERSION = 7  # the version of STAR's dialogues/N.json this export follows
# STAR's CompletionLevel values (its training split has these four); an early disconnect left fewer turns
COMPLETE, EARLY_DISCONNECT, DISCONNECT = "Complete", "EarlyDisconnectDuringDialogue", "DisconnectDuringDialogue"
IN_PROGRESS = "InProgress"  # ours: a dialog still being written (STAR exported only finished sessions)
EARLY_TURNS = 5  # STAR's early disconnects left a median of 0 turns, its other disconnects at least 5
EVENT_FIELDS = ("Text", "APIName", "Constraints", "Item", "TotalItems", "ActionLabel", "ActionLabelOptions",
                "Task")


def star_documents(session: Session, hash_key: str, filters: ExportFilters,
                   page_size: int = 200) -> Iterator[dict[str, Any]]:
    """One STAR dialogue document per conversation, in id order, a page of conversations at a time.

    Events are STAR's, in the order they were written, with ``UnixTime``; each also names its turkflow
    turn (``Turn``) and, for a worker's event, the worker's keyed hash (``AnonymizedWorkerID``), since
    several people write one asynchronous dialog. STAR had one worker per role: its top-level ids here
    are the worker who wrote most of the role's events, and ``AnonymizedUserWorkerIDs`` /
    ``AnonymizedWizardWorkerIDs`` list every worker of the role in the order they joined. A conversation
    nobody has written in yet is not a STAR dialogue and is left out; one still going is written with
    the level ``IN_PROGRESS`` (not a disconnect), and ``TurkflowStatus`` says it is still active.
    """
    for page in conversation_pages(session, STAR, filters, page_size):
        ids = [c.id for c, _ in page]
        events = list(session.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids))
                                   .order_by(col(DialogEvent.id))))
        workers = {w.id: w for w in session.exec(select(Worker).where(
            col(Worker.id).in_({e.worker_id for e in events if e.worker_id is not None})))}
        hashes = {w.id: anonymize(hash_key, w.external_id) for w in workers.values()}
        tasks = {t.star.get("task"): t for t in session.exec(select(Task).where(Task.protocol == STAR.name))}
        by_conversation: dict[int, list[DialogEvent]] = {i: [] for i in ids}
        for event in _kept(session, events):
            by_conversation[event.conversation_id].append(event)
        answers = surveys.questionnaires(session, ids)
        for conversation, _ in page:
            if not any(e.worker_id is not None for e in by_conversation[conversation.id]):
                continue  # never started: nothing of STAR's in it
            yield _star_document(session, conversation, by_conversation[conversation.id], hashes,
                                 tasks, answers[conversation.id])


def _kept(session: Session, events: list[DialogEvent]) -> list[DialogEvent]:
    """The events of the dialog as written: what a worker logged in a turn that another worker then took
    over and submitted (the first one's lease ran out) is left out, with the knowledge base's answers to
    its queries."""
    writers = dict(session.exec(select(Turn.id, Turn.worker_id).where(
        col(Turn.id).in_({e.turn_id for e in events if e.turn_id is not None}),
        Turn.status == TurnStatus.submitted)).all())
    kept, dropping_answer = [], False
    for event in events:
        writer = writers.get(event.turn_id)
        if event.worker_id is not None:
            dropped = writer is not None and event.worker_id != writer
            dropping_answer = dropped and event.action == "query"
            if dropped:
                continue
        elif event.action == "return_item" and dropping_answer:
            dropping_answer = False
            continue
        kept.append(event)
    return kept


def _star_document(session: Session, conversation: Conversation, events: list[DialogEvent],
                   hashes: dict[int, str], tasks: Mapping[str, Task],
                   answers: Mapping[str, list]) -> dict[str, Any]:
    scenario = conversation.scenario
    agents = dict(session.exec(select(Agent.worker_id, Agent.name).where(
        col(Agent.worker_id).in_({e.worker_id for e in events if e.worker_id is not None}))).all())
    workers = {agent: Counter(hashes[e.worker_id] for e in events if e.agent == agent and e.worker_id)
               for agent in ("User", "Wizard")}
    main = {agent: max(counts, key=counts.__getitem__) if counts else None  # ties: the first to join
            for agent, counts in workers.items()}
    logged = []
    for event, items in item_states(events):
        entry: dict[str, Any] = {"Action": event.action, "Agent": event.agent}
        for key in EVENT_FIELDS:
            if key in event.data:
                entry[key] = event.data[key]
        if event.agent == "Wizard":  # the items selected as it happened, as STAR's wizard events carry them
            entry.update((k, v) for k, v in zip(("PrimaryItem", "SecondaryItem"), items) if v is not None)
        if event.action == "return_item":
            entry.pop("Item", None)
            entry.update(_star_answer(event.data, tasks))
        else:  # STAR's knowledge base answers carry no time
            entry["UnixTime"] = int(_aware(event.at).timestamp())
        entry["Turn"] = event.turn_index
        if event.worker_id is not None:
            entry["AnonymizedWorkerID"] = hashes[event.worker_id]
            if event.worker_id in agents:  # written by an agent (turkflow agents), not a person
                entry["TurkflowAgent"] = agents[event.worker_id]
        logged.append(entry)
    level = completion_level(conversation.status, star_turns(events))
    capabilities = [{"Domain": tasks[name].domain if name in tasks else None, "Task": name,
                     "SchemaImage": tasks[name].star.get("image") if name in tasks else None}
                    for name in scenario.get("tasks", [])]
    batch = session.get(Batch, conversation.batch_id)
    return {
        "FORMAT-VERSION": STAR_FORMAT_VERSION,
        "DialogueID": conversation.id,
        "BatchID": f"turkflow_{batch.id}",
        "CompletionLevel": level,
        "IntroducesConflicts": scenario.get("conflicts", False),
        "TurkflowStatus": conversation.status,
        "AnonymizedUserWorkerID": main["User"],
        "AnonymizedWizardWorkerID": main["Wizard"],
        "AnonymizedUserWorkerIDs": list(workers["User"]),
        "AnonymizedWizardWorkerIDs": list(workers["Wizard"]),
        "Scenario": {
            "Domains": scenario.get("domains", []),
            "Happy": scenario.get("happy", True),
            "MultiTask": scenario.get("multi_task", False),
            "UserTask": "\n\n".join(t for t in (scenario.get("user_task", ""),
                                                  star_scenarios.about_you(scenario.get("user_details") or {}))
                                      if t),
            "WizardCapabilities": capabilities,
            "WizardTask": scenario.get("wizard_task", ""),
        },
        "UserQuestionnaire": answers["user"],
        "WizardQuestionnaire": answers["wizard"],
        "Events": logged,
    }


def completion_level(status: str, turns: int) -> str:
    """STAR's CompletionLevel (one of the values its dialogues hold): Complete when the conversation ended
    (the user completed it, or it reached the batch's turn limit); a cancelled one stopped during the
    dialogue, early when under EARLY_TURNS STAR turns. A dialog still being written has disconnected from
    nothing: it is IN_PROGRESS (a reader that keeps STAR's Complete dialogues leaves it out, as it should).
    The end-of-dialog answers come asynchronously here, so a missing one is no disconnect (STAR's
    DisconnectDuringQuestionnaire is not written)."""
    if status == ConversationStatus.completed:
        return COMPLETE
    if status == ConversationStatus.active:
        return IN_PROGRESS
    return EARLY_DISCONNECT if turns < EARLY_TURNS else DISCONNECT


def _star_answer(data: Mapping[str, Any], tasks: Mapping[str, Task]) -> dict[str, Any]:
    """A knowledge-base answer as STAR logged it: ``TotalItems`` -1 for an API that books or checks (it
    has no rows to count), the count for a search; no ``Item`` when nothing was found."""
    answer: dict[str, Any] = {"APIName": data.get("APIName")}
    if data.get("Item") is not None:
        answer["Item"] = data["Item"]
    task = next((t for t in tasks.values() if t.star.get("api") == data.get("APIName")), None)
    searchable = True
    if task is not None:
        try:
            searchable = knowledge_base(task.star["kb_dir"]).api(task.star["api"]).searchable
        except (InvalidInput, InvalidDocument, OSError):
            searchable = True
    total = data.get("TotalItems", 0)
    answer["TotalItems"] = -1 if not searchable and total else total
    return answer


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class StarExportSummary:
    out_dir: Path
    dialogues: int
    turns: int  # STAR's count (star_turns) over the complete dialogues, the ones STAR's readers count


def export_star(session: Session, out_dir: Path, *, hash_key: str, filters: ExportFilters = ExportFilters(),
                on_document: Optional[Callable[[dict[str, Any]], None]] = None) -> StarExportSummary:
    """Write ``dialogues/<id>.json`` into ``out_dir``, assembled in a hidden sibling directory that takes
    the target's name only when complete (as ``turkflow.dataset.export.write_export`` does)."""
    if not hash_key:
        raise ExportError("no worker hash key configured; set TURKFLOW_WORKER_HASH_KEY")
    out_dir = Path(out_dir)
    dialogues = turns = 0
    hide = worker_id_hider(session, hash_key)
    with staged(out_dir) as staging:
        (staging / "dialogues").mkdir()
        for doc in map(hide, star_documents(session, hash_key, filters)):
            (staging / "dialogues" / f"{doc['DialogueID']}.json").write_text(
                json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            dialogues += 1
            if doc["CompletionLevel"] == COMPLETE:
                turns += sum(1 for e in doc["Events"] if (e["Agent"], e["Action"]) in TURN_ACTIONS)
            if on_document is not None:
                on_document(doc)
    return StarExportSummary(out_dir=out_dir, dialogues=dialogues, turns=turns)
