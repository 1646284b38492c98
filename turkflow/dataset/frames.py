"""``turkflow export --format frames``: Frames conversations in the Frames corpus' own JSON (El Asri et al.
2017, section 7): one list of dialogues, each with ``id``, ``user_id``, ``wizard_id``, ``labels``
(``userSurveyRating``, ``wizardSurveyTaskSuccessful``) and ``turns``; each turn with ``author``, ``text``,
``timestamp`` (milliseconds) and ``labels``: the ``acts`` (``name`` and ``args``, key-value pairs, the frame
relations as Frames' ``id``, ``ref``, ``read`` and ``write`` args), ``acts_without_refs`` and the
``active_frame``; a wizard turn also has ``db``, its searches with their results and suggestions, and the
package it booked.

The labels are the annotation's (``turkflow.protocols.annotate``: a person's decision, else the annotators'
majority); a turn without them has no acts (``annotated`` false) and keeps the active frame. The active
frame starts at 1 and, as in Frames, only the user changes it: to the last frame a user turn creates or
refers to. Each turn also carries ``frames``, every frame after the turn (section 7.1), tracked from the
annotation by ``FrameTracker``. A wizard turn's searches carry their results as full records (section 7.2:
the package database can be rebuilt from the dialogues). Slot keys, in acts, frames and records, are the
Frames corpus' names where the domain file's ``database.frames_names`` says which (``destination`` ->
``dst_city``). Beside Frames' fields: ``goal`` (the user's goal as drawn), ``booking`` (the package booked,
if any, and its verdict against the goal: meets_goal, meets_alternate or breaks_goal, with the goal's
conditions it breaks), ``wizard_survey`` and ``user_survey`` (the end-of-dialog answers by question), each
turn's ``author_id``. Worker ids are keyed hashes, as in every export.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.dataset.export import ExportError, ExportFilters, anonymize, staged, worker_id_hider
from turkflow.models import Conversation, DialogEvent, Turn, TurnStatus, Worker
from turkflow.protocols.annotate import results
from turkflow.protocols.annotate.scheme import RELATIONS
from turkflow.protocols.frames import dialog as frames_dialog
from turkflow.protocols.frames import events as frames_events
from turkflow.protocols.frames.database import convert, to_json
from turkflow.protocols.frames.domain import Domain
from turkflow.protocols.frames.goals import goal_from_dict, judge_booking
from turkflow.protocols.questions import FRAMES
from turkflow.protocols.registry import conversation_pages

REFS = ("ref", "read", "write")  # the args frame tracking predicts, left out of acts_without_refs


@dataclass(frozen=True)
class FramesExportSummary:
    out_file: Path
    dialogues: int
    turns: int
    annotated_turns: int


def frame_args(frames: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A turn's frame relations as Frames writes them in an act's args: ``id`` for a frame created, else a
    list of referenced frames under ``ref``, ``read`` or ``write``."""
    args = []
    for f in frames:
        key = RELATIONS[f["relation"]]
        args.append({"key": key, "val": f["frame"] if key == "id" else [{"frame": f["frame"], "annotations": []}]})
    return args


def turn_labels(labels: Optional[Mapping[str, Any]], active_frame: int,
                name: Callable[[str], str] = str) -> dict[str, Any]:
    """A turn's ``labels`` from its annotation (None: not annotated, so no acts); ``name`` gives a slot
    its Frames name."""
    if labels is None:
        return {"acts": [], "acts_without_refs": [], "active_frame": active_frame}
    relations = frame_args(labels.get("frames", []))
    acts = [{"name": a["act"],
             "args": [{"key": name(s["slot"]), **({"val": s["value"]} if "value" in s else {})}
                      for s in a["slots"]] + relations} for a in labels["acts"]]
    return {"acts": acts,
            "acts_without_refs": [{"name": a["name"], "args": [x for x in a["args"] if x["key"] not in REFS]}
                                  for a in acts],
            "active_frame": active_frame}


def next_active_frame(author: str, labels: Optional[Mapping[str, Any]], active_frame: int) -> int:
    """The active frame after a turn: a user turn moves it to the last frame it creates or refers to."""
    if author != "user" or labels is None:
        return active_frame
    moved = [f["frame"] for f in labels.get("frames", []) if f["relation"] in ("creates", "refers")]
    return moved[-1] if moved else active_frame


