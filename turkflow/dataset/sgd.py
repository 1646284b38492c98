"""``turkflow export --format sgd``: conversations in the Schema-Guided Dialogue format (Rastogi et al.
2020; the files in ``../shared/data/sgd``): ``dialogues_NNN.json`` files, each a list of dialogues
(``dialogue_id``, ``services``, ``turns`` with ``speaker``, ``utterance`` and ``frames``), and
``schema.json``, the services the exported tasks define.

SGD alternates a USER and a SYSTEM turn, and annotates each with its service's frame. How turkflow's
protocols map onto it:

- **Wizard of Tasks**: a task is a service (its key); the student speaks as USER and the teacher as
  SYSTEM. A turn's label is its one action (the label upper-cased, SGD's act); the document items a
  teacher shared are INFORM actions on the slot ``document_item``.
- **STAR**: the dialog's tasks are its services; a User ``utter`` is a USER turn, a Wizard
  ``pick_suggestion`` or ``utter`` a SYSTEM turn (a picked reply's act is its label, a reply the wizard
  wrote has none). A knowledge-base query and the item it returned are the next SYSTEM turn's
  ``service_call`` and ``service_results``, the way SGD logs its API calls. A STAR task's slots are its
  API's form fields, drop-downs as categorical slots.

- **Frames**: its dialog module converts its log (searches as ``service_call`` and ``service_results``), and
  the actions of every turn come from annotation only (``with_annotated_acts``: an annotation batch's
  labels, or none), never from what was logged.

Both come from the other formats' documents (``export.iter_conversations``, ``star.dialog.star_documents``),
so filters, blocked workers' turns and worker ids are handled once. Frames' and MEEP's dialog modules convert
their own logs (``sgd_dialogues`` and ``sgd_services``, ``turkflow.protocols.registry``), with ``sgd_frame`` and ``sgd_action``
from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from sqlmodel import Session, col, select

from turkflow.protocols import registry
from turkflow.errors import InvalidDocument
from turkflow.dataset.export import (
    ExportError, ExportFilters, PiiScrubber, iter_conversations, staged, worker_id_hider,
)
from turkflow.models import Agent, ConversationAgent, Task
from turkflow.models import Turn, TurnStatus
from turkflow.protocols.annotate.results import labels_of_turns, scheme_names
from turkflow.protocols.questions import FRAMES, STAR, WIZARD_OF_TASKS
from turkflow.protocols.star.dialog import knowledge_base, star_documents

DIALOGUES_PER_FILE = 128  # as SGD's own files hold about that many
SPEAKERS = {"student": "USER", "teacher": "SYSTEM", "User": "USER", "Wizard": "SYSTEM"}
OWN_CONVERTERS = tuple(p.name for p in registry.LOGGED.values()  # their modules convert them
                       if p.dialog and p.name != STAR.name)
ANNOTATED = (FRAMES.name,)  # protocols whose SGD acts come from annotation only (annotate batches)


@dataclass(frozen=True)
class SgdExportSummary:
    out_dir: Path
    dialogues: int
    turns: int


def sgd_frame(service: str, actions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"service": service, "slots": [], "actions": actions}


def sgd_action(act: str, slot: str = "", values: Iterable[str] = ()) -> dict[str, Any]:
    values = [str(v) for v in values]
    return {"act": act, "slot": slot, "values": values, "canonical_values": values}


def from_wizard_of_tasks(doc: dict[str, Any]) -> dict[str, Any]:
    """An SGD dialogue from a turkflow export document."""
    service = doc["task"]["key"]
    turns = []
    for turn in doc["turns"]:
        actions = [sgd_action(turn["label"].upper())] if turn["label"] else []
        actions += [sgd_action("INFORM", "document_item", [item["id"]]) for item in turn["shared"]]
        turns.append({"speaker": SPEAKERS[turn["role"]], "utterance": turn["text"],
                      "frames": [sgd_frame(service, actions)]})
    return {"dialogue_id": f"{doc['conversation_id']}", "services": [service], "turns": turns}


def from_star(doc: dict[str, Any]) -> dict[str, Any]:
    """An SGD dialogue from a STAR dialogue document (its event log)."""
    services = [c["Task"] for c in doc["Scenario"].get("WizardCapabilities", [])]
    service = services[0] if services else "star"
    turns: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []  # queries waiting for the wizard's next reply
    for event in doc["Events"]:
        agent, action = event["Agent"], event["Action"]
        if action == "select_task" and event.get("Task"):
            service = event["Task"]
        elif agent == "Wizard" and action == "query":
            calls.append({"method": event.get("APIName", ""), "parameters": _parameters(event),
                          "results": []})
        elif agent == "KnowledgeBase" and action == "return_item" and calls:
            calls[-1]["results"] = [event["Item"]] if event.get("Item") else []
        elif (agent, action) in (("User", "utter"), ("Wizard", "utter"), ("Wizard", "pick_suggestion")):
            label = event.get("ActionLabel") if action == "pick_suggestion" else None
            frame = sgd_frame(service, [sgd_action(label.upper())] if label else [])
            if agent == "Wizard" and calls:
                frame["service_call"] = {"method": calls[-1]["method"], "parameters": calls[-1]["parameters"]}
                frame["service_results"] = calls[-1]["results"]
                calls = []
            turns.append({"speaker": SPEAKERS[agent], "utterance": event.get("Text", ""), "frames": [frame]})
    return {"dialogue_id": f"star_{doc['DialogueID']}", "services": services or [service], "turns": turns}


def _parameters(event: dict[str, Any]) -> dict[str, str]:
    """SGD's parameters are slot -> value strings; a STAR condition (``api.is_one_of([...])``) stays as
    STAR logged it."""
    parameters: dict[str, str] = {}
    for constraint in event.get("Constraints") or []:
        for name, value in constraint.items():
            parameters[name] = value if isinstance(value, str) else json.dumps(value)
    return parameters


def _loaded(session: Session) -> list[str]:
    """The protocols converted by their own dialog modules that have tasks loaded here."""
    return [p for p in OWN_CONVERTERS if session.exec(select(Task.id).where(Task.protocol == p).limit(1)).first()]


def schema(session: Session, services: set[str]) -> list[dict[str, Any]]:
    """``schema.json``: a service per exported task, with its slots and one intent."""
    found = [service for protocol in _loaded(session) for service in registry.parts(protocol).sgd_services(
        session, services)]  # Frames' and MEEP's services, as their dialog modules describe them
    tasks = {(t.star.get("task") if t.protocol == STAR.name else t.key): t
             for t in session.exec(select(Task)) if t.protocol in (STAR.name, WIZARD_OF_TASKS.name)}
    for name in sorted(services - {service["service_name"] for service in found}):
        task = tasks.get(name)
        description = task.title if task is not None else name
        slots: list[dict[str, Any]] = []
        intent = {"name": name, "description": description, "is_transactional": False,
                  "required_slots": [], "optional_slots": {}, "result_slots": []}
        if task is not None and task.protocol == STAR.name:
            try:
                api = knowledge_base(task.star["kb_dir"]).api(task.star["api"])
            except (InvalidDocument, KeyError, OSError):
                api = None  # the knowledge base moved since the tasks were loaded: a service without slots
            if api is not None:
                slots = [{"name": column.name, "description": column.readable or column.name,
                          "is_categorical": column.categories is not None,
                          "possible_values": [str(v) for v in column.categories or ()]}
                         for column in api.inputs.values()]
                intent.update(required_slots=list(api.required),
                              optional_slots={n: "dontcare" for n in api.inputs if n not in api.required},
                              result_slots=list(api.outputs), is_transactional=not api.searchable)
        found.append({"service_name": name, "description": description, "slots": slots, "intents": [intent]})
    return sorted(found, key=lambda service: service["service_name"])


def sgd_dialogues(session: Session, hash_key: str, filters: ExportFilters,
                  scrubber: Optional[PiiScrubber] = None) -> Iterator[dict[str, Any]]:
    """Every selected conversation as an SGD dialogue (``_dialogues``), the turns an agent wrote marked."""
    page: list[dict[str, Any]] = []
    for dialogue in _dialogues(session, hash_key, filters, scrubber):
        page.append(dialogue)
        if len(page) == 200:
            yield from _with_agents(session, page)
            page = []
    yield from _with_agents(session, page)


def _with_agents(session: Session, page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Beside SGD's keys, ``turkflow_agents`` names the agent of each role an agent played (turkflow agents);
    people's dialogues are left as they are. Which turns the agent wrote (a turn handed to people is a person's)
    is in turkflow's own formats: ``export`` marks each turn, ``--format star`` each event."""
    ids = {int(str(d["dialogue_id"]).rsplit("_", 1)[-1]): d for d in page}
    played: dict[int, dict[str, str]] = {}
    for conversation_id, role, name in session.exec(
            select(ConversationAgent.conversation_id, ConversationAgent.role, Agent.name)
            .join(Agent, Agent.id == ConversationAgent.agent_id)
            .where(col(ConversationAgent.conversation_id).in_(list(ids)))):
        played.setdefault(conversation_id, {})[role] = name
    for conversation_id, agents in played.items():
        ids[conversation_id]["turkflow_agents"] = agents
    return page


