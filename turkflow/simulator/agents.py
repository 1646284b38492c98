"""Agents in a simulation (``turkflow simulate --agent ROLE=NAME[,NAME...]``): the in-process fake endpoint an
agent called ``fake`` answers through, and what the report says of each agent."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlmodel import Session, col, func, select

from turkflow.agents.registry import add_agent
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.models import Agent, AgentCall, AgentTurn, Conversation, ConversationAgent, Rating
from turkflow.simulator.driver import Outcome


def declare_fake(settings: Settings, url: str) -> None:
    """The agent ``fake``: an endpoint agent at the fake OpenAI-compatible server this process runs."""
    with session_scope(settings.database_url) as session:
        if session.exec(select(Agent.id).where(Agent.name == "fake")).first() is None:
            add_agent(session, "fake", endpoint=url, model="fake-model", timeout_seconds=settings.agent_timeout_seconds)


def agents_report(session: Session, outcome: Outcome) -> dict[str, Any]:
    """Per agent: the conversations it played, its turns and the share right by construction, the simulated
    people's ratings of its turns (relevant and useful, yes shares) and their evaluations at the end (how many,
    the share saying it completed their task), its calls by outcome, tokens and latency. The figures with their
    intervals are ``turkflow agents report``'s, on the simulation's database."""
    played = dict(session.exec(
        select(Agent.name, func.count()).join(ConversationAgent, ConversationAgent.agent_id == Agent.id)
        .join(Conversation, Conversation.id == ConversationAgent.conversation_id)
        .where(Conversation.batch_id == outcome.batch_id).group_by(Agent.name)).all())
    turns: dict[str, list[Any]] = defaultdict(list)
    for record in outcome.agent_turns.values():
        turns[record.agent].append(record)
    by_turn = {record.turn_id: record.agent for record in outcome.agent_turns.values()}
    rated: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for rated_turn, relevant, useful in session.exec(
            select(Rating.rated_turn_id, Rating.relevant, Rating.useful)
            .where(col(Rating.rated_turn_id).in_(list(by_turn)))):
        rated[by_turn[rated_turn]].append((relevant, useful))
    calls: dict[str, dict[str, int]] = defaultdict(dict)
    latency: dict[str, list[int]] = defaultdict(list)
    tokens: dict[str, int] = defaultdict(int)
    for name, outcome_, latency_ms, prompt, completion in session.exec(
            select(Agent.name, AgentCall.outcome, AgentCall.latency_ms, AgentCall.prompt_tokens,
                   AgentCall.completion_tokens).join(Agent, Agent.id == AgentCall.agent_id)
            .join(AgentTurn, AgentTurn.turn_id == AgentCall.turn_id)
            .join(Conversation, Conversation.id == AgentTurn.conversation_id)
            .where(Conversation.batch_id == outcome.batch_id)):
        calls[name][outcome_] = calls[name].get(outcome_, 0) + 1
        latency[name].append(latency_ms)
        tokens[name] += (prompt or 0) + (completion or 0)
    teacher_of = dict(session.exec(  # conversation -> the agent that played its other role than the judge's
        select(ConversationAgent.conversation_id, Agent.name).join(Agent, Agent.id == ConversationAgent.agent_id)
        .where(col(ConversationAgent.conversation_id).in_(outcome.conversation_ids))).all())
    judged: dict[str, list[dict[str, str]]] = defaultdict(list)
    for position, answers in outcome.evaluations.items():
        judged[teacher_of[outcome.conversation_ids[position]]].append(answers)
    report = {}
    for name in sorted(played):
        mine, ratings = turns[name], rated[name]
        ordered = sorted(latency[name])
        report[name] = {
            "conversations": played[name], "turns": len(mine),
            "right_share": round(sum(r.good for r in mine) / len(mine), 4) if mine else None,
            "ratings": len(ratings),
            "relevant_share": round(sum(r for r, _ in ratings) / len(ratings), 4) if ratings else None,
            "useful_share": round(sum(u for _, u in ratings) / len(ratings), 4) if ratings else None,
            "calls": dict(sorted(calls[name].items())), "tokens": tokens[name],
            "latency_ms_p50": ordered[len(ordered) // 2] if ordered else None,
            "evaluations": len(judged[name]),
            "claimed_done_share": (round(sum(a.get("completed") == "yes" for a in judged[name]) / len(judged[name]), 4)
                                   if judged[name] else None),
        }
    return report
