"""Which two dialogs a judge compares next, and what judges have said so far.

The dialogs are the finished conversations of the batches a comparison batch was launched ``of``. Each has a
*system*: the agent that played its assisting role, else the people of its batch. Two dialogs are comparable
when they are about the same task and come from different systems. The pair a judge is shown is chosen when
they first open their turn (``choose``), from what the batch knows then:

- every judge's unit is either a vote or a known-answer pair (``gold_due``): one before each of their first
  ``probation`` votes, then one unit in every ``gold_every``; a known-answer pair is a finished dialog beside a
  copy of it whose assistant says something planted (``turkflow.protocols.compare.known``), the good one on
  the left for one of each two such pairs of a judge and on the right for the other;
- a vote's two systems are drawn ``adaptive``ly (a pair in proportion to the chance that the votes so far
  order it wrongly, ``ranking.uncertainty``) or ``uniform``ly (the pair with the fewest votes);
- its two dialogs are the pair of those systems on a common task that the batch has shown least, never one
  this judge was shown before, and the system shown less often on the left of this pair goes on the left.

Nothing of this reaches the judge but the two dialogs' turns; the pair is logged as the judge's ``shown``
event in their turn, which the submit and the report read.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Optional

from sqlalchemy import and_, or_
from sqlmodel import Session, col, select

from turkflow.errors import Conflict, InvalidInput
from turkflow.models import (
    Agent, Batch, Conversation, ConversationAgent, ConversationStatus, DialogEvent, Task, Turn, TurnStatus, Worker,
    WorkerStatus,
)
from turkflow.protocols.compare.known import PLANTED
from turkflow.protocols.questions import get_protocol

if TYPE_CHECKING:
    from turkflow.protocols.compare.ranking import Vote

# ``ranking`` (scipy) is imported where votes are counted or a pair is drawn, not when the web app imports this
# module: a web process that never shows a comparison starts without scipy.

ADAPTIVE, UNIFORM = "adaptive", "uniform"
STRATEGIES = (ADAPTIVE, UNIFORM)
SHOWN = "shown"  # the judge's event that holds their pair
FLOOR = 0.01  # every comparable pair keeps at least this weight in the adaptive draw
AGENT_FAILED = "agent_failed"  # the end reason of a conversation an agent's failure ended


@dataclass(frozen=True)
class Source:
    """A finished dialog that may be compared: its task, its system and its batch's protocol."""

    conversation_id: int
    task_id: int
    system: str
    protocol: str


def sources(session: Session, batch_ids: Iterable[int]) -> dict[int, Source]:
    """The finished conversations of these batches, by id (not those an agent's failure ended: a dialog cut
    short is not one to judge; the agents' report counts the failures)."""
    rows = list(session.exec(
        select(Conversation.id, Conversation.task_id, Conversation.batch_id, Batch.protocol)
        .join(Batch, Batch.id == Conversation.batch_id)
        .where(col(Conversation.batch_id).in_(list(batch_ids)), Conversation.status == ConversationStatus.completed,
               or_(col(Conversation.end_reason).is_(None), Conversation.end_reason != AGENT_FAILED))
        .order_by(col(Conversation.id))))
    played: dict[int, dict[str, str]] = {}
    for conversation, role, name in session.exec(
            select(ConversationAgent.conversation_id, ConversationAgent.role, Agent.name)
            .join(Agent, Agent.id == ConversationAgent.agent_id)
            .where(col(ConversationAgent.conversation_id).in_([row[0] for row in rows]))):
        played.setdefault(conversation, {})[role] = name
    return {cid: Source(cid, task, system_of(batch, played.get(cid)), protocol) for cid, task, batch, protocol in rows}


def system_of(batch_id: int, agents: Optional[dict[str, str]] = None) -> str:
    """The system a dialog comes from: the agent that played in it (each role's, if agents played several),
    else the people of its batch."""
    if not agents:
        return f"people of batch {batch_id}"
    if len(agents) == 1:
        return next(iter(agents.values()))
    return ", ".join(f"{role}={name}" for role, name in sorted(agents.items()))


