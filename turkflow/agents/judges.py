"""Judging the judges: a person who rates an agent the same whatever it did is caught by what is known to be
true, and their answers can be left out of the agents' report.

Two things are known without asking anyone. A *control* agent's turns are bad by construction (the built-in
``sim-0``, which never answers right, given to a share of the conversations: ``--agent teacher=tutor,sim-0``):
an attentive judge says its turns are neither relevant nor useful and that it did not get the task done. And
where the protocol checks success against the goal (Frames, STAR, MEEP), the person's claim can be compared
with the check. Each such answer is *known*: agreed or not. A judge is *careless* when they disagree with what
is known more often than an attentive judge would: the one-sided binomial test of their disagreements against
``ATTENTIVE_ERROR`` (``scipy.stats.binomtest``) rejects at ``ALPHA``. A constant "yes" judge who rated three
control turns is caught (0.2^3 < 0.05); one slip in three is not.

The same rule gives the quality monitor judged signals as the answers come in (``survey_signals`` and
``rating_signals``, recorded by the pipeline through ``monitor.judge_signal``), so a batch's ``judged m of n``
policy sends careless judges to review; the report computes the verdicts from the records alone, so it is the
same when computed again from an export.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from scipy.stats import binomtest
from sqlmodel import Session, col, select

from turkflow.agents import builtins
from turkflow.agents.evaluation import Record
from turkflow.models import (Agent, Batch, Conversation, ConversationAgent, ConversationStatus, Rating, SurveyAnswer,
                             Turn, TurnStatus)
from turkflow.protocols import registry, surveys
from turkflow.protocols.questions import PROTOCOLS

ATTENTIVE_ERROR = 0.2  # the share of known answers an attentive judge may get wrong
ALPHA = 0.05
OUTCOME = "agent_outcome"  # a judged signal: a claimed success against the one checked against the goal
CONTROL = "agent_control"  # a judged signal: a judgement of a control agent's known-bad work


def is_control(agent: str) -> bool:
    """An agent whose every turn is known to be bad (a simulated agent that is never right)."""
    return builtins.quality_of(agent) == 0.0


def claim_agrees(claimed: Optional[bool], verified: Optional[bool], control: bool) -> Optional[bool]:
    """Whether a claimed success agrees with what is known (None: nothing is known, or nothing claimed): the
    check against the goal, else a control agent's failure."""
    if claimed is None:
        return None
    if verified is not None:
        return claimed == verified
    return (not claimed) if control else None


def rating_agrees(relevant: bool, useful: bool) -> bool:
    """A control agent's turn is neither relevant nor useful."""
    return not relevant and not useful


@dataclass(frozen=True)
class Known:
    judge: str
    conversation_id: int
    what: str  # "claim" or "turn rating"
    agreed: bool


def known_answers(records: Iterable[Record]) -> list[Known]:
    found = []
    for record in records:
        for played in record.played.values():
            control = is_control(played.agent)
            for judgement in played.judgements:
                agreed = claim_agrees(judgement.claimed, record.verified if record.ended else None, control)
                if agreed is not None:
                    found.append(Known(judgement.judge, record.conversation_id, "claim", agreed))
            if control:
                found += [Known(r.judge, record.conversation_id, "turn rating", rating_agrees(r.relevant, r.useful))
                          for r in played.ratings]
    return found


@dataclass(frozen=True)
class JudgeVerdict:
    """One judge: how many of their answers were judgements of agents, how many of those were known, how many
    of the known ones they got wrong, the test's p-value and whether that makes them careless."""

    judge: str
    answers: int
    known: int
    wrong: int
    p: Optional[float]

    @property
    def careless(self) -> bool:
        return self.p is not None and self.p < ALPHA

    def as_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "answers": self.answers, "known": self.known, "wrong": self.wrong,
                "p": None if self.p is None else round(self.p, 6), "careless": self.careless}


