"""Annotation batches on the asynchronous pipeline: the turns of a collected batch as units, each labelled by N
annotators (one paid turn each), the clicks that build a label as events, and the submit that stores it.

A *unit* is one collected turn under one scheme: a ``Task`` of protocol ``annotate`` (key
``annotate:<scheme>:<turn id>``) whose ``star`` holds the scheme as launched, the turn's text, speaker and
place in its dialog. Each of its N *replicas* is a one-turn conversation of the annotation batch; the
queue never gives two replicas of a unit to one annotator (``Protocol.distinct_writers``). While the
annotator holds the turn, each click-made item is a ``DialogEvent`` (``label``: an act, perhaps with a slot
and its value; ``frame``: a frame relation; ``clear``: start again); the submit reads the labels off them
(``labels.collect``), stores them as the turn's ``answers["labels"]`` and its text as the paper writes
them; the pipeline's review then passes what it says of the annotators (``judged_turn``) to the quality
monitor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.errors import InvalidDocument, InvalidInput, NotFound
from turkflow.hits import lifecycle
from turkflow.models import Batch, Conversation, DialogEvent, Task, Turn, TurnStatus, Worker
from turkflow.protocols import actions
from turkflow.protocols.annotate import actions as annotate_actions
from turkflow.protocols.annotate import labels as L
from turkflow.protocols.annotate import results
from turkflow.protocols.annotate.scheme import MAX_FRAMES, RELATIONS, Scheme, scheme_from_dict
from turkflow.protocols.questions import ANNOTATE
from turkflow.protocols.registry import (
    LOGGED, ReplayDifference, load_tasks, loggable, open_submit, own_events, parts, submitted_before,
)

AGENT = "Annotator"  # as DialogEvent names the one who clicked
CONTEXT_TURNS = 12  # turns before the labelled one the page shows


# ---- units: a collected batch's turns, each a task -----------------------------------------------------


def unit_tasks(session: Session, of_batch: Batch, scheme: Scheme) -> list[Task]:
    """One unsaved task per submitted turn of ``of_batch`` (in dialog order), holding the scheme as it is now;
    a scheme with database slots takes the columns of a Frames batch's database."""
    if of_batch.protocol == ANNOTATE.name:
        raise InvalidInput("choose a batch of dialogs, not an annotation batch", "of")
    rows = list(session.exec(
        select(Turn, Conversation, Task).join(Conversation, Conversation.id == Turn.conversation_id)
        .join(Task, Task.id == Conversation.task_id)
        .where(Conversation.batch_id == of_batch.id, Turn.status == TurnStatus.submitted)
        .order_by(col(Conversation.id), col(Turn.index))))
    if not rows:
        raise InvalidInput(f"batch {of_batch.id} has no submitted turns to annotate", "of")
    if scheme.database_slots:
        values = _database_values(of_batch.protocol)
        if values is None:
            raise InvalidInput(f"the {scheme.name} scheme's slots are a database's columns; batch {of_batch.id} "
                               f"is {of_batch.protocol}, whose tasks have no database", "scheme")
        scheme = scheme.with_columns(values(rows[0][2]))
    snapshot = scheme.as_dict()
    return [Task(key=results.unit_key(scheme.name, turn.id), protocol=ANNOTATE.name,
                 title=f"{task.title}: turn {turn.index + 1}", domain=task.domain,
                 star={"scheme": snapshot, "of_batch": of_batch.id, "of_protocol": of_batch.protocol,
                       "source_task": task.id, "conversation_id": conversation.id, "turn_id": turn.id,
                       "index": turn.index, "speaker": turn.role, "text": turn.text or ""})
            for turn, conversation, task in rows]