def wizard_db(events: Sequence[DialogEvent], records: Optional[Records] = None) -> list[dict[str, Any]]:
    """What one wizard turn looked up: each search with its results and any suggestions, and a booking;
    with ``records``, each result and suggestion's items as full records, keys by their Frames names."""
    records = records or Records()
    found: list[dict[str, Any]] = []
    for event in events:
        if event.action == frames_events.SEARCH:
            search = dict(event.data, constraints=[dict(c, field=records.name(c["field"]))
                                                   for c in event.data.get("constraints", [])])
            if "sort" in search and isinstance(search["sort"], Mapping):
                search["sort"] = dict(search["sort"], field=records.name(search["sort"].get("field", "")))
            found.append({"search": search, "results": None})
        elif event.action == frames_events.RESULTS and found:
            found[-1]["results"] = dict(event.data, items=records.of(event.data.get("ids", [])))
        elif event.action == frames_events.SUGGESTIONS and found:
            found[-1]["suggestions"] = [dict(s, items=records.of(s.get("ids", [])))
                                        for s in event.data["suggestions"]]
        elif event.action == frames_events.BOOK:
            found.append({"book": dict(event.data, item=records.record(event.data.get("item") or {}))})
    return found


@dataclass(frozen=True)
class Records:
    """The task's database as the export writes it: an item by id as a full record, keys by their Frames
    names (``domain.frames_name``); an id the database no longer holds is ``{"id": id, "missing": true}``."""

    items: Mapping[Any, Mapping[str, Any]] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)

    def name(self, column: str) -> str:
        return self.names.get(column, column)

    def record(self, item: Mapping[str, Any]) -> dict[str, Any]:
        return {self.name(k): to_json(v) for k, v in item.items()}

    def of(self, ids: Sequence[Any]) -> list[dict[str, Any]]:
        return [self.record(self.items[i]) if i in self.items else {"id": i, "missing": True} for i in ids]


def _empty_frame(frame_id: int, parent: Optional[int]) -> dict[str, Any]:
    return {"frame_id": frame_id, "frame_parent_id": parent, "info": {}, "requests": [],
            "binary_questions": [], "compare_requests": [], "REJECTED": False, "MOREINFO": False}


