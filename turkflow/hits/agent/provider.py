"""The provider of turns an agent plays: publishing writes the agent's turn for the agents queue; there is no
platform, no pay, no block, no message."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from sqlalchemy import bindparam, insert
from sqlmodel import Session, select

from turkflow.config import Settings
from turkflow.hits.provider import AGENT, CrowdProvider, HitCheck
from turkflow.models import Agent, AgentTurn, AgentTurnStatus, Assignment, AssignmentStatus, Batch, Bonus, \
    ConversationAgent, Hit, Turn, Worker, utcnow

_PLAYER = (select(ConversationAgent.agent_id, Turn.conversation_id, Agent.worker_id)
           .join(Turn, Turn.conversation_id == ConversationAgent.conversation_id)
           .join(Agent, Agent.id == ConversationAgent.agent_id)
           .where(Turn.id == bindparam("turn"), ConversationAgent.role == bindparam("role")))
_AGENT_TURN = insert(AgentTurn.__table__)
_HELD = insert(Assignment.__table__)


class AgentProvider(CrowdProvider):
    name = AGENT
    calls_platform = False  # published in the opening's transaction: the agent's turn is written with its HIT

    def publish_turn(self, session: Session, hit: Hit, batch: Batch) -> str:
        """Write the agent's turn, due now, and the agent's assignment of the HIT (``external_id`` ``agent-<HIT
        id>``): its actions and its submit then pass the checks a person's do, and asking the agent later takes
        one write. The opening's Celery task asks the agents queue at once, and beat's sweep finds the turn if
        that message is lost. A HIT published again (the reconciler) writes nothing more."""
        connection = session.connection()
        player = connection.execute(_PLAYER, {"turn": hit.turn_id, "role": hit.role}).first()
        if player is None:
            raise ValueError(f"turn {hit.turn_id}: no agent plays its role {hit.role!r} in this conversation")
        written = connection.execute(select(AgentTurn.__table__.c.id).where(
            AgentTurn.__table__.c.turn_id == hit.turn_id)).first()
        if written is None:
            now = utcnow()
            connection.execute(_AGENT_TURN, {
                "turn_id": hit.turn_id, "conversation_id": player.conversation_id, "agent_id": player.agent_id,
                "hit_id": hit.id, "status": AgentTurnStatus.waiting, "attempts": 0, "due_at": now,
                "claimed_until": None, "reason": None, "prompt_tokens": 0, "completion_tokens": 0,
                "latency_ms": 0, "created_at": now, "ended_at": None})
            connection.execute(_HELD, {"hit_id": hit.id, "worker_id": player.worker_id,
                                       "external_id": f"agent-{hit.id}", "status": AssignmentStatus.accepted,
                                       "accepted_at": now, "submitted_at": None, "reviewed_at": None})
        return f"agent-{hit.id}"

    def expire(self, session: Session, hit: Hit) -> None:
        """Nothing to tell anyone: the agents queue stores nothing in a turn that is no longer open."""

    def verify_submission(self, session: Session, hit: Hit, assignment_id: str, worker_id: str) -> None:
        """The agent's assignment is ours alone (``lifecycle.submit_turn`` checks it)."""

    def hits_to_check(self, session: Session, limit: int = 500) -> list[int]:
        """None: no platform holds a record of an agent's turn."""
        return []

    def check_hit(self, session: Session, hit: Hit, now: datetime) -> HitCheck:
        return HitCheck()

    def approvals_due(self, session: Session, settings: Settings, now: datetime, limit: int = 500) -> list[int]:
        """None: an agent's turn is never approved, so it is never paid."""
        return []

    def approve(self, session: Session, assignment: Assignment) -> None:
        """Never paid."""

    def pay_bonus(self, session: Session, bonus: Bonus, worker: Worker, assignment: Assignment) -> list[int]:
        raise ValueError("an agent's turn earns no bonus")  # the monitor never records one (pipeline.review_turns)

    def balance_cents(self, live: bool) -> Optional[int]:
        return None

    def check_onboarding_gate(self, session: Session, live: bool) -> None:
        """Agents take no onboarding quiz."""

    def soft_block(self, session: Session, worker: Worker, reason: str) -> None:
        """Agents are never blocked."""

    def block_permanently(self, session: Session, worker: Worker, reason: str) -> None:
        """Agents are never blocked."""

    def unblock(self, session: Session, worker: Worker) -> None:
        """Agents are never blocked."""

    def notify(self, session: Session, workers: list[Worker], subject: str, message: str) -> None:
        """Nobody to tell."""
