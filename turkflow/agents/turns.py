"""An agent's turn from claim to end, as plain functions of a session; ``turkflow.pipeline.answer_agent_turn``
runs them, each in its own transaction, and calls the agent between them with no transaction open.

The turn's row (``AgentTurn``) is the intent, written with the turn's HIT (``hits.agent``). A worker of the
agents queue claims it (waiting to calling, one compare-and-set), asks the agent, and stores the answer through
the protocol's own submit, in one transaction, exactly as a person's page would: an answer the protocol refuses
stores nothing and counts as a failed call. A failed call sends the turn back to waiting, due after a back-off
(a 429's Retry-After when longer): a column beat sweeps, never a countdown. Out of attempts, the conversation
ends with the reason, or the turn opens for people on the batch's platform. Every call is an ``AgentCall``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Optional

from sqlalchemy import bindparam, insert, update
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.agents import views
from turkflow.agents.interface import Reply, TurnView
from turkflow.config import Settings
from turkflow.errors import AgentError
from turkflow.hits import lifecycle
from turkflow.models import (Agent, AgentCall, AgentTurn, AgentTurnStatus, Batch,
                             Conversation, ConversationStatus, Hit, HitStatus, Turn, TurnStatus, Worker, utcnow)
from turkflow.protocols import registry

MAX_STEPS = 6  # calls of one turn's answer (a STAR wizard's query, then its reply): bounded like any retry
S = AgentTurnStatus


@dataclass(frozen=True)
class Claim:
    """An agent turn this worker holds: the agent's row values (the process builds its player from them), the
    attempt, the agent's assignment of the turn's HIT, and why the last answer was refused, if it was."""

    turn_id: int
    agent: Agent
    attempt: int
    assignment: str
    worker_id: int
    protocol: str
    role: str
    refused: Optional[str] = None


@dataclass
class Ended:
    """What ending an agent's turn left to do after commit: a HIT to publish for people, the submitted turn."""

    status: str
    hit_id: Optional[int] = None  # handed to people: the new attempt, to publish on the batch's platform
    provider: Optional[str] = None
    submitted_turn_id: Optional[int] = None
    due_at: Optional[datetime] = None
    notes: list[str] = field(default_factory=list)


_CLAIM = (states.update_to(AgentTurn, S.calling)
          .where(AgentTurn.turn_id == bindparam("turn"), AgentTurn.status == S.waiting,
                 AgentTurn.due_at <= bindparam("now"))
          .values(attempts=AgentTurn.attempts + 1, claimed_until=bindparam("until"))
          .returning(AgentTurn.attempts).execution_options(synchronize_session=False))
_CLAIMING = (select(AgentTurn.hit_id, AgentTurn.status, AgentTurn.due_at, Agent, Turn.role, Batch.protocol)
             .join(Agent, Agent.id == AgentTurn.agent_id).join(Turn, Turn.id == AgentTurn.turn_id)
             .join(Conversation, Conversation.id == Turn.conversation_id)
             .join(Batch, Batch.id == Conversation.batch_id).where(AgentTurn.turn_id == bindparam("turn")))
_LAST_CALL = (select(AgentCall.outcome, AgentCall.detail).where(AgentCall.turn_id == bindparam("turn"))
              .order_by(col(AgentCall.id).desc()).limit(1))


def claim(session: Session, turn_id: int, now: Optional[datetime] = None) -> Optional[Claim]:
    """Take the turn for this call if it is due and nobody has it (one write, what it needs read first); None
    otherwise (a duplicate message, a turn answered or ended: seen in the read, so it writes nothing and never
    waits for SQLite's write lock). It is held as long as the agent's calls may take; beat's sweep gives a turn
    held longer to another worker. The agent's assignment of the HIT was written with the turn (``hits.agent``)."""
    now = now or utcnow()
    found = session.execute(_CLAIMING, {"turn": turn_id}).first()
    if found is None or found.status != S.waiting or found.due_at > now:
        return None
    hit_id, _, _, agent, role, protocol = found
    until = now + timedelta(seconds=agent.timeout_seconds * MAX_STEPS * 2 + 30)
    row = session.execute(_CLAIM, {"turn": turn_id, "now": now, "until": until}).first()
    if row is None:
        return None
    last = session.execute(_LAST_CALL, {"turn": turn_id}).first()
    session.expunge(agent)
    return Claim(turn_id, agent, row[0], f"agent-{hit_id}", agent.worker_id, protocol, role,
                 refused=last.detail if last is not None and last.outcome == "invalid" else None)


def still_open(session: Session, turn_id: int) -> bool:
    turn = session.get(Turn, turn_id)
    conversation = session.get(Conversation, turn.conversation_id)
    return turn.status == TurnStatus.open and conversation.status == ConversationStatus.active


