"""What annotations add up to: the judgements of each annotator (``judged``: agreement with the unit's majority
once all its replicas are in, and with its gold labels when the requester marked it gold), which the pipeline
passes to the quality monitor as judged signals (``monitor.judge_signal``: blocked under the batch's ``judged
m of n``, one window per kind, the labels given and expected as evidence); and what the requester's pages
read and decide: agreement per label over a batch, the units whose annotators disagree (no labels given by
more than half), a person's final labels (``adjudicate``) and the dataset's labels of a collected turn.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from turkflow import events
from turkflow.db import savepoint
from turkflow.errors import InvalidInput, NotFound
from turkflow.models import Adjudication, Conversation, Task, Turn, TurnStatus, Worker, utcnow
from turkflow.protocols.annotate import agreement
from turkflow.protocols.annotate import labels as L
from turkflow.protocols.registry import Judged

MAJORITY, GOLD = "annotation_majority", "annotation_gold"  # the kinds of judged signal
KEY_PREFIX = "annotate:"


def annotations(session: Session, batch_id: Optional[int] = None,
                task_ids: Optional[list[int]] = None) -> dict[int, dict[int, tuple[Turn, dict[str, Any]]]]:
    """Submitted annotations by unit (task id) and annotator (worker id): of one batch, or of these units in
    any batch."""
    query = (select(Turn, Conversation.task_id).join(Conversation, Conversation.id == Turn.conversation_id)
             .where(Turn.status == TurnStatus.submitted, Turn.role == "annotator"))
    query = query.where(Conversation.batch_id == batch_id) if batch_id is not None else query
    query = query.where(col(Conversation.task_id).in_(task_ids)) if task_ids is not None else query
    found: dict[int, dict[int, tuple[Turn, dict[str, Any]]]] = {}
    for turn, task_id in session.exec(query.order_by(col(Turn.id))):
        found.setdefault(task_id, {})[turn.worker_id] = (turn, turn.answers.get("labels", L.EMPTY))
    return found


def judged(session: Session, turn: Turn) -> list[Judged]:
    """What a just-submitted annotation says of annotators: its agreement with its unit's gold labels, and,
    once every replica of the unit in this batch is in, every replica's agreement with the majority (none
    when there is no majority: a person decides). The monitor records each once per turn and kind."""
    if turn.role != "annotator":
        return []
    conversation = session.get(Conversation, turn.conversation_id)
    found = []
    verdict = session.exec(select(Adjudication).where(Adjudication.task_id == conversation.task_id)).first()
    if verdict is not None and verdict.gold:
        found.append(_against_gold(turn, verdict))
    replicas = session.exec(select(func.count()).select_from(Conversation).where(
        Conversation.batch_id == conversation.batch_id, Conversation.task_id == conversation.task_id)).one()
    done = annotations(session, conversation.batch_id, [conversation.task_id]).get(conversation.task_id, {})
    expected = agreement.majority([labels for _, labels in done.values()]) if len(done) >= replicas else None
    if expected is not None:
        found += [Judged(replica, L.key(given) == L.key(expected), MAJORITY,
                         {"unit": conversation.task_id, "gave": L.summary(given), "majority": L.summary(expected)})
                  for replica, given in done.values()]
    return found


def judged_gold(session: Session, unit_id: int) -> list[Judged]:
    """Every annotation of a unit the requester has just marked gold, judged against it (the monitor records
    each once, so annotations judged against gold before count once)."""
    verdict = session.exec(select(Adjudication).where(Adjudication.task_id == unit_id)).first()
    if verdict is None or not verdict.gold:
        return []
    return [_against_gold(turn, verdict) for by in annotations(session, task_ids=[unit_id]).values()
            for turn, _ in by.values()]


def _against_gold(turn: Turn, verdict: Adjudication) -> Judged:
    given = turn.answers.get("labels", L.EMPTY)
    return Judged(turn, L.key(given) == L.key(verdict.labels), GOLD,
                  {"unit": verdict.task_id, "gave": L.summary(given), "gold": L.summary(verdict.labels)})


def batch_agreement(session: Session, batch_id: int) -> dict[str, Any]:
    """What the dashboard shows of an annotation batch: alpha per label, and how many units are complete,
    agreed by a majority, waiting for a person, adjudicated and gold."""
    by_unit = annotations(session, batch_id)
    replicas = dict(session.exec(select(Conversation.task_id, func.count()).where(Conversation.batch_id == batch_id)
                                 .group_by(Conversation.task_id)).all())
    verdicts = _verdicts(session, list(replicas))
    complete = [u for u, by in by_unit.items() if len(by) >= replicas.get(u, 0)]
    agreed = [u for u in complete if agreement.majority([labels for _, labels in by_unit[u].values()]) is not None]
    return {
        "units": len(replicas), "complete": len(complete), "majority": len(agreed),
        "disagreed": len(complete) - len(agreed),
        "waiting_for_a_person": len([u for u in complete if u not in agreed and u not in verdicts]),
        "adjudicated": len(verdicts), "gold": sum(1 for v in verdicts.values() if v.gold),
        "labels": [vars(a) for a in agreement.per_label(
            {u: {w: labels for w, (_, labels) in by.items()} for u, by in by_unit.items()})],
    }


def units(session: Session, batch_id: int, *, disagreed_only: bool = True) -> list[dict[str, Any]]:
    """The batch's complete units (by default only those whose annotators disagree), each with the turn, every
    annotation (worker, labels and their text) and the decision taken, if any."""
    by_unit = annotations(session, batch_id)
    tasks = {t.id: t for t in session.exec(select(Task).where(col(Task.id).in_(list(by_unit))))}
    verdicts = _verdicts(session, list(by_unit))
    names = dict(session.exec(select(Worker.id, Worker.external_id).where(
        col(Worker.id).in_({w for by in by_unit.values() for w in by}))).all())
    shown = []
    for unit, by in sorted(by_unit.items()):
        expected = agreement.majority([labels for _, labels in by.values()])
        if disagreed_only and expected is not None:
            continue
        verdict = verdicts.get(unit)
        shown.append({
            "unit": unit, "title": tasks[unit].title, "speaker": tasks[unit].star["speaker"],
            "text": tasks[unit].star["text"], "majority": expected,
            "annotations": [{"worker": names.get(w, w), "turn_id": turn.id, "labels": labels,
                             "summary": L.summary(labels)} for w, (turn, labels) in by.items()],
            "decision": None if verdict is None else {"labels": verdict.labels, "summary": L.summary(verdict.labels),
                                                      "gold": verdict.gold, "by": verdict.decided_by}})
    return shown


def adjudicate(session: Session, batch_id: int, unit_id: int, *, chosen_turn_id: Any, gold: bool,
               actor: str) -> Adjudication:
    """A person's final labels of a unit of the annotation batch: those of one of its annotations
    (``chosen_turn_id``), and whether the unit is gold from now on. Replaces an earlier decision; each one is in
    the event log."""
    task = session.get(Task, unit_id)
    in_batch = session.exec(select(Conversation.id).where(Conversation.batch_id == batch_id,
                                                          Conversation.task_id == unit_id).limit(1)).first()
    if task is None or task.protocol != "annotate" or in_batch is None:
        raise NotFound(f"annotated turn {unit_id} does not exist in batch {batch_id}")
    given = {turn.id: labels for by in annotations(session, batch_id, task_ids=[unit_id]).values()
             for turn, labels in by.values()}
    try:
        chosen = given[int(chosen_turn_id)]
    except (KeyError, TypeError, ValueError):
        raise InvalidInput("choose one of this turn's annotations", "chosen") from None
    return decide(session, task, chosen, gold=gold, actor=actor)


def decide(session: Session, task: Task, labels: Mapping[str, Any], *, gold: bool, actor: str) -> Adjudication:
    """Record a unit's final labels (and gold), replacing an earlier decision."""
    labels = L.collect([*[{"act": a["act"], **s} for a in labels["acts"] for s in a["slots"] or [{}]],
                        *labels.get("frames", [])])
    verdict = session.exec(select(Adjudication).where(Adjudication.task_id == task.id)).first()
    if verdict is None:
        verdict = Adjudication(task_id=task.id, labels=labels, gold=gold, decided_by=actor)
        try:
            with savepoint(session):
                session.add(verdict)
                session.flush()
        except IntegrityError:  # decided at the same moment by someone else: this decision replaces it
            verdict = session.exec(select(Adjudication).where(Adjudication.task_id == task.id)).one()
    verdict.labels, verdict.gold, verdict.decided_by, verdict.decided_at = labels, gold, actor, utcnow()
    session.add(verdict)
    events.record(session, "annotation_adjudicated", actor, turn_id=task.star.get("turn_id"), unit=task.id,
                  labels=L.summary(labels), gold=gold)
    session.flush()
    return verdict