class FrameTracker:
    """Every frame of a dialog after each turn (the Frames corpus' per-turn ``frames``, section 7.1), read
    off the turns' annotated acts and frame relations.

    Frame 1 is there from the start. A frame a turn creates is derived from the frame it refers to, else
    from the active one: it inherits that frame's info (a frame the user creates, by changing a constraint,
    without the values the wizard gave, as Frames drops them then and when the user asks for
    alternatives), and a slot the turn then gives replaces the inherited values. Within a frame, values accumulate (``{"val", "negated"}``; a user's ``negate`` of a value is
    negated). The user's questions go to the frame the turn is about (the one it creates, writes, refers to,
    else the active one): ``request`` of a slot to ``requests``, of a slot with a value and ``confirm`` to
    ``binary_questions``, ``request_compare`` to ``compare_requests`` (with the frames referred to);
    ``moreinfo`` sets ``MOREINFO``; a user's ``negate`` without a slot (of an offer) sets ``REJECTED``, an
    ``affirm`` clears it. The labels do not say which act a relation belongs to, so a turn's acts all
    concern one frame. Slot names are given by ``name``."""

    def __init__(self, name: Callable[[str], str] = str) -> None:
        self.name = name
        self.frames: dict[int, dict[str, Any]] = {1: _empty_frame(1, None)}
        self.wizards: dict[int, set[str]] = {1: set()}  # per frame, the slots whose values the wizard gave

    def after(self, author: str, labels: Optional[Mapping[str, Any]], active: int) -> list[dict[str, Any]]:
        """The frames after a turn of ``author`` with these labels (None: not annotated: nothing changes);
        ``active``: the active frame as the turn began."""
        if labels is not None:
            self._integrate(author, labels, active)
        return json.loads(json.dumps([self.frames[k] for k in sorted(self.frames)]))

    def _drop_wizards(self, number: int) -> None:
        """Frames' rule: what the wizard said of a frame holds as constraints until the user changes one or
        asks for alternatives."""
        for key in self.wizards[number]:
            self.frames[number]["info"].pop(key, None)
        self.wizards[number] = set()

    def _integrate(self, author: str, labels: Mapping[str, Any], active: int) -> None:
        relations = labels.get("frames", [])
        created = [f["frame"] for f in relations if f["relation"] == "creates"]
        referred = [f["frame"] for f in relations if f["relation"] != "creates" and f["frame"] in self.frames]
        fresh: set[str] = set()
        for number in created:
            if number in self.frames:
                continue
            parent = referred[0] if referred else active if active in self.frames else None
            frame = _empty_frame(number, parent)
            self.frames[number], self.wizards[number] = frame, set()
            if parent is not None:
                frame["info"] = json.loads(json.dumps(self.frames[parent]["info"]))
                self.wizards[number] = set(self.wizards[parent])
                if author == "user":  # the user changed a constraint: the wizard's values are dropped
                    self._drop_wizards(number)
        target = self.frames[next(iter(created[::-1] + [f["frame"] for f in relations
                                                         if f["relation"] == "writes" and f["frame"] in self.frames]
                                       + referred[::-1]), active if active in self.frames else 1)]
        if author == "user" and any(a["act"] == "request_alts" for a in labels.get("acts", [])):
            self._drop_wizards(target["frame_id"])
        for act in labels.get("acts", []):
            self._act(author, act, target, referred, fresh if created else None)

    def _act(self, author: str, act: Mapping[str, Any], frame: dict[str, Any], referred: list[int],
             fresh: Optional[set[str]]) -> None:
        name, slots = act["act"], act.get("slots", [])
        if author == "user" and not slots and name in ("negate", "affirm"):
            frame["REJECTED"] = name == "negate"
        if author == "user" and name == "moreinfo":
            frame["MOREINFO"] = True
        for slot in slots:
            key, given = self.name(slot["slot"]), "value" in slot
            if author == "user" and name == "request":
                if given:
                    frame["binary_questions"].append({"name": key, "val": slot["value"]})
                else:
                    frame["requests"].append({"name": key})
            elif author == "user" and name == "confirm":
                frame["binary_questions"].append({"name": key, **({"val": slot["value"]} if given else {})})
            elif author == "user" and name == "request_compare":
                frame["compare_requests"].append({"name": key, **({"val": slot["value"]} if given else {}),
                                                  "frames": sorted(set(referred))})
            elif given and name in ("inform", "offer", "suggest", "negate", "switch_frame", "affirm"):
                if fresh is not None and key not in fresh:
                    frame["info"][key] = []  # a value the new frame's turn gives replaces the inherited ones
                    fresh.add(key)
                frame["info"].setdefault(key, []).append(
                    {"val": slot["value"], "negated": author == "user" and name == "negate"})
                if author == "wizard":
                    self.wizards[frame["frame_id"]].add(key)
                else:
                    self.wizards[frame["frame_id"]].discard(key)


def frames_dialogues(session: Session, hash_key: str, filters: ExportFilters,
                     page_size: int = 200) -> Iterator[dict[str, Any]]:
    """The selected Frames conversations as Frames dialogues, in id order, a page at a time."""
    schemes = ["frames", *(name for name in results.scheme_names(session) if name != "frames")]
    for page in conversation_pages(session, FRAMES, filters, page_size):
        ids = [c.id for c, _ in page]
        turns = list(session.exec(select(Turn).where(col(Turn.conversation_id).in_(ids),
                                                     Turn.status == TurnStatus.submitted)
                                  .order_by(col(Turn.conversation_id), col(Turn.index))))
        names = dict(session.exec(select(Worker.id, Worker.external_id).where(
            col(Worker.id).in_({t.worker_id for t in turns if t.worker_id}))).all())
        events: dict[int, list[DialogEvent]] = {}
        for event in session.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids))
                                  .order_by(col(DialogEvent.id))):
            events.setdefault(event.turn_id, []).append(event)
        labels = results.labels_of_turns(session, [t.id for t in turns], schemes)
        answers = frames_dialog.survey_answers(session, ids)
        by_conversation: dict[int, list[Turn]] = {i: [] for i in ids}
        for turn in turns:
            by_conversation[turn.conversation_id].append(turn)
        for conversation, task in page:
            yield _dialogue(conversation, frames_dialog.domain_of(task), by_conversation[conversation.id], events,
                            labels, answers[conversation.id], {w: anonymize(hash_key, e) for w, e in names.items()})