def verdicts(records: list[Record]) -> list[JudgeVerdict]:
    """Every judge of these records, the careless first, then by how much they judged."""
    answers: dict[str, int] = defaultdict(int)
    for record in records:
        for played in record.played.values():
            for judge in [j.judge for j in played.judgements] + [r.judge for r in played.ratings]:
                answers[judge] += 1
    known: dict[str, list[bool]] = defaultdict(list)
    for answer in known_answers(records):
        known[answer.judge].append(answer.agreed)
    found = []
    for judge, count in answers.items():
        agreed = known.get(judge, [])
        wrong = agreed.count(False)
        p = float(binomtest(wrong, len(agreed), ATTENTIVE_ERROR, alternative="greater").pvalue) if agreed else None
        found.append(JudgeVerdict(judge, count, len(agreed), wrong, p))
    return sorted(found, key=lambda v: (not v.careless, -v.answers, v.judge))


# ---- as the answers come in: judged signals for the quality monitor ----------------------------------------


@dataclass(frozen=True)
class Signal:
    """A judgement of a judge, on their turn, for ``monitor.judge_signal`` (through the pipeline)."""

    turn: Turn
    ok: bool
    kind: str
    evidence: dict[str, Any]


def survey_signals(session: Session, conversation_id: int, worker_id: int) -> list[Signal]:
    """What a person's end-of-dialog answers about an agent say of them: their claimed success against the one
    checked against the goal, or against a control agent's failure; one signal, on their last turn of the
    dialog (none before the answers are stored, or where nothing is known)."""
    answered = {a.question: a.answer for a in session.exec(select(SurveyAnswer).where(
        SurveyAnswer.conversation_id == conversation_id, SurveyAnswer.worker_id == worker_id))}
    role = session.exec(select(SurveyAnswer.role).where(SurveyAnswer.conversation_id == conversation_id,
                                                        SurveyAnswer.worker_id == worker_id)).first()
    agents = dict(session.exec(select(ConversationAgent.role, Agent.name).join(
        Agent, Agent.id == ConversationAgent.agent_id).where(ConversationAgent.conversation_id == conversation_id))
        .all())
    judged = [name for played_role, name in agents.items() if played_role != role]
    if not answered or not judged:
        return []
    conversation = session.get(Conversation, conversation_id)
    protocol = PROTOCOLS[session.get(Batch, conversation.batch_id).protocol]
    claim = next((q.name for q in surveys.questions_for(protocol, role, frozenset(agents)) if q.claims_success), None)
    verified = None
    check = getattr(registry.parts(protocol.name), "verified_outcomes", None) if registry.logged(protocol.name) else None
    if check is not None and conversation.status == ConversationStatus.completed:
        outcome = check(session, [conversation_id]).get(conversation_id)
        verified = outcome.ok if outcome else None
    agreed = claim_agrees(answered.get(claim), verified, is_control(judged[0]))
    last = session.exec(select(Turn).where(Turn.conversation_id == conversation_id, Turn.worker_id == worker_id,
                                           Turn.status == TurnStatus.submitted)
                        .order_by(col(Turn.index).desc()).limit(1)).first()
    if agreed is None or last is None:
        return []
    return [Signal(last, agreed, OUTCOME if verified is not None else CONTROL, {
        "conversation": conversation_id, "claimed": answered.get(claim),
        "known": verified if verified is not None else f"{judged[0]} is a control: never done"})]


def rating_signals(session: Session, rater_turn_ids: list[int]) -> list[Signal]:
    """What people's ratings of a control agent's turns say of them: one signal on each rating turn."""
    found = []
    for turn, relevant, useful, agent in session.exec(
            select(Turn, Rating.relevant, Rating.useful, Agent.name).join(Rating, Rating.rater_turn_id == Turn.id)
            .join(Agent, Agent.worker_id == Rating.author_id).where(col(Turn.id).in_(rater_turn_ids))):
        if is_control(agent):
            found.append(Signal(turn, rating_agrees(relevant, useful), CONTROL, {
                "rated": f"a turn of {agent}, a control", "relevant": relevant, "useful": useful}))
    return found