def final_labels(session: Session, task_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Each unit's labels as the dataset gives them: the person's decision, else the majority of every
    annotation of it; a unit with neither has none."""
    verdicts = _verdicts(session, task_ids)
    found = {unit: v.labels for unit, v in verdicts.items()}
    for unit, by in annotations(session, task_ids=[t for t in task_ids if t not in found]).items():
        expected = agreement.majority([labels for _, labels in by.values()])
        if expected is not None:
            found[unit] = expected
    return found


def _verdicts(session: Session, task_ids: list[int]) -> dict[int, Adjudication]:
    return {v.task_id: v for v in session.exec(select(Adjudication).where(col(Adjudication.task_id).in_(task_ids)))}


def unit_key(scheme: str, turn_id: int) -> str:
    """The key of the unit that labels a collected turn under a scheme (a ``Task`` of the annotate protocol)."""
    return f"{KEY_PREFIX}{scheme}:{turn_id}"


def scheme_names(session: Session) -> list[str]:
    """The schemes annotation batches used, the one launched last first (read once per export)."""
    keys = session.exec(select(Task.key).where(Task.protocol == "annotate").order_by(col(Task.id).desc()))
    return list(dict.fromkeys(key[len(KEY_PREFIX):].rsplit(":", 1)[0] for key in keys))


def labels_of_turns(session: Session, turn_ids: list[int], schemes: list[str]) -> dict[int, dict[str, Any]]:
    """The dataset's labels (``final_labels``) of collected turns, by turn id, under the first of ``schemes``
    that labelled each (units found by key). A turn nobody labelled, or whose annotators neither agreed nor
    were decided, is absent: it has no labels, never made-up ones."""
    chosen: dict[int, Task] = {}
    for scheme in schemes:
        keys = [unit_key(scheme, t) for t in turn_ids if t not in chosen]
        for task in session.exec(select(Task).where(col(Task.key).in_(keys))) if keys else ():
            chosen[task.star["turn_id"]] = task
    final = final_labels(session, [t.id for t in chosen.values()])
    return {turn_id: final[task.id] for turn_id, task in chosen.items() if task.id in final}