def _dialogue(conversation: Conversation, domain: Domain, turns: Sequence[Turn],
              events: Mapping[int, list[DialogEvent]], labels: Mapping[int, dict[str, Any]],
              answers: Mapping[str, Any], authors: Mapping[int, str]) -> dict[str, Any]:
    records = Records({item["id"]: item for item in domain.db.items}, domain.frames_names)
    tracker = FrameTracker(records.name)
    active = 1
    shown, booked = [], None
    for turn in turns:
        given = labels.get(turn.id)
        entry = {"author": turn.role, "author_id": authors.get(turn.worker_id), "text": turn.text or "",
                 "timestamp": turn.submitted_at.timestamp() * 1000 if turn.submitted_at else None,
                 "annotated": given is not None, "labels": turn_labels(given, active, records.name)}
        if turn.role == "wizard":
            writer = [e for e in events.get(turn.id, []) if e.worker_id in (None, turn.worker_id)]
            entry["db"] = wizard_db(writer, records)
            booked = next((e.data for e in writer if e.action == frames_events.BOOK), booked)
        entry["frames"] = tracker.after(turn.role, given, active)
        active = next_active_frame(turn.role, given, active)
        shown.append(entry)
    first = {role: next((authors.get(t.worker_id) for t in turns if t.role == role), None) for role in ("user", "wizard")}
    return {"id": f"frames_{conversation.id}", "user_id": first["user"], "wizard_id": first["wizard"],
            "labels": {"userSurveyRating": answers.get("cooperativity"),
                       "wizardSurveyTaskSuccessful": answers.get("goal_reached")},
            "user_survey": {k: v for k, v in answers.items() if k == "cooperativity"},
            "wizard_survey": {k: v for k, v in answers.items() if k != "cooperativity"},
            "goal": {k: v for k, v in conversation.scenario.items() if k != "domain"},
            "booking": _booking(conversation, domain, booked, records),
            "turns": shown}


def _booking(conversation: Conversation, domain: Domain, booked: Optional[Mapping[str, Any]],
             records: Records) -> Optional[dict[str, Any]]:
    """The package booked, as booked, and its verdict against the user's goal (None: nothing booked)."""
    if not booked or not booked.get("item"):
        return None
    db = domain.db
    item = {k: convert(db.columns[k].type, v) if k in db.columns else v for k, v in booked["item"].items()}
    verdict = judge_booking(goal_from_dict(conversation.scenario, db), item)
    return {"id": booked.get("id"), "item": records.record(booked["item"]), "verdict": verdict.outcome,
            "broken": [dict(c.as_dict(), field=records.name(c.field)) for c in verdict.broken]}


def export_frames(session: Session, out_dir: Path, *, hash_key: str,
                  filters: ExportFilters = ExportFilters()) -> FramesExportSummary:
    """Write ``frames.json`` (one list of dialogues, as the Frames corpus ships) into ``out_dir``, which
    appears only when complete; dialogues are written as they are read, so memory stays flat."""
    if not hash_key:
        raise ExportError("no worker hash key configured; set TURKFLOW_WORKER_HASH_KEY")
    dialogues = turns = annotated = 0
    hide = worker_id_hider(session, hash_key)
    with staged(Path(out_dir)) as staging, (staging / "frames.json").open("w", encoding="utf-8") as out:
        out.write("[")
        for dialogue in map(hide, frames_dialogues(session, hash_key, replace(filters, protocol=FRAMES.name))):
            out.write(("," if dialogues else "") + "\n" + json.dumps(dialogue, ensure_ascii=False))
            dialogues += 1
            turns += len(dialogue["turns"])
            annotated += sum(1 for t in dialogue["turns"] if t["annotated"])
        out.write("\n]\n")
    return FramesExportSummary(Path(out_dir) / "frames.json", dialogues, turns, annotated)
