"""``turkflow simulate --protocol annotate``: annotators with a hidden accuracy label a simulated Frames batch,
and the report says how far they agreed, how well the dataset's labels match the truth and how well the
quality monitor told careless annotators from careful ones.

It runs in this process on the domain functions the pages call (no web stack: an annotation's clicks are
plain events). First a small Frames batch is played on the sample domain with dialogs written from its
database, each turn with the labels its writer meant (the hidden truth: acts, slot values that are words of
the turn, the frame an offer creates and the user's switch to it). Then an annotation batch over it: the
requester marks a share of the turns gold with their true labels, and each annotator, taking turns from the
queue as a person would, gives the true labels with its accuracy, else a slip (one act swapped or one slot
forgotten). Careless annotators have a low accuracy. The same seed gives the same report.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any, Optional

from sqlmodel import Session, select

from turkflow import pipeline
from turkflow.config import Settings
from turkflow.db import session_scope, upgrade
from turkflow.hits import lifecycle
from turkflow.hits import registry as platforms
from turkflow.models import Batch, Task, Turn, Worker, WorkerStatus
from turkflow.protocols import registry
from turkflow.protocols.annotate import dialog as annotate, results
from turkflow.protocols.annotate import labels as L
from turkflow.protocols.annotate.scheme import load_scheme
from turkflow.protocols.frames import dialog as frames
from turkflow.protocols.frames.domain import SAMPLE
from turkflow.quality.monitor import Policy
from turkflow.simulator.crowd import take_first_offered


@dataclass(frozen=True)
class AnnotateConfig:
    conversations: int = 6  # Frames dialogs played first, 5 turns each
    annotators: int = 10
    careless: float = 0.3  # share of annotators who are careless
    per_turn: int = 3  # annotators per turn
    gold: float = 0.2  # share of turns the requester marks gold
    accuracy: float = 0.9  # a careful annotator's chance of giving a turn's true labels
    careless_accuracy: float = 0.2
    policy: str = "none, judged 3 of 5"
    seed: int = 1


def run(settings: Settings, config: AnnotateConfig) -> dict[str, Any]:
    """Play the Frames batch, annotate it, and report (plain data, reproducible from the seed)."""
    if config.conversations < 1 or config.per_turn < 1 or config.annotators < config.per_turn:
        raise ValueError("conversations and annotators per turn must be at least 1, and annotators at least "
                         "as many as annotators per turn")
    if not (0 <= config.careless <= 1 and 0 <= config.gold <= 1):
        raise ValueError("careless and gold are shares between 0 and 1")
    upgrade(settings.database_url)
    rng = random.Random(config.seed)
    providers = platforms.providers(settings)
    local = providers.get("local")
    with session_scope(settings.database_url) as session:
        frames_batch, truth = play_frames(session, local, config.conversations, rng)
    with session_scope(settings.database_url) as session:
        batch, hits = annotate.launch(session, frames_batch, load_scheme("frames"), config.per_turn,
                                      name="simulated annotation", quality=Policy.parse(config.policy).batch_fields())
        for hit in hits:
            lifecycle.publish_hit(session, local, hit.id)
        batch_id = batch.id
        units = list(session.exec(select(Task).where(Task.protocol == "annotate")))
        gold = rng.sample(units, round(config.gold * len(units)))
        for unit in gold:
            results.decide(session, unit, truth[unit.star["turn_id"]], gold=True, actor="simulator")
        crowd = _annotators(session, config, rng)
    while True:
        worked = False
        for worker_id, accuracy in rng.sample(sorted(crowd.items()), len(crowd)):
            with session_scope(settings.database_url) as session:
                turn_id = annotate_one(session, session.get(Worker, worker_id), accuracy, truth, rng)
            if turn_id is not None:  # what the Celery task does after a submission: close it, review it
                pipeline.after_submission(settings, providers, turn_id)
            worked |= turn_id is not None
        if not worked:
            break
    with session_scope(settings.database_url) as session:
        return _report(session, config, batch_id, crowd, truth, {u.id for u in gold})


def play_frames(session: Session, local: Any, conversations: int, rng: random.Random
                 ) -> tuple[int, dict[int, dict[str, Any]]]:
    """A Frames batch on the sample domain, its dialogs written from the database; the true labels by turn."""
    registry.load_tasks(session, frames.read_tasks(SAMPLE))
    tasks = list(session.exec(select(Task).where(Task.protocol == "frames").order_by(Task.id)))
    batch, hits = lifecycle.launch_batch(session, tasks, conversations, name="simulated Frames", max_turns=12,
                                         protocol="frames", scenarios=frames.make_scenarios(tasks, conversations,
                                                                                            seed=rng.random()))
    user, wizard = (new_worker(session, f"sim-frames-{role}", role) for role in ("user", "wizard"))
    items = frames.loaded(tasks[0]).items
    truth: dict[int, dict[str, Any]] = {}
    for hit in hits:
        lifecycle.publish_hit(session, local, hit.id)
        trip = items[rng.choice(sorted(items))]
        for role, searches, text, labels, complete in _dialog(trip, rng):
            turn_hit = session.exec(select(Turn).where(Turn.conversation_id == session.get(Turn, hit.turn_id)
                                                       .conversation_id, Turn.status == "open")).one()
            worker = user if role == "user" else wizard
            open_hit = lifecycle.open_hits_for(session, worker, limit=100)
            mine = next(h for h in open_hit if h.turn_id == turn_hit.id)
            assignment = lifecycle.take_turn(session, worker, mine.id, lease_seconds=600)
            for search in searches:
                frames.record_action(session, turn_hit, worker, "search", search)
            frames.submit_turn(session, assignment.external_id, worker,
                               {"action": "utter", "text": text, **({"complete": "yes"} if complete else {})})
            truth[turn_hit.id] = labels
            opened = lifecycle.advance_conversation(session, turn_hit.conversation_id)
            if opened is not None:
                lifecycle.publish_hit(session, local, opened.id)
    return batch.id, truth


def _dialog(trip: dict[str, Any], rng: random.Random) -> list[tuple[str, list, str, dict[str, Any], bool]]:
    """Five turns about one package of the database, each with the labels its writer meant."""
    origin, destination, price = trip["origin"], trip["destination"], str(trip["price"])
    found = rng.random() < 0.7
    search = {"constraints": {"origin": origin, "destination": destination,
                              **({} if found else {"price": {"at_most": 100}})}}

    def labels(*acts: tuple, frames_: tuple = ()) -> dict[str, Any]:
        return L.collect([*({"act": a, **({"slot": s, "value": v} if s else {})} for a, s, v in acts),
                          *({"relation": r, "frame": n} for r, n in frames_)])

    turns = [("user", [], f"Hello! I want to fly from {origin} to {destination}.",
              labels(("greeting", None, None), ("inform", "origin", origin), ("inform", "destination", destination)),
              False)]
    if found:
        turns += [("wizard", [search], f"I have a trip to {destination} for {price} dollars.",
                   labels(("offer", "destination", destination), ("offer", "price", price), frames_=(("creates", 2),)),
                   False),
                  ("user", [], "Great, I will take it. Thank you!",
                   labels(("affirm", None, None), ("thankyou", None, None), frames_=(("refers", 2),)), False)]
    else:
        turns += [("wizard", [search], f"Sorry, I found nothing to {destination} in your budget.",
                   labels(("sorry", None, None), ("no_result", "destination", destination)), False),
                  ("user", [], "Too bad. Thank you anyway!", labels(("thankyou", None, None)), False)]
    turns += [("wizard", [], "You are welcome. Have a nice day!", labels(("you_are_welcome", None, None)), False),
              ("user", [], "Goodbye!", labels(("goodbye", None, None)), True)]
    return turns


def new_worker(session: Session, external_id: str, role: str) -> Worker:
    worker = Worker(external_id=external_id, role=role, onboarded=True)
    session.add(worker)
    session.flush()
    return worker


def _annotators(session: Session, config: AnnotateConfig, rng: random.Random) -> dict[int, float]:
    """The crowd: worker id -> hidden accuracy (the first ``careless`` share careless)."""
    careless = round(config.careless * config.annotators)
    return {new_worker(session, f"sim-annotator-{n + 1}", "annotator").id:
            config.careless_accuracy if n < careless else config.accuracy for n in range(config.annotators)}


def annotate_one(session: Session, worker: Worker, accuracy: float, truth: dict[int, dict[str, Any]],
                  rng: random.Random) -> Optional[int]:
    """The annotator takes the first turn the queue offers and labels it by clicks; returns the submitted
    turn, None if none is left for them (or they are blocked)."""
    taken = take_first_offered(session, worker)
    if taken is None:
        return None
    assignment, turn = taken
    unit = annotate.unit_of(session, turn)
    meant = truth[unit.star["turn_id"]]
    given = meant if rng.random() < accuracy else _slip(meant, rng)
    for action, fields in clicks(given, unit.star["text"]):
        annotate.record_action(session, turn, worker, action, fields)
    annotate.submit_turn(session, assignment.external_id, worker, {})
    return turn.id


SLIP_ACTS = ("inform", "request", "affirm", "negate", "greeting", "thankyou", "goodbye")


def _slip(labels: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The labels with one mistake: an act swapped for another, or a slot forgotten."""
    acts = [dict(a) for a in labels["acts"]]
    n = rng.randrange(len(acts))
    if acts[n]["slots"] and rng.random() < 0.5:
        acts[n]["slots"] = acts[n]["slots"][1:]
    else:
        acts[n]["act"] = rng.choice([a for a in SLIP_ACTS if a not in {x["act"] for x in acts}])
    return L.collect([*({"act": a["act"], **s} for a in acts for s in a["slots"] or [{}]),
                      *labels["frames"]])