def view(session: Session, claimed: Claim, steps: list[dict[str, Any]]) -> TurnView:
    """What the agent sees now: the turn's page after this turn's earlier ``steps``, which are taken here and
    rolled back by the caller (they are stored with the answer, all in one transaction)."""
    turn = session.get(Turn, claimed.turn_id)
    worker = session.get(Worker, claimed.worker_id)
    if registry.logged(claimed.protocol) is not None:
        parts = registry.parts(claimed.protocol)
        if claimed.protocol == "star" and turn.role == "user":
            parts.give_nudges(session, turn)  # as the user's page does before the user writes
        for step in steps:
            _act(parts, session, turn, worker, step)
    return views.turn_view(session, turn, worker.id, steps=steps, refused=claimed.refused)


def store(session: Session, claimed: Claim, steps: list[dict[str, Any]], final: dict[str, Any],
          reply: Reply, latency_ms: int, called_at: Optional[datetime] = None) -> Ended:
    """Store the answer as the role's page would submit it, the call that gave it and the turn's end, in one
    transaction. Raises what the protocol raises for a refused answer (nothing is stored then)."""
    turn = session.get(Turn, claimed.turn_id)
    worker = session.get(Worker, claimed.worker_id)
    if registry.logged(claimed.protocol) is not None:
        parts = registry.parts(claimed.protocol)
        for step in steps:
            _act(parts, session, turn, worker, step)
        submission = parts.submit_turn(session, claimed.assignment, worker, submit_body(claimed, final))
    else:
        submission = lifecycle.submit_turn(session, claimed.assignment, worker, final)
    record_call(session, claimed, "ok", "", reply.structured, reply, latency_ms, called_at)
    tokens = {"prompt_tokens": AgentTurn.prompt_tokens + (reply.prompt_tokens or 0),
              "completion_tokens": AgentTurn.completion_tokens + (reply.completion_tokens or 0)}
    _end(session, claimed, S.answered, None, latency_ms=latency_ms, **tokens)
    return Ended(S.answered, submitted_turn_id=submission.turn.id if submission.created else None)


def _act(parts: Any, session: Session, turn: Turn, worker: Worker, step: dict[str, Any]) -> None:
    """One in-turn action as the role's page posts it (``take_action``, else ``record_action``)."""
    fields = dict(step)
    act = getattr(parts, "take_action", None) or parts.record_action
    act(session, turn, worker, fields.pop("action", None), fields)


def submit_body(claimed: Claim, final: dict[str, Any]) -> dict[str, Any]:
    """The closing answer as the role's submit takes it: MEEP's user page posts its text (or its verdict) with no
    action's name; the others post the action."""
    if claimed.protocol == "meep" and claimed.role == "user":
        return {k: v for k, v in final.items() if k != "action"}
    return dict(final)


def closes(claimed: Claim, answer: dict[str, Any]) -> bool:
    """Whether an answer ends the turn: every form answer does; a logged protocol's closing action does."""
    if registry.logged(claimed.protocol) is None:
        return True
    return answer.get("action") in views.closing(claimed.protocol, claimed.role)


_CALL = insert(AgentCall.__table__)


def record_call(session: Session, claimed: Claim, outcome: str, detail: str, structured: Optional[str],
                reply: Optional[Reply], latency_ms: int, called_at: Optional[datetime] = None) -> None:
    """One call, started at ``called_at`` (None: no call was made, it is now)."""
    session.connection().execute(_CALL, {
        "turn_id": claimed.turn_id, "agent_id": claimed.agent.id, "attempt": claimed.attempt, "outcome": outcome,
        "detail": detail[:1000], "structured": structured, "latency_ms": latency_ms,
        "started_at": called_at or utcnow(),
        "prompt_tokens": reply.prompt_tokens if reply else None,
        "completion_tokens": reply.completion_tokens if reply else None})


def _end(session: Session, claimed: Claim, to: str, reason: Optional[str], **values: Any) -> bool:
    done = session.execute(states.update_to(AgentTurn, to).where(AgentTurn.turn_id == claimed.turn_id)
                           .values(reason=reason, ended_at=utcnow(), claimed_until=None, **values)
                           .execution_options(synchronize_session=False)).rowcount == 1
    return done


def cancelled(session: Session, claimed: Claim, latency_ms: int, reply: Optional[Reply] = None,
              called_at: Optional[datetime] = None) -> Ended:
    """The conversation ended (cancelled, or its turn closed) before the answer was stored: nothing is stored;
    the call is recorded."""
    record_call(session, claimed, "cancelled", "the turn was no longer open when the answer came",
                reply.structured if reply else None, reply, latency_ms, called_at)
    _end(session, claimed, S.cancelled, "the conversation ended before the answer")
    return Ended(S.cancelled)


