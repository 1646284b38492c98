"""Per-turn pairwise: with two or more agents for a role and ``Batch.pairwise``, each of that role's turns is
answered by two agents, and the person who writes the next turn sees both replies and picks one, which the
dialog continues with (the data reward models and preference tuning are trained on).

The turn's own agent (the conversation's, ``ConversationAgent``) answers it as always, and a *rival*, another
of the role's agents drawn for the turn, is asked the same view in the same agents-queue task; the rival's
answer is checked as the role's answers are (``validate_answers``), and both are kept as ``Candidate`` rows
in the transaction that stores the turn with its own agent's reply. The next turn then opens as usual: its
page shows the two replies in place of that turn, in an order that alternates from turn to turn, and asks
which one the person continues with (and, if they like, why). Their submit records the ``Pick`` and, when
they chose the rival, rewrites the turn as the rival wrote it (its text, answers and writer), before their own
turn is stored, in one transaction: the rating they give is of the reply they chose. A rival that fails or
answers what the protocol refuses is recorded as a call of that agent, and the turn stays its own agent's,
with nothing to pick.

Replies written in one answer only: Wizard of Tasks turns (STAR's, Frames' and MEEP's take in-turn actions
whose results belong to one agent's reply), on the local queue.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import update
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.agents.interface import Reply
from turkflow.agents.turns import record_call
from turkflow.dataset.export import ExportFilters, anonymize
from turkflow.errors import AgentError, InvalidAnswer, InvalidInput
from turkflow.hits import lifecycle
from turkflow.models import Agent, Batch, Candidate, Conversation, Pick, Task, Turn, TurnStatus, Worker
from turkflow.protocols.questions import clean_text, get_protocol, validate_answers

CHOICES = ("first", "second")  # the pick's values: the reply shown first (left, or above) or second
MAX_REASON = 500


def rival(session: Session, turn_id: int, agent: Agent) -> Optional[Agent]:
    """The other agent asked for this turn when its batch compares its role turn by turn: one of the role's
    agents but ``agent``, drawn for the turn; None otherwise."""
    turn = session.get(Turn, turn_id)
    batch = session.exec(select(Batch).join(Conversation, Conversation.batch_id == Batch.id)
                         .where(Conversation.id == turn.conversation_id)).one()
    if not batch.pairwise or turn.role not in lifecycle.pairwise_roles(batch.protocol, batch.agents):
        return None
    others = sorted(name for name in batch.agents[turn.role] if name != agent.name)
    if not others:
        return None
    found = session.exec(select(Agent).where(Agent.name == random.Random(f"rival:{turn_id}").choice(others))).one()
    session.expunge(found)
    return found


@dataclass(frozen=True)
class Offer:
    """The rival's reply to the turn, as it came."""

    agent: Agent
    reply: Reply
    latency_ms: int
    called_at: datetime


def record(session: Session, claimed: Any, offer: Offer) -> list[Candidate]:
    """Keep both replies of a turn just stored with its own agent's: that one as the turn holds it, the rival's
    checked as the role's answers (one the protocol refuses is recorded as the rival's failed call, and there
    is then nothing to pick). ``claimed``: the turn's ``agents.turns.Claim``."""
    as_rival = replace(claimed, agent=offer.agent)
    turn = session.get(Turn, claimed.turn_id)
    try:
        answers = check(session, turn, offer.reply.answer)
    except InvalidInput as refused:
        record_call(session, as_rival, "invalid", refused.message, offer.reply.structured, offer.reply,
                    offer.latency_ms, offer.called_at)
        return []
    record_call(session, as_rival, "ok", "", offer.reply.structured, offer.reply, offer.latency_ms,
                offer.called_at)
    form = get_protocol(claimed.protocol).form(turn.role)
    response = next(q.name for q in form.questions if q.is_response)
    own = Candidate(turn_id=turn.id, agent_id=claimed.agent.id, text=turn.text or "", label=turn.label,
                    answers=dict(turn.answers))
    theirs = Candidate(turn_id=turn.id, agent_id=offer.agent.id, text=answers[response],
                       label=answers[form.label_question().name], answers=answers,
                       prompt_tokens=offer.reply.prompt_tokens, completion_tokens=offer.reply.completion_tokens,
                       latency_ms=offer.latency_ms)
    session.add_all([own, theirs])
    session.flush()
    return [own, theirs]


