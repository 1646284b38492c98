"""What a batch's dialogs say about the agents that played in them, one record per conversation: the unit an
agents' report resamples (``agents.report``) and the export keeps, so the report can be computed again from the
export alone (``turkflow agents report --from``).

A record holds the conversation's agent of each role, how it ended, its success checked against the goal where
the protocol has one (``verified_outcomes`` of its dialog module: Frames' booking, STAR's task outcome, MEEP's
destination), the people's judgements of the agent (their end-of-dialog answers: the success they claim, the
1-5 ratings, why; and, in the Wizard of Tasks, the relevance and usefulness they gave each of its turns), and
every call to the agent (outcome, latency, tokens). People appear only as keyed hashes of their worker ids, as
in every export.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from turkflow.dataset.export import ExportFilters, anonymize
from turkflow.errors import InvalidInput
from turkflow.models import (Agent, AgentCall, AgentTurn, AgentTurnStatus, Batch, Conversation, ConversationAgent,
                             ConversationStatus, Rating, SurveyAnswer, Task, Turn, TurnStatus, Worker, WorkerKind)
from turkflow.protocols import registry, surveys
from turkflow.protocols.questions import EVALUATION_RATINGS, PROTOCOLS, evaluation_survey

FORMAT = "turkflow-agent-evaluation/1"


@dataclass(frozen=True)
class Judgement:
    """A person's end-of-dialog answers about the agent of the other role: the success they claim (None where
    they were not asked), their 1-5 ratings by name, and why."""

    judge: str
    claimed: Optional[bool]
    ratings: dict[str, int]
    reason: Optional[str] = None


@dataclass(frozen=True)
class TurnRating:
    """A person's ratings of one agent turn (Wizard of Tasks: given with their next turn)."""

    turn: int
    judge: str
    relevant: bool
    useful: bool


@dataclass(frozen=True)
class Call:
    """One call to the agent for one of its turns."""

    turn: int
    outcome: str
    latency_ms: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    detail: str = ""


@dataclass(frozen=True)
class Played:
    """What one agent did in one conversation, in one role, and what the people of the other role said of it."""

    agent: str
    turns: int  # the agent's turns stored
    judgements: list[Judgement] = field(default_factory=list)
    ratings: list[TurnRating] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    failed: Optional[str] = None  # why an agent turn out of attempts ended the conversation or went to people


@dataclass(frozen=True)
class Record:
    """One conversation, as the agents' report reads it."""

    conversation_id: int
    task: str
    protocol: str
    status: str
    end_reason: Optional[str]
    turns: int  # every turn stored, people's and agents'
    played: dict[str, Played]  # by role
    verified: Optional[bool] = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def ended(self) -> bool:
        """Over as its protocol ends a dialog, or ended by an agent's failure; not cancelled by the requester."""
        return self.status == ConversationStatus.completed

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "Record":
        values = {k: v for k, v in raw.items() if k != "format"}
        values["played"] = {role: Played(
            agent=p["agent"], turns=p["turns"], failed=p.get("failed"),
            judgements=[Judgement(**j) for j in p.get("judgements", [])],
            ratings=[TurnRating(**r) for r in p.get("ratings", [])],
            calls=[Call(**c) for c in p.get("calls", [])]) for role, p in raw["played"].items()}
        return cls(**values)


def batch_records(session: Session, batch_id: int, hash_key: str) -> list[Record]:
    """The records of a batch's conversations in which an agent played, in conversation order."""
    ids = list(session.exec(select(ConversationAgent.conversation_id).join(
        Conversation, Conversation.id == ConversationAgent.conversation_id)
        .where(Conversation.batch_id == batch_id).distinct()))
    return records(session, sorted(ids), hash_key)


def exported_records(session: Session, filters: ExportFilters, hash_key: str) -> list[Record]:
    """The records of the conversations an export with ``filters`` writes, those in which an agent played."""
    ids = session.exec(select(ConversationAgent.conversation_id).join(
        Conversation, Conversation.id == ConversationAgent.conversation_id)
        .join(Task, Task.id == Conversation.task_id).join(Batch, Batch.id == Conversation.batch_id)
        .where(*filters.conditions()).distinct())
    return records(session, list(ids), hash_key)