def failed(session: Session, settings: Settings, claimed: Claim, error: AgentError, latency_ms: int,
           now: Optional[datetime] = None, called_at: Optional[datetime] = None) -> Ended:
    """A call that gave nothing usable: recorded; the turn is due again after the back-off, or, out of attempts,
    ends as its batch says (``Batch.on_agent_failure``)."""
    now = now or utcnow()
    record_call(session, claimed, error.outcome, error.message, error.structured, None, latency_ms, called_at)
    reason = f"{error.outcome}: {error.message}"[:500]
    if claimed.attempt < settings.agent_attempts:
        wait = min(settings.agent_backoff_max_seconds, settings.agent_backoff_seconds * 2 ** (claimed.attempt - 1))
        due = now + timedelta(seconds=max(wait, error.retry_after or 0))
        session.execute(states.update_to(AgentTurn, S.waiting).where(AgentTurn.turn_id == claimed.turn_id)
                        .values(due_at=due, claimed_until=None, reason=reason)
                        .execution_options(synchronize_session=False))
        return Ended(S.waiting, due_at=due)
    turn = session.get(Turn, claimed.turn_id)
    conversation = session.get(Conversation, turn.conversation_id)
    batch = session.get(Batch, conversation.batch_id)
    where = dict(batch_id=batch.id, conversation_id=conversation.id, turn_id=turn.id, worker_id=claimed.worker_id)
    if batch.on_agent_failure == "people" and turn.status == TurnStatus.open:
        hit = session.exec(select(Hit).where(Hit.turn_id == turn.id, col(Hit.status).in_(
            [HitStatus.pending, HitStatus.open]))).first()
        attempt = lifecycle.reopen_turn(session, hit, "agent_failed", provider=batch.provider) if hit else None
        _end(session, claimed, S.handed_over, reason)
        events.record(session, "agent_turn_handed_over", "system", **where, agent=claimed.agent.name, reason=reason,
                      attempts=claimed.attempt)
        return Ended(S.handed_over, hit_id=attempt.id if attempt else None, provider=batch.provider)
    _end(session, claimed, S.failed, reason)
    lifecycle.end_conversation(session, conversation.id, "agent_failed")
    events.record(session, "agent_turn_failed", "system", **where, agent=claimed.agent.name, reason=reason,
                  attempts=claimed.attempt)
    return Ended(S.failed)


def remember_mode(session: Session, agent_id: int, mode: Optional[str]) -> None:
    """The structured-output mode an endpoint last accepted: its next calls start there."""
    if mode in ("json_schema", "json_object", "prompted"):
        session.execute(update(Agent).where(Agent.id == agent_id, col(Agent.structured).is_distinct_from(mode))
                        .values(structured=mode))


# ---- beat's sweep ------------------------------------------------------------------------------------------


_LOST = (states.update_to(AgentTurn, S.waiting)  # claimed by a worker that died or lost its message mid-call
         .where(AgentTurn.status == S.calling, AgentTurn.claimed_until < bindparam("now"))
         .values(claimed_until=None).execution_options(synchronize_session=False))
_ANY_LOST = (select(AgentTurn.turn_id).where(AgentTurn.status == S.calling, AgentTurn.claimed_until < bindparam("now"))
             .limit(1))
_ENDED_ELSEWHERE = (select(AgentTurn.turn_id).join(Turn, Turn.id == AgentTurn.turn_id)
                    .where(col(AgentTurn.status).in_([S.waiting]), Turn.status != TurnStatus.open))
_DUE = (select(AgentTurn.turn_id).where(
    AgentTurn.status == S.waiting, AgentTurn.due_at <= bindparam("now"),
    (col(AgentTurn.claimed_until).is_(None)) | (AgentTurn.claimed_until < bindparam("now")))
    .order_by(AgentTurn.due_at).limit(bindparam("limit")))


def sweep(session: Session, now: Optional[datetime] = None, limit: int = 500,
          queued_for: timedelta = timedelta(seconds=30)) -> list[int]:
    """The agent turns to ask now (due after a back-off, or given back by a worker lost mid-call), each marked
    as queued for ``queued_for`` so the next sweeps do not queue it again meanwhile; agent turns whose turn
    closed otherwise (the batch cancelled) end as cancelled. It writes only what it finds: on SQLite a sweep that
    finds nothing takes no turn at the one write lock."""
    now = now or utcnow()
    if session.execute(_ANY_LOST, {"now": now}).first() is not None:
        session.execute(_LOST, {"now": now})
    gone = list(session.execute(_ENDED_ELSEWHERE).scalars())
    if gone:
        session.execute(states.update_to(AgentTurn, S.cancelled).where(col(AgentTurn.turn_id).in_(gone))
                        .values(reason="the conversation ended before the answer", ended_at=now)
                        .execution_options(synchronize_session=False))
    due = list(session.execute(_DUE, {"now": now, "limit": limit}).scalars())
    if due:
        session.execute(update(AgentTurn).where(col(AgentTurn.turn_id).in_(due))
                        .values(claimed_until=now + queued_for).execution_options(synchronize_session=False))
    return due