def _dialogues(session: Session, hash_key: str, filters: ExportFilters,
               scrubber: Optional[PiiScrubber] = None) -> Iterator[dict[str, Any]]:
    """Every selected conversation as an SGD dialogue: Wizard of Tasks ones, then STAR ones."""
    for doc in iter_conversations(session, hash_key, filters, scrubber):
        if doc["batch"]["protocol"] == WIZARD_OF_TASKS.name:
            yield from_wizard_of_tasks(doc)
    if filters.protocol in (None, STAR.name):
        for doc in star_documents(session, hash_key, filters):
            yield from_star(doc)
    for protocol in _loaded(session):
        if filters.protocol in (None, protocol):
            found = registry.parts(protocol).sgd_dialogues(session, hash_key, filters)
            yield from with_annotated_acts(session, found) if protocol in ANNOTATED else found


def annotated_actions(labels: dict[str, Any]) -> list[dict[str, Any]]:
    """SGD actions from a turn's annotation (``turkflow.protocols.annotate``): one per slot of each act (the
    act upper-cased, the slot and its value), or the act alone; frame relations have no SGD action."""
    actions: list[dict[str, Any]] = []
    for act in labels["acts"]:
        name = act["act"].upper()
        actions += [sgd_action(name, s["slot"], [s["value"]] if "value" in s else []) for s in act["slots"]] or [
            sgd_action(name)]
    return actions