def records(session: Session, conversation_ids: Iterable[int], hash_key: str) -> list[Record]:
    """The records of these conversations (those in which an agent played), in conversation order."""
    ids = sorted(set(conversation_ids))
    rows = session.exec(select(Conversation, Batch.protocol, Task.key).join(Batch, Batch.id == Conversation.batch_id)
                        .join(Task, Task.id == Conversation.task_id).where(col(Conversation.id).in_(ids))
                        .order_by(col(Conversation.id))).all()
    agents: dict[int, dict[str, str]] = defaultdict(dict)
    for conversation_id, role, name in session.exec(
            select(ConversationAgent.conversation_id, ConversationAgent.role, Agent.name)
            .join(Agent, Agent.id == ConversationAgent.agent_id).where(col(ConversationAgent.conversation_id).in_(ids))):
        agents[conversation_id][role] = name
    turns = _turns(session, ids)
    judgements = _judgements(session, ids, {c.id: protocol for c, protocol, _ in rows}, agents, hash_key)
    ratings = _turn_ratings(session, ids, hash_key)
    calls = _calls(session, ids)
    failures = _failures(session, ids)
    verified = _verified(session, [(c, protocol) for c, protocol, _ in rows if c.id in agents])
    found = []
    for conversation, protocol, task_key in rows:
        if conversation.id not in agents:
            continue
        by_role = turns[conversation.id]
        played = {role: Played(agent=name, turns=by_role.get(role, 0),
                               judgements=judgements.get((conversation.id, role), []),
                               ratings=ratings.get((conversation.id, role), []),
                               calls=calls.get((conversation.id, role), []),
                               failed=failures.get((conversation.id, role)))
                  for role, name in sorted(agents[conversation.id].items())}
        outcome = verified.get(conversation.id)
        found.append(Record(conversation.id, task_key, protocol, conversation.status, conversation.end_reason,
                            sum(by_role.values()), played, outcome.ok if outcome else None,
                            outcome.evidence if outcome else {}))
    return found


def judges_of(session: Session, batch_id: int, hash_key: str) -> dict[str, Worker]:
    """The people who judged the batch's agents (their end-of-dialog answers, their ratings of agents' turns),
    by the hash the records name them by: the dashboard links a judge to their worker page."""
    conversations = select(ConversationAgent.conversation_id).join(
        Conversation, Conversation.id == ConversationAgent.conversation_id).where(Conversation.batch_id == batch_id)
    answered = select(SurveyAnswer.worker_id).where(col(SurveyAnswer.conversation_id).in_(conversations))
    rated = select(Rating.rater_id).join(Turn, Turn.id == Rating.rated_turn_id).join(
        Agent, Agent.worker_id == Rating.author_id).where(col(Turn.conversation_id).in_(conversations))
    found = session.exec(select(Worker).where(Worker.kind == WorkerKind.person,
                                              col(Worker.id).in_(answered.union(rated)))).all()
    return {anonymize(hash_key, worker.external_id): worker for worker in found}


def _turns(session: Session, ids: list[int]) -> dict[int, dict[str, int]]:
    counted: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for conversation_id, role in session.exec(select(Turn.conversation_id, Turn.role).where(
            col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)):
        counted[conversation_id][role] += 1
    return counted


def _judgements(session: Session, ids: list[int], protocols: Mapping[int, str], agents: Mapping[int, dict[str, str]],
                hash_key: str) -> dict[tuple[int, str], list[Judgement]]:
    """People's end-of-dialog answers, filed under the role of the agent they judged (the other role's)."""
    answers: dict[tuple[int, str, str], dict[str, Any]] = defaultdict(dict)
    for conversation_id, role, question, answer, external_id in session.exec(
            select(SurveyAnswer.conversation_id, SurveyAnswer.role, SurveyAnswer.question, SurveyAnswer.answer,
                   Worker.external_id).join(Worker, Worker.id == SurveyAnswer.worker_id)
            .where(col(SurveyAnswer.conversation_id).in_(ids), Worker.kind == WorkerKind.person)):
        answers[(conversation_id, role, external_id)][question] = answer
    found: dict[tuple[int, str], list[Judgement]] = defaultdict(list)
    for (conversation_id, role, external_id), given in sorted(answers.items()):
        protocol = PROTOCOLS[protocols[conversation_id]]
        judged = [r for r in agents[conversation_id] if r != role]
        asked = surveys.questions_for(protocol, role, frozenset(agents[conversation_id]))
        if not judged or not any(q.name in given for q in evaluation_survey(protocol, role)):
            continue
        claim = next((q.name for q in asked if q.claims_success), None)
        found[(conversation_id, judged[0])].append(Judgement(
            judge=anonymize(hash_key, external_id),
            claimed=given.get(claim) if claim else None,
            ratings={name: given[name] for name in EVALUATION_RATINGS if isinstance(given.get(name), int)},
            reason=given.get("reason")))
    return found


