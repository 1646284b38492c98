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
refers to. Beside Frames' fields: ``goal`` (the user's goal as drawn), ``wizard_survey`` and
``user_survey`` (the end-of-dialog answers by question), each turn's ``author_id``. Worker ids are keyed
hashes, as in every export.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.dataset.export import ExportError, ExportFilters, anonymize, staged
from turkflow.models import Conversation, DialogEvent, Turn, TurnStatus, Worker
from turkflow.protocols.annotate import results
from turkflow.protocols.annotate.scheme import RELATIONS
from turkflow.protocols.frames import dialog as frames_dialog
from turkflow.protocols.frames import events as frames_events
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


def turn_labels(labels: Optional[Mapping[str, Any]], active_frame: int) -> dict[str, Any]:
    """A turn's ``labels`` from its annotation (None: not annotated, so no acts)."""
    if labels is None:
        return {"acts": [], "acts_without_refs": [], "active_frame": active_frame}
    relations = frame_args(labels.get("frames", []))
    acts = [{"name": a["act"],
             "args": [{"key": s["slot"], **({"val": s["value"]} if "value" in s else {})} for s in a["slots"]]
             + relations} for a in labels["acts"]]
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


def wizard_db(events: Sequence[DialogEvent]) -> list[dict[str, Any]]:
    """What one wizard turn looked up: each search with its results and any suggestions, and a booking."""
    found: list[dict[str, Any]] = []
    for event in events:
        if event.action == frames_events.SEARCH:
            found.append({"search": event.data, "results": None})
        elif event.action == frames_events.RESULTS and found:
            found[-1]["results"] = event.data
        elif event.action == frames_events.SUGGESTIONS and found:
            found[-1]["suggestions"] = event.data["suggestions"]
        elif event.action == frames_events.BOOK:
            found.append({"book": event.data})
    return found


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
            yield _dialogue(conversation, by_conversation[conversation.id], events, labels, answers[conversation.id],
                            {w: anonymize(hash_key, e) for w, e in names.items()})


def _dialogue(conversation: Conversation, turns: Sequence[Turn], events: Mapping[int, list[DialogEvent]],
              labels: Mapping[int, dict[str, Any]], answers: Mapping[str, Any],
              authors: Mapping[int, str]) -> dict[str, Any]:
    active = 1
    shown = []
    for turn in turns:
        given = labels.get(turn.id)
        entry = {"author": turn.role, "author_id": authors.get(turn.worker_id), "text": turn.text or "",
                 "timestamp": turn.submitted_at.timestamp() * 1000 if turn.submitted_at else None,
                 "annotated": given is not None, "labels": turn_labels(given, active)}
        if turn.role == "wizard":
            writer = [e for e in events.get(turn.id, []) if e.worker_id in (None, turn.worker_id)]
            entry["db"] = wizard_db(writer)
        active = next_active_frame(turn.role, given, active)
        shown.append(entry)
    first = {role: next((authors.get(t.worker_id) for t in turns if t.role == role), None) for role in ("user", "wizard")}
    return {"id": f"frames_{conversation.id}", "user_id": first["user"], "wizard_id": first["wizard"],
            "labels": {"userSurveyRating": answers.get("cooperativity"),
                       "wizardSurveyTaskSuccessful": answers.get("goal_reached")},
            "user_survey": {k: v for k, v in answers.items() if k == "cooperativity"},
            "wizard_survey": {k: v for k, v in answers.items() if k != "cooperativity"},
            "goal": {k: v for k, v in conversation.scenario.items() if k != "domain"},
            "turns": shown}


def export_frames(session: Session, out_dir: Path, *, hash_key: str,
                  filters: ExportFilters = ExportFilters()) -> FramesExportSummary:
    """Write ``frames.json`` (one list of dialogues, as the Frames corpus ships) into ``out_dir``, which
    appears only when complete; dialogues are written as they are read, so memory stays flat."""
    if not hash_key:
        raise ExportError("no worker hash key configured; set TURKFLOW_WORKER_HASH_KEY")
    dialogues = turns = annotated = 0
    with staged(Path(out_dir)) as staging, (staging / "frames.json").open("w", encoding="utf-8") as out:
        out.write("[")
        for dialogue in frames_dialogues(session, hash_key, replace(filters, protocol=FRAMES.name)):
            out.write(("," if dialogues else "") + "\n" + json.dumps(dialogue, ensure_ascii=False))
            dialogues += 1
            turns += len(dialogue["turns"])
            annotated += sum(1 for t in dialogue["turns"] if t["annotated"])
        out.write("\n]\n")
    return FramesExportSummary(Path(out_dir) / "frames.json", dialogues, turns, annotated)