def with_annotated_acts(session: Session, dialogues: Iterable[dict[str, Any]],
                        page_size: int = 200) -> Iterator[dict[str, Any]]:
    """Each dialogue with its turns' actions taken from annotation only: the annotation's acts where its turn
    is labelled (a person's decision or the annotators' majority), none where it is not. What a protocol
    logged (Frames' search constraints, the user's ending of the dialog) is never turned into an act. The
    ``conversation_id`` of ``frames_<id>`` finds the turns, in order."""
    schemes = scheme_names(session)
    page: list[dict[str, Any]] = []
    for dialogue in dialogues:
        page.append(dialogue)
        if len(page) == page_size:
            yield from _relabelled(session, page, schemes)
            page = []
    yield from _relabelled(session, page, schemes)


def _relabelled(session: Session, page: list[dict[str, Any]], schemes: list[str]) -> list[dict[str, Any]]:
    ids = [int(d["dialogue_id"].rsplit("_", 1)[1]) for d in page]
    turns: dict[int, list[tuple[int, str]]] = {i: [] for i in ids}
    for turn_id, conversation_id, text in session.exec(
            select(Turn.id, Turn.conversation_id, Turn.text).where(
                col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)
            .order_by(col(Turn.conversation_id), col(Turn.index))):
        turns[conversation_id].append((turn_id, text or ""))
    labels = labels_of_turns(session, [t for found in turns.values() for t, _ in found], schemes)
    for conversation_id, dialogue in zip(ids, page):
        for n, turn in enumerate(dialogue["turns"]):
            kept = turns[conversation_id][n] if n < len(turns[conversation_id]) else None
            given = labels.get(kept[0]) if kept is not None and kept[1] == turn["utterance"] else None
            for frame in turn["frames"]:
                frame["actions"] = annotated_actions(given) if given is not None else []
    return page


def export_sgd(session: Session, out_dir: Path, *, hash_key: str, filters: ExportFilters = ExportFilters(),
               scrubber: Optional[PiiScrubber] = None,
               on_document: Optional[Callable[[dict[str, Any]], None]] = None) -> SgdExportSummary:
    """Write ``dialogues_NNN.json`` and ``schema.json`` into ``out_dir``, assembled in a hidden sibling
    directory that takes the target's name only when complete."""
    if not hash_key:
        raise ExportError("no worker hash key configured; set TURKFLOW_WORKER_HASH_KEY")
    out_dir = Path(out_dir)
    dialogues = turns = 0
    services: set[str] = set()
    chunk: list[dict[str, Any]] = []
    hide = worker_id_hider(session, hash_key)
    with staged(out_dir) as staging:
        def flush() -> None:
            number = dialogues // DIALOGUES_PER_FILE + (1 if dialogues % DIALOGUES_PER_FILE else 0)
            (staging / f"dialogues_{number:03d}.json").write_text(
                json.dumps(chunk, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            chunk.clear()

        for dialogue in map(hide, sgd_dialogues(session, hash_key, filters, scrubber)):
            chunk.append(dialogue)
            dialogues += 1
            turns += len(dialogue["turns"])
            services.update(dialogue["services"])
            if on_document is not None:
                on_document(dialogue)
            if len(chunk) == DIALOGUES_PER_FILE:
                flush()
        if chunk:
            flush()
        (staging / "schema.json").write_text(json.dumps(schema(session, services), indent=1) + "\n",
                                             encoding="utf-8")
    return SgdExportSummary(out_dir=out_dir, dialogues=dialogues, turns=turns)