def failed(session: Session, claimed: Any, agent: Agent, error: AgentError, latency_ms: int,
           called_at: datetime) -> None:
    """The rival gave nothing usable: its call, started at ``called_at``, is recorded; the turn stays its own
    agent's."""
    record_call(session, replace(claimed, agent=agent), error.outcome, error.message, error.structured, None,
                latency_ms, called_at)


def check(session: Session, turn: Turn, answer: Any) -> dict[str, Any]:
    """An answer to ``turn`` as its role's page would store it (what ``lifecycle.submit_turn`` checks)."""
    if not isinstance(answer, dict):
        raise InvalidInput("expected the answers as an object", "answer")
    conversation = session.get(Conversation, turn.conversation_id)
    batch = session.get(Batch, conversation.batch_id)
    context = lifecycle.turn_context(session, turn, session.get(Task, conversation.task_id))
    return validate_answers(get_protocol(batch.protocol), context, answer)


# ---- the person's pick ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pending:
    """Two replies of the turn before ``turn`` still to pick from, in the order the page shows them."""

    turn_id: int  # the agents' turn
    index: int
    first: Candidate
    second: Candidate

    def view(self) -> dict[str, Any]:
        """What the page and a program get: the replies' text and answers, never the agents."""
        return {"index": self.index, "first": _shown(self.first), "second": _shown(self.second)}


def _shown(candidate: Candidate) -> dict[str, Any]:
    return {"text": candidate.text, "label": candidate.label,
            "shared": list(candidate.answers.get("shared", []))}


def pending(session: Session, turn: Turn) -> Optional[Pending]:
    """The pair of replies the person writing ``turn`` picks from: the turn before it, if two agents answered
    it and nobody has picked yet. The order alternates with the agents' turn's id, so neither agent is always
    shown first."""
    if turn.index == 0:
        return None
    before = session.exec(select(Turn).where(Turn.conversation_id == turn.conversation_id,
                                             Turn.index == turn.index - 1)).first()
    if before is None or before.status != TurnStatus.submitted:
        return None
    offered = list(session.exec(select(Candidate).where(Candidate.turn_id == before.id).order_by(col(Candidate.id))))
    if len(offered) != 2 or session.exec(select(Pick.id).where(Pick.turn_id == before.id)).first() is not None:
        return None
    first, second = offered if before.id % 2 == 0 else offered[::-1]
    return Pending(before.id, before.index, first, second)


def apply_pick(session: Session, turn: Turn, worker: Worker, raw: dict[str, Any]) -> Optional[Pick]:
    """Take the pick out of a submit's fields (``pick``: first or second; ``pick_reason``, optional) and record
    it: the turn before holds the chosen reply from now on. Called in the submit's transaction, before the
    person's own turn is stored; a refusal names the field, and nothing is stored."""
    given, reason = raw.pop("pick", None), raw.pop("pick_reason", None)
    waiting = pending(session, turn)
    if waiting is None:
        if given not in (None, [], ""):
            raise InvalidAnswer("pick", "there are no two replies to pick from on this turn")
        return None
    given = given[0] if isinstance(given, list) and len(given) == 1 else given
    if given not in CHOICES:
        raise InvalidAnswer("pick", "choose the reply you continue with")
    reason = reason[0] if isinstance(reason, list) and len(reason) == 1 else reason or ""
    if not isinstance(reason, str):
        raise InvalidAnswer("pick_reason", "expected text")
    try:
        reason = clean_text(reason, "pick_reason")
    except InvalidInput as bad:
        raise InvalidAnswer("pick_reason", bad.reason) from None
    if len(reason) > MAX_REASON:
        raise InvalidAnswer("pick_reason", f"write at most {MAX_REASON} characters")
    chosen, rejected = (waiting.first, waiting.second) if given == "first" else (waiting.second, waiting.first)
    picked = session.get(Turn, waiting.turn_id)
    writer = session.get(Agent, chosen.agent_id).worker_id
    if picked.worker_id != writer:  # the rival's reply: the turn is now as the rival wrote it
        session.execute(update(Turn).where(Turn.id == picked.id).values(
            text=chosen.text, label=chosen.label, answers=chosen.answers, worker_id=writer)
            .execution_options(synchronize_session="fetch"))
        lifecycle.record_writer(session, session.get(Conversation, picked.conversation_id).batch_id, writer)
    pick = Pick(turn_id=picked.id, chosen_id=chosen.id, rejected_id=rejected.id, first_id=waiting.first.id,
                worker_id=worker.id, picker_turn_id=turn.id, reason=reason)
    session.add(pick)
    session.flush()
    conversation = session.get(Conversation, turn.conversation_id)
    events.record(session, "pairwise_picked", f"worker:{worker.id}", batch_id=conversation.batch_id,
                  conversation_id=conversation.id, turn_id=picked.id, worker_id=worker.id, pick_id=pick.id,
                  chosen_agent_id=chosen.agent_id, rejected_agent_id=rejected.agent_id, shown_first=given == "first")
    return pick