def clicks(labels: dict[str, Any], text: str) -> list[tuple[str, dict[str, Any]]]:
    """The clicks that give ``labels``: each value as the run of the turn's words that says it."""
    words = L.words_of(text)
    clicks: list[tuple[str, dict[str, Any]]] = []
    for act in labels["acts"]:
        if not act["slots"]:
            clicks.append(("label", {"act": act["act"]}))
        for slot in act["slots"]:
            run = next([i for i in range(a, b + 1)] for a in range(len(words)) for b in range(a, len(words))
                       if text[words[a][0]:words[b][1]] == slot["value"])
            clicks.append(("label", {"act": act["act"], "slot": slot["slot"], "words": run}))
    clicks += [("frame", dict(f)) for f in labels["frames"]]
    return clicks


def _report(session: Session, config: AnnotateConfig, batch_id: int, crowd: dict[int, float],
            truth: dict[int, dict[str, Any]], gold: set[int]) -> dict[str, Any]:
    careless = {w for w, accuracy in crowd.items() if accuracy == config.careless_accuracy and config.careless}
    blocked = {w for w in crowd if session.get(Worker, w).status != WorkerStatus.active}
    caught = blocked & careless
    units = {t.id: t.star["turn_id"] for t in session.exec(select(Task).where(Task.protocol == "annotate"))}
    final = results.final_labels(session, sorted(units))
    scored = [u for u in units if u not in gold]
    batch = session.get(Batch, batch_id)
    return {
        "parameters": asdict(config),
        "batch": {"id": batch_id, "status": batch.status, "units": len(units),
                  "annotations": sum(len(by) for by in results.annotations(session, batch_id).values())},
        "agreement": results.batch_agreement(session, batch_id),
        "dataset": {"turns_with_labels": sum(1 for u in scored if u in final),
                    "turns_correct": sum(1 for u in scored if u in final
                                         and L.key(final[u]) == L.key(truth[units[u]])),
                    "turns_scored": len(scored), "gold_turns": len(gold)},
        "monitor": {"policy": Policy.of(batch).text, "careless": len(careless), "blocked": len(blocked),
                    "careless_blocked": len(caught), "precision": _share(len(caught), len(blocked)),
                    "recall": _share(len(caught), len(careless))},
    }


def _share(part: int, whole: int) -> Optional[float]:
    return round(part / whole, 4) if whole else None