def comparable(found: dict[int, Source]) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Each pair of systems (in name order) with every pair of their dialogs on a common task."""
    by: dict[tuple[int, str], list[int]] = {}
    for s in found.values():
        by.setdefault((s.task_id, s.system), []).append(s.conversation_id)
    systems = sorted({s.system for s in found.values()})
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for n, a in enumerate(systems):
        for b in systems[n + 1:]:
            dialogs = [(x, y) for (task, system), mine in by.items() if system == a
                       for x in mine for y in by.get((task, b), [])]
            if dialogs:
                pairs[(a, b)] = dialogs
    return pairs


# ---- what judges said ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """A submitted judgement with the pair it was about (the judge's ``shown`` event)."""

    turn_id: int
    judge: int
    judge_active: bool
    shown: dict[str, Any]
    choice: str
    reason: str

    @property
    def gold(self) -> bool:
        return bool(self.shown.get("gold"))

    @property
    def vote(self) -> Vote:
        from turkflow.protocols.compare.ranking import Vote

        return Vote(self.shown["left"]["system"], self.shown["right"]["system"], self.choice, self.judge)


def judgements(session: Session, batch_id: int, judge: Optional[int] = None) -> list[Judgement]:
    """The batch's submitted judgements, oldest first (of one judge, if given)."""
    query = (select(Turn.id, Turn.worker_id, Worker.status, Turn.answers, Turn.text, DialogEvent.data)
             .join(Conversation, Conversation.id == Turn.conversation_id)
             .join(Worker, Worker.id == Turn.worker_id)
             .join(DialogEvent, and_(DialogEvent.turn_id == Turn.id, DialogEvent.worker_id == Turn.worker_id,
                                     DialogEvent.action == SHOWN))
             .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.submitted)
             .order_by(col(Turn.id), col(DialogEvent.id)))
    if judge is not None:
        query = query.where(Turn.worker_id == judge)
    found: dict[int, Judgement] = {}
    for turn_id, worker_id, status, answers, text, shown in session.exec(query):
        found.setdefault(turn_id, Judgement(turn_id, worker_id, status == WorkerStatus.active, shown,
                                            answers["choice"], text or ""))
    return list(found.values())


def votes(found: Iterable[Judgement], include_blocked: bool = False) -> list[Vote]:
    """The votes among judgements (not the known-answer pairs), by default only of judges not blocked."""
    return [j.vote for j in found if not j.gold and (include_blocked or j.judge_active)]


def shown_in(session: Session, batch_id: int) -> list[DialogEvent]:
    """Every pair the batch has shown, submitted or not, oldest first."""
    return list(session.exec(
        select(DialogEvent).join(Conversation, Conversation.id == DialogEvent.conversation_id)
        .where(Conversation.batch_id == batch_id, DialogEvent.action == SHOWN).order_by(col(DialogEvent.id))))


# ---- choosing ---------------------------------------------------------------------------------------------


def gold_due(earlier: list[bool], probation: int, gold_every: int) -> bool:
    """Whether a judge's next unit is a known-answer pair, given whether each of their submitted units was one
    (oldest first): before each of their first ``probation`` votes, then once in every ``gold_every`` units."""
    if earlier.count(False) < probation:
        return not earlier or not earlier[-1]
    since = 0
    for gold in reversed(earlier):
        if gold:
            break
        since += 1
    return gold_every > 0 and since >= gold_every - 1


def choose(session: Session, batch_id: int, task: Task, turn: Turn, worker: Worker) -> dict[str, Any]:
    """The pair ``worker`` is shown in ``turn`` (not logged: the caller logs it as their ``shown`` event)."""
    plan = task.star
    rng = random.Random(f"{plan['seed']}:{turn.id}:{worker.id}")
    found = sources(session, plan["of"])
    mine = judgements(session, batch_id, judge=worker.id)
    everything = shown_in(session, batch_id)
    seen = [e.data for e in everything if e.worker_id == worker.id]
    if gold_due([j.gold for j in mine], plan["probation"], plan["gold_every"]):
        pair = known_pair(session, found, seen, plan["seed"], worker.id, rng)
        if pair is not None:
            return pair
    return vote_pair(session, batch_id, found, everything, seen, plan["pairs"], rng)


def vote_pair(session: Session, batch_id: int, found: dict[int, Source], everything: list[DialogEvent],
              seen: list[dict[str, Any]], strategy: str, rng: random.Random) -> dict[str, Any]:
    options = comparable(found)
    judged = {frozenset((d["left"]["conversation"], d["right"]["conversation"])) for d in seen if not d.get("gold")}
    open_pairs = {pair: [d for d in dialogs if frozenset(d) not in judged] for pair, dialogs in options.items()}
    open_pairs = {pair: dialogs for pair, dialogs in open_pairs.items() if dialogs}
    if not open_pairs:
        raise Conflict("you have compared every pair of dialogs this batch has; take a turn of another batch")
    systems = sorted({s for pair in options for s in pair})
    weights = pair_weights(systems, list(open_pairs), votes(judgements(session, batch_id)), strategy)
    a, b = rng.choices(list(open_pairs), weights=[weights[p] for p in open_pairs])[0]
    shown = [e.data for e in everything if not e.data.get("gold")]
    times = Counter(frozenset((d["left"]["conversation"], d["right"]["conversation"])) for d in shown)
    appearances = Counter(c for d in shown for c in (d["left"]["conversation"], d["right"]["conversation"]))
    least = min((times[frozenset(d)], appearances[d[0]] + appearances[d[1]]) for d in open_pairs[(a, b)])
    x, y = rng.choice([d for d in open_pairs[(a, b)]
                       if (times[frozenset(d)], appearances[d[0]] + appearances[d[1]]) == least])
    on_left = Counter(d["left"]["system"] for d in shown if {d["left"]["system"], d["right"]["system"]} == {a, b})
    a_left = on_left[a] < on_left[b] or (on_left[a] == on_left[b] and rng.random() < 0.5)
    left, right = (x, y) if a_left else (y, x)
    return {"gold": False, "left": {"conversation": left, "system": found[left].system},
            "right": {"conversation": right, "system": found[right].system}}