# ---- the picks as preference pairs -------------------------------------------------------------------------

FILE = "preferences.jsonl"


def preferences(session: Session, filters: ExportFilters, hash_key: str) -> list[dict[str, Any]]:
    """Every pick in the conversations an export with ``filters`` writes, as a preference pair, in pick order:
    ``prompt`` (the dialog before the turn, as it stands: earlier picks applied), ``chosen`` and ``rejected``
    (each reply's text, label, answers and agent), which was shown first, the person's reason, and who picked
    (a keyed hash, as every export names workers)."""
    rows = session.exec(
        select(Pick, Turn, Conversation, Batch, Task).join(Turn, Turn.id == Pick.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id).join(Batch, Batch.id == Conversation.batch_id)
        .join(Task, Task.id == Conversation.task_id).where(*filters.conditions()).order_by(col(Pick.id))).all()
    candidates = {c.id: c for c in session.exec(select(Candidate).where(col(Candidate.turn_id).in_(
        [turn.id for _, turn, *_ in rows])))}
    agents = dict(session.exec(select(Agent.id, Agent.name)).all())
    pickers = dict(session.exec(select(Worker.id, Worker.external_id).where(
        col(Worker.id).in_({pick.worker_id for pick, *_ in rows}))).all())
    found = []
    for pick, turn, conversation, batch, task in rows:
        before = session.exec(select(Turn.role, Turn.text).where(
            Turn.conversation_id == conversation.id, Turn.index < turn.index, Turn.status == TurnStatus.submitted)
            .order_by(col(Turn.index))).all()
        chosen, rejected = candidates[pick.chosen_id], candidates[pick.rejected_id]
        found.append({
            "id": f"pick-{pick.id}", "batch": {"id": batch.id, "name": batch.name, "protocol": batch.protocol},
            "conversation_id": conversation.id, "task": {"key": task.key, "title": task.title},
            "turn_index": turn.index, "role": turn.role,
            "prompt": [{"role": role, "text": text or ""} for role, text in before],
            "chosen": _reply(chosen, agents), "rejected": _reply(rejected, agents),
            "shown_first": "chosen" if pick.first_id == chosen.id else "rejected", "reason": pick.reason,
            "picker": anonymize(hash_key, pickers[pick.worker_id]), "picked_at": pick.at.isoformat()})
    return found


def _reply(candidate: Candidate, agents: dict[int, str]) -> dict[str, Any]:
    return {"text": candidate.text, "label": candidate.label, "answers": candidate.answers,
            "agent": agents[candidate.agent_id]}


def write_preferences(directory: Path, found: list[dict[str, Any]]) -> Optional[Path]:
    """``directory/preferences.jsonl``, one pair a line (nothing when nobody picked), written whole or not at
    all."""
    if not found:
        return None
    path = Path(directory) / FILE
    partial = path.with_name(f".{FILE}.partial-{os.getpid()}")
    partial.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in found), encoding="utf-8")
    partial.replace(path)
    return path