def launch(session: Session, of_batch_id: int, scheme: Scheme, annotators: int, **options: Any
           ) -> tuple[Batch, list[Any]]:
    """An annotation batch over ``of_batch_id``'s turns: each unit ``annotators`` times, replica by replica
    (the queue offers every unit's first replica before any second one). ``options`` go to
    ``lifecycle.launch_batch`` (name, provider, reward_cents, budget_cents, quality)."""
    if not isinstance(annotators, int) or annotators < 1:
        raise InvalidInput("at least one annotator per turn", "annotators")
    of_batch = session.get(Batch, of_batch_id)
    if of_batch is None:
        raise NotFound(f"batch {of_batch_id} does not exist")
    made = unit_tasks(session, of_batch, scheme)
    load_tasks(session, made)
    keys = [t.key for t in made]
    tasks = sorted(session.exec(select(Task).where(col(Task.key).in_(keys))), key=lambda t: keys.index(t.key))
    scenarios = [(task, {"replica": r + 1}) for r in range(annotators) for task in tasks]
    return lifecycle.launch_batch(session, tasks, len(scenarios), protocol=ANNOTATE.name, max_turns=2,
                                  scenarios=scenarios, **options)


def unit_of(session: Session, turn: Turn) -> Task:
    """The unit an annotation turn labels."""
    conversation = session.get(Conversation, turn.conversation_id)
    task = session.get(Task, conversation.task_id)
    if task is None or task.protocol != ANNOTATE.name:
        raise NotFound("this turn does not label a collected turn")
    return task


def scheme_of(unit: Task) -> Scheme:
    return scheme_from_dict(unit.star["scheme"], f"task {unit.key}")


def database_values(session: Session, unit: Task) -> dict[str, list[str]]:
    """The values an annotator may pick for each database column of the unit's scheme: the collected
    protocol's own (``database_values`` of its dialog module: Frames' database), none for the others."""
    scheme = scheme_of(unit)
    if not scheme.columns:
        return {}
    source = session.get(Task, unit.star["source_task"])
    values = _database_values(source.protocol)
    found = values(source) if values is not None else {}
    return {c: found[c] for c in scheme.columns if c in found}


def _database_values(protocol: str) -> Optional[Callable[[Task], dict[str, list[str]]]]:
    """The collected protocol's ``database_values`` (its tasks' database), or None where it has none."""
    return getattr(parts(protocol), "database_values", None) if protocol in LOGGED else None


def record_action(session: Session, turn: Turn, worker: Worker, action: Any,
                  fields: Mapping[str, Any]) -> list[DialogEvent]:
    """Check one click-made item of the annotator holding ``turn`` and log it: ``label`` (``act``; ``slot``
    with ``words`` or ``value``), ``frame`` (``relation``, ``frame``) or ``clear``. A bad item is an
    ``InvalidInput`` naming the field, and nothing is written."""
    conversation = loggable(session, ANNOTATE, turn, worker)
    if not isinstance(action, str) or action not in ANNOTATE.form(turn.role).actions:
        raise InvalidInput(f"an annotator can: {', '.join(ANNOTATE.form(turn.role).actions)}", "action")
    if not isinstance(fields, Mapping):
        raise InvalidInput("expected the action's fields as an object", "fields")
    fields = actions.typed(annotate_actions.ROLES, turn.role, action, fields)
    unit = unit_of(session, turn)
    scheme = scheme_of(unit)
    if action == "label":
        data = L.label_item(scheme, unit.star["speaker"], unit.star["text"], fields,
                            database_values(session, unit) if fields.get("value") else None)
    elif action == "frame":
        data = L.frame_item(scheme, fields)
    else:
        if fields:
            raise InvalidInput("not a field of clear", str(sorted(fields)[0])[:60])
        data = {}
    L.collect([*current_items(own_events(session, turn, worker)), *([data] if action != "clear" else [])])
    event = DialogEvent(conversation_id=conversation.id, turn_id=turn.id, turn_index=turn.index,
                        worker_id=worker.id, agent=AGENT, action=action, data=data)
    session.add(event)
    session.flush()
    return [event]


def current_items(events: Sequence[DialogEvent]) -> list[dict[str, Any]]:
    """The items a holder's events add up to: those after their last ``clear``."""
    items: list[dict[str, Any]] = []
    for event in events:
        if event.action == "clear":
            items = []
        elif event.action in ("label", "frame"):
            items.append(event.data)
    return items


