"""Comparison batches on the asynchronous pipeline: judges compare two finished dialogs side by side, one paid
turn per judgement (ACUTE-Eval's protocol).

A comparison batch has one task (key ``compare:...``) whose ``star`` holds what it was launched with: the
question, the batches ``of`` whose dialogs are compared, how pairs are drawn, the judges' probation and how
often a known-answer pair comes, and the seed. Each of its conversations is a *unit* that ends with one vote;
its turns are the judge's, opened from the queue like any turn. When a judge first opens a turn, the pair is
chosen for them (``pairs.choose``) and logged as their ``shown`` event, so a reload shows the same pair and the
submit knows what was judged. A known-answer pair's answer (label ``checked``) does not end the unit: its
next turn opens for another judgement, so the batch still collects as many votes as it was launched for.
The pipeline's review passes what a known-answer pair says of its judge to the quality monitor
(``judged_turn``: kind ``compare_gold``, blocked under the batch's ``judged m of n``).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.errors import InvalidDocument, InvalidInput, NotFound
from turkflow.hits import lifecycle
from turkflow.models import Batch, Conversation, DialogEvent, Task, Turn, Worker
from turkflow.protocols.compare import pairs
from turkflow.protocols.questions import COMPARE, clean_text
from turkflow.protocols.registry import (
    Judged, ReplayDifference, loggable, one, open_submit, own_events, submitted_before,
)

AGENT = "Judge"  # as DialogEvent names who was shown the pair
GOLD = "compare_gold"  # the kind of judged signal a known-answer pair gives
VOTE, CHECKED = "judged", "checked"  # the turn's label: a vote, or an answer to a known-answer pair
MAX_QUESTION = 300
UNIT_TURNS = 50  # a unit's turns at most: a vote ends it, each known-answer pair before it adds one


def plan(session: Session, of_batch_ids: Sequence[int]) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """The pairs of systems the batches' finished dialogs can compare, with their pairs of dialogs; a batch
    that does not exist, is not a batch of dialogs or has nothing to compare is refused naming ``of``."""
    if not of_batch_ids:
        raise InvalidInput("name the batches whose dialogs to compare", "of")
    for batch_id in of_batch_ids:
        batch = session.get(Batch, batch_id)
        if batch is None:
            raise NotFound(f"batch {batch_id} does not exist")
        if batch.protocol in (COMPARE.name, "annotate"):
            raise InvalidInput(f"batch {batch_id} is an {batch.protocol} batch; choose batches of dialogs", "of")
    options = pairs.comparable(pairs.sources(session, of_batch_ids))
    if not options:
        raise InvalidInput(f"batches {', '.join(map(str, of_batch_ids))} have no two finished dialogs of the same "
                           "task from different systems to compare", "of")
    return options


def launch(session: Session, of_batch_ids: Sequence[int], question: str, judges: int, *, strategy: str,
           probation: int, gold_every: int, seed: int = 0, **options: Any) -> tuple[Batch, list[Any]]:
    """A comparison batch: ``judges`` votes for each pair of systems the dialogs can compare (the adaptive
    draw gives more to the pairs it is least sure of), each a unit of its own. ``options`` go to
    ``lifecycle.launch_batch`` (name, provider, reward_cents, budget_cents, quality)."""
    if not isinstance(judges, int) or judges < 1:
        raise InvalidInput("at least one vote per pair of systems", "judges")
    if probation < 0 or gold_every < 0:
        raise InvalidInput("a probation and a known-answer rate of 0 or more", "gold_every")
    text = clean_text(question or "", "question")
    if not text:
        raise InvalidInput("ask the judges a question", "question")
    if len(text) > MAX_QUESTION:
        raise InvalidInput(f"ask in at most {MAX_QUESTION} characters", "question")
    of = sorted(set(of_batch_ids))
    options_ = plan(session, of)
    units = judges * len(options_)
    task = Task(key=f"compare:{'-'.join(map(str, of))}:{secrets.token_hex(4)}", protocol=COMPARE.name, title=text,
                domain="comparison",
                star={"question": text, "of": of, "pairs": pairs.check_strategy(strategy), "probation": probation,
                      "gold_every": gold_every, "seed": seed, "votes": units})
    session.add(task)
    session.flush()
    return lifecycle.launch_batch(session, [task], units, protocol=COMPARE.name, max_turns=UNIT_TURNS,
                                  scenarios=[(task, {"unit": n + 1}) for n in range(units)],
                                  **options)


def unit_task(session: Session, turn: Turn) -> Task:
    conversation = session.get(Conversation, turn.conversation_id)
    task = session.get(Task, conversation.task_id)
    if task is None or task.protocol != COMPARE.name:
        raise NotFound("this turn does not compare dialogs")
    return task


def shown(session: Session, turn: Turn, worker: Worker) -> Optional[dict[str, Any]]:
    """The pair ``worker`` was shown in ``turn``, if any (the first, should two pages have opened at once)."""
    logged = [e for e in own_events(session, turn, worker) if e.action == pairs.SHOWN]
    return logged[0].data if logged else None


def judge_view(session: Session, turn: Turn, worker: Worker) -> dict[str, Any]:
    """The judge's page: the question, the task and the two dialogs. The pair is chosen and logged the first
    time the judge holding the turn opens it."""
    conversation = loggable(session, COMPARE, turn, worker)
    task = unit_task(session, turn)
    pair = shown(session, turn, worker)
    if pair is None:
        pair = pairs.choose(session, conversation.batch_id, task, turn, worker)
        session.add(DialogEvent(conversation_id=conversation.id, turn_id=turn.id, turn_index=turn.index,
                                worker_id=worker.id, agent=AGENT, action=pairs.SHOWN, data=pair))
        session.flush()
    sides = pairs.dialogs(session, pair)
    titles = {session.get(Conversation, pair[side]["conversation"]).task_id for side in ("left", "right")}
    return {"question": task.star["question"], "task": session.get(Task, titles.pop()).title, **sides}


def submit_turn(session: Session, assignment_external_id: str, worker: Worker, body: Mapping[str, Any],
                *, as_answers: bool = False) -> lifecycle.Submission:
    """Store the judge's ``choice`` (left, right or tie) and ``response`` (why) about the pair they were
    shown, through ``lifecycle.submit_turn`` (which checks both as the role's questions). A judge who never
    opened the pair has nothing to judge. A repeated submit returns the stored turn."""
    sent = open_submit(session, COMPARE, assignment_external_id, worker, body, as_answers=as_answers)
    if sent is None:
        return submitted_before(session, assignment_external_id, worker, body)
    choice = one(sent.rest, "choice")
    response = sent.response if as_answers else one(sent.rest, "response")
    if sent.rest:
        refused = "not a question of this turn" if as_answers else "not a field of a submit"
        raise InvalidInput(refused, str(sorted(sent.rest)[0])[:60])
    pair = shown(session, sent.turn, worker)
    if pair is None:
        raise InvalidInput("open the turn's page first: it shows the two dialogs to compare", "choice")
    label = CHECKED if pair.get("gold") else VOTE
    if sent.label is not None and sent.label != label:
        raise InvalidInput(f"this turn's label is {label!r}", sent.label_name)
    answers: dict[str, Any] = {"choice": choice, sent.label_name: label, "response": response}
    if sent.signals is not None:
        answers["signals"] = sent.signals
    return lifecycle.submit_turn(session, assignment_external_id, worker, answers)


def judged_turn(session: Session, turn: Turn) -> list[Judged]:
    """What a submitted judgement says of its judge, for the pipeline's review to pass to the monitor: a
    known-answer pair's answer is ok when it picks the dialog without the planted turn."""
    pair = shown(session, turn, session.get(Worker, turn.worker_id)) if turn.worker_id else None
    if pair is None or not pair.get("gold"):
        return []
    planted = next(pair[side]["planted"] for side in ("left", "right") if pair[side]["planted"])
    chose = turn.answers.get("choice")
    return [Judged(turn, chose == pair["expected"], GOLD,
                   {"expected": pair["expected"], "chose": chose, "dialog": pair["conversation"],
                    "planted_turn": planted["index"] + 1})]


def read_tasks(path: Path) -> list[Task]:
    """A comparison's task is made at launch from the batches it compares, never loaded from a file."""
    raise InvalidDocument(f"{path}: a comparison compares collected dialogs: launch with `turkflow batch launch "
                          "--protocol compare --of BATCH,BATCH --question TEXT --judges N`")


def replay(session: Session, conversation_ids: Sequence[int]) -> tuple[int, list[ReplayDifference]]:
    """A judgement calls nothing that could answer differently now: nothing to replay."""
    raise InvalidInput("a comparison batch calls no database or API; there is nothing to replay", "batch")


def batch_task(session: Session, batch_id: int) -> Task:
    """A comparison batch's task (what it was launched with)."""
    batch = session.get(Batch, batch_id)
    if batch is None or batch.protocol != COMPARE.name:
        raise NotFound(f"comparison batch {batch_id} does not exist")
    return session.exec(select(Task).join(Conversation, Conversation.task_id == Task.id)
                        .where(Conversation.batch_id == batch_id).order_by(col(Conversation.id)).limit(1)).one()