def pair_weights(systems: list[str], pairs: list[tuple[str, str]], given: list[Vote],
                 strategy: str) -> dict[tuple[str, str], float]:
    """How likely each pair of systems is drawn next: adaptive, the chance that the votes so far order it
    wrongly (at least ``FLOOR``); uniform, only the pairs with the fewest votes."""
    from turkflow.protocols.compare import ranking

    counts = ranking.count(systems, [v for v in given if v.left in systems and v.right in systems])
    place = {(systems[i], systems[j]): k for k, (i, j) in enumerate(counts.pairs)}
    if strategy == UNIFORM:
        fewest = min(counts.votes[place[p]] for p in pairs)
        return {p: float(counts.votes[place[p]] == fewest) for p in pairs}
    chance = ranking.uncertainty(counts, ranking.fit(counts))
    return {p: max(float(chance[place[p]]), FLOOR) for p in pairs}


def known_pair(session: Session, found: dict[int, Source], seen: list[dict[str, Any]], seed: Any, judge: int,
               rng: random.Random) -> Optional[dict[str, Any]]:
    """A finished dialog beside a copy with one assistant turn planted (None when no dialog has an assistant
    turn after the first). The good one's side: of each two known-answer pairs a judge is shown, one left and
    one right, in an order drawn for the two."""
    candidates = plantable(session, found)
    if not candidates:
        return None
    golds = [d for d in seen if d.get("gold")]
    used = Counter(d["conversation"] for d in golds)
    fewest = min(used[c] for c in candidates)
    conversation = rng.choice(sorted(c for c in candidates if used[c] == fewest))
    index, original = rng.choice(candidates[conversation])
    text = rng.choice([t for t in PLANTED if t != original])
    order = random.Random(f"{seed}:{judge}:gold:{len(golds) // 2}").sample(["left", "right"], 2)
    good = order[len(golds) % 2]
    bad = "right" if good == "left" else "left"
    return {"gold": True, "conversation": conversation, "expected": good,
            good: {"conversation": conversation, "planted": None},
            bad: {"conversation": conversation, "planted": {"index": index, "text": text}}}


def plantable(session: Session, found: dict[int, Source]) -> dict[int, list[tuple[int, str]]]:
    """For each finished dialog, its assistant's turns after the first turn of the dialog: (index, text)."""
    assisting = {p: get_protocol(p).next_role(get_protocol(p).first_role) for p in {s.protocol for s in found.values()}}
    rows = session.exec(select(Turn.conversation_id, Turn.index, Turn.role, Turn.text)
                        .where(col(Turn.conversation_id).in_(list(found)), Turn.status == TurnStatus.submitted,
                               Turn.index > 0))
    candidates: dict[int, list[tuple[int, str]]] = {}
    for conversation, index, role, text in rows:
        if role == assisting[found[conversation].protocol] and text:
            candidates.setdefault(conversation, []).append((index, text))
    return {c: sorted(turns) for c, turns in candidates.items()}


# ---- what the judge sees ------------------------------------------------------------------------------------

SPEAKERS = {"wizard": "assistant"}  # as the turn pages name the roles to the other side


def dialogs(session: Session, shown: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """The left and the right dialog of a pair as the judge reads them: speaker and text, with the planted
    turn in place. No id, batch or system: only what was said."""
    ids = {shown[side]["conversation"] for side in ("left", "right")}
    turns: dict[int, list[tuple[int, str, str]]] = {}
    for conversation, index, role, text in session.exec(
            select(Turn.conversation_id, Turn.index, Turn.role, Turn.text)
            .where(col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted).order_by(col(Turn.index))):
        turns.setdefault(conversation, []).append((index, role, text or ""))
    shown_sides = {}
    for side in ("left", "right"):
        planted = shown[side].get("planted")
        shown_sides[side] = [{"speaker": SPEAKERS.get(role, role),
                              "text": planted["text"] if planted and planted["index"] == index else text}
                             for index, role, text in turns.get(shown[side]["conversation"], [])]
    return shown_sides


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise InvalidInput(f"choose {' or '.join(STRATEGIES)}", "pairs")
    return strategy