def submit_turn(session: Session, assignment_external_id: str, worker: Worker, body: Mapping[str, Any],
                *, as_answers: bool = False) -> lifecycle.Submission:
    """Store the labels the holder's clicks add up to (none: the turn carries no act, as some Frames turns
    did) through ``lifecycle.submit_turn``. With
    ``as_answers`` (a JSON client of the generic turn page), a given ``label`` must be ``labelled`` and a
    given ``response`` the labels' text. A repeated submit returns the stored turn."""
    sent = open_submit(session, ANNOTATE, assignment_external_id, worker, body, as_answers=as_answers)
    if sent is None:
        return submitted_before(session, assignment_external_id, worker, body)
    if sent.rest:
        refused = "not a question of this turn" if as_answers else "not a field of a submit"
        raise InvalidInput(refused, str(sorted(sent.rest)[0])[:60])
    labels = L.collect(current_items(own_events(session, sent.turn, worker)))
    text = L.summary(labels)
    if sent.label is not None and sent.label != ANNOTATE.closing_label:
        raise InvalidInput(f"an annotation's label is {ANNOTATE.closing_label!r}", sent.label_name)
    if sent.response is not None and sent.response != text:
        raise InvalidInput(f"differs from the labels this turn logged ({text})", "response")
    answers: dict[str, Any] = {sent.label_name: ANNOTATE.closing_label, "response": text}
    if sent.signals is not None:
        answers["signals"] = sent.signals
    submission = lifecycle.submit_turn(session, assignment_external_id, worker, answers)
    if submission.created:
        submission.turn.answers = {**submission.turn.answers, "labels": labels}
        session.add(submission.turn)
        session.flush()
    return submission


def judged_gold(session: Session, unit_id: int) -> list[results.Judged]:
    """What a unit the requester has just marked gold says of its annotators (``results.judged_gold``), for
    the pipeline to pass to the monitor."""
    return results.judged_gold(session, unit_id)


def judged_turn(session: Session, turn: Turn) -> list[results.Judged]:
    """What a submitted annotation says of annotators (``results.judged``), for the pipeline's review to pass
    to the monitor."""
    return results.judged(session, turn)


def read_tasks(path: Path) -> list[Task]:
    """Annotation units are made from a collected batch at launch, never loaded from a file."""
    raise InvalidDocument(f"{path}: annotation tasks are the turns of a batch: launch with "
                          "`turkflow batch launch --protocol annotate --of BATCH --scheme frames`")


def replay(session: Session, conversation_ids: Sequence[int]) -> tuple[int, list[ReplayDifference]]:
    """Labels call nothing that could answer differently now: nothing to replay."""
    raise InvalidInput("an annotation batch calls no database or API; there is nothing to replay", "batch")


# ---- what the page shows -----------------------------------------------------------------------------


def annotator_view(session: Session, turn: Turn, worker_id: Optional[int] = None) -> dict[str, Any]:
    """The annotator's page: the dialog up to the turn to label (the turn highlighted, its words numbered to
    click), the scheme's acts for its speaker, slot types with their pickable values, the frame relations,
    and the labels this holder's clicks add up to so far."""
    unit = unit_of(session, turn)
    scheme = scheme_of(unit)
    star = unit.star
    earlier = list(session.exec(
        select(Turn.role, Turn.text).where(Turn.conversation_id == star["conversation_id"],
                                           Turn.index < star["index"], Turn.status == TurnStatus.submitted)
        .order_by(col(Turn.index).desc()).limit(CONTEXT_TURNS)))[::-1]
    mine = [e for e in own_events(session, turn, session.get(Worker, worker_id))] if worker_id else []
    current = L.collect(current_items(mine))
    values = database_values(session, unit)
    return {
        "scheme": scheme.name,
        "context": [{"speaker": role, "text": text or ""} for role, text in earlier],
        "target": {"speaker": star["speaker"], "text": star["text"],
                   "words": [{"n": n, "word": w} for n, (_, _, w) in enumerate(L.words_of(star["text"]))]},
        "acts": [{"name": a.name, "description": a.description} for a in scheme.acts_for(star["speaker"])],
        "slots": [{"name": s.name, "description": s.description, "values": list(s.values) or values.get(s.name, []),
                   "words": not s.values} for s in scheme.slots.values()],
        "frames": scheme.frames,
        "relations": list(RELATIONS),
        "frame_numbers": list(range(1, min(MAX_FRAMES, star["index"] + 3) + 1)),
        "labels": current,
        "summary": L.summary(current),
    }