def _turn_ratings(session: Session, ids: list[int], hash_key: str) -> dict[tuple[int, str], list[TurnRating]]:
    """People's ratings of agents' turns, by the conversation and the role the agent played."""
    rated, rater = aliased(Turn), aliased(Worker)
    found: dict[tuple[int, str], list[TurnRating]] = defaultdict(list)
    for conversation_id, role, index, external_id, relevant, useful in session.exec(
            select(rated.conversation_id, rated.role, rated.index, rater.external_id, Rating.relevant, Rating.useful)
            .join(rated, rated.id == Rating.rated_turn_id).join(rater, rater.id == Rating.rater_id)
            .join(Agent, Agent.worker_id == Rating.author_id)
            .where(col(rated.conversation_id).in_(ids), rater.kind == WorkerKind.person)
            .order_by(rated.conversation_id, rated.index)):
        found[(conversation_id, role)].append(TurnRating(index, anonymize(hash_key, external_id), relevant, useful))
    return found


def _calls(session: Session, ids: list[int]) -> dict[tuple[int, str], list[Call]]:
    found: dict[tuple[int, str], list[Call]] = defaultdict(list)
    for conversation_id, role, index, call in session.exec(
            select(Turn.conversation_id, Turn.role, Turn.index, AgentCall).join(Turn, Turn.id == AgentCall.turn_id)
            .where(col(Turn.conversation_id).in_(ids)).order_by(col(AgentCall.id))):
        found[(conversation_id, role)].append(Call(index, call.outcome, call.latency_ms, call.prompt_tokens or 0,
                                                   call.completion_tokens or 0, call.detail[:200]))
    return found


def _failures(session: Session, ids: list[int]) -> dict[tuple[int, str], str]:
    """Why an agent's turn out of attempts ended its conversation (or went to people), by conversation and role."""
    return {(conversation_id, role): reason or status for conversation_id, role, status, reason in session.exec(
        select(AgentTurn.conversation_id, Turn.role, AgentTurn.status, AgentTurn.reason)
        .join(Turn, Turn.id == AgentTurn.turn_id)
        .where(col(AgentTurn.conversation_id).in_(ids),
               col(AgentTurn.status).in_([AgentTurnStatus.failed, AgentTurnStatus.handed_over])))}


def _verified(session: Session, conversations: list[tuple[Conversation, str]]) -> dict[int, registry.Verified]:
    """Success against the goal of the ended conversations, where their protocol checks it."""
    by_protocol: dict[str, list[int]] = defaultdict(list)
    for conversation, protocol in conversations:
        if conversation.status == ConversationStatus.completed:
            by_protocol[protocol].append(conversation.id)
    found: dict[int, registry.Verified] = {}
    for protocol, ids in by_protocol.items():
        check = getattr(registry.parts(protocol), "verified_outcomes", None) if registry.logged(protocol) else None
        if check is not None:
            found.update(check(session, ids))
    return found


# ---- in an export ----------------------------------------------------------------------------------------------

FILE = "evaluation.jsonl"


def write_records(directory: Path, found: list[Record]) -> Optional[Path]:
    """``directory/evaluation.jsonl``, one record a line (nothing when no agent played), written whole or not at
    all: the export keeps what the agents' report is computed from."""
    if not found:
        return None
    path = Path(directory) / FILE
    partial = path.with_name(f".{FILE}.partial-{os.getpid()}")
    partial.write_text("".join(json.dumps(r.as_dict(), ensure_ascii=False) + "\n" for r in found), encoding="utf-8")
    partial.replace(path)
    return path


def read_records(path: Path) -> list[Record]:
    """The records of an export (its ``evaluation.jsonl``, or the directory holding it) or of a report written
    by ``turkflow agents report --json``. Anything else is an ``InvalidInput`` naming the file and line."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file (an export of a batch agents played in holds {FILE})", "from")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".jsonl":
            raw = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            raw = json.loads(text)["conversations"]
        found = [Record.from_dict(r) for r in raw]
    except (ValueError, KeyError, TypeError) as error:
        raise InvalidInput(f"{path}: not an agents' evaluation ({type(error).__name__}: {error})"[:300],
                           "from") from None
    if not found:
        raise InvalidInput(f"{path}: holds no conversation", "from")
    return found
