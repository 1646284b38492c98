"""End-of-dialog surveys, for any protocol whose roles have one (``RoleForm.survey``): STAR's questionnaires,
Frames' cooperativity rating and goal question, MEEP's confirmation of success; and, in any protocol, the
evaluation of an agent (``questions.evaluation_survey``) by the person who talked to it, after their role's own.

When a dialog ends, the last worker of each role answers the role's questions once, for the dialog as it
ended (STAR and Frames had one worker per role; here several wrote each role's turns). The worker who ends
it is sent to the questions at once; the others find them at the top of their queue. Answers are
``SurveyAnswer`` rows, stored all or none, exported beside the dialog.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Sequence

from datetime import datetime

from sqlalchemy import bindparam, exists
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from turkflow.protocols import registry
from turkflow.db import savepoint
from turkflow.errors import Conflict, Forbidden, NotFound
from turkflow.hits import lifecycle
from turkflow.models import (Batch, Conversation, ConversationAgent, ConversationStatus, Event, SurveyAnswer, Task,
                             Turn, TurnStatus, Worker)
from turkflow.protocols.questions import PROTOCOLS, Protocol, Question, evaluation_survey, validate_survey

SURVEYED = tuple(name for name, p in PROTOCOLS.items() if any(form.survey for form in p.roles.values()))

# The event that says a worker's answers were judged (``pipeline.review_survey``): the Celery message that asks
# for the judgement is a fast path, and the reconciler judges every answer stored without this event.
JUDGED = "survey_judged"

_JUDGED_ALREADY = exists().where(Event.kind == JUDGED, Event.conversation_id == SurveyAnswer.conversation_id,
                                 Event.worker_id == SurveyAnswer.worker_id)


def conversation_over(session: Session, conversation: Conversation) -> bool:
    """Over as soon as its last turn ends it, before the Celery task that closes it has run."""
    if conversation.status == ConversationStatus.completed:
        return True
    if conversation.status != ConversationStatus.active:
        return False
    last = session.exec(select(Turn).where(Turn.conversation_id == conversation.id)
                        .order_by(col(Turn.index).desc()).limit(1)).first()
    return last is not None and lifecycle.ends_conversation(session, last)


def agent_roles(session: Session, conversation_ids: Sequence[int]) -> dict[int, frozenset[str]]:
    """The roles agents played in each of these conversations (none for a dialog of people only)."""
    found: dict[int, set[str]] = {i: set() for i in conversation_ids}
    for conversation_id, role in session.exec(select(ConversationAgent.conversation_id, ConversationAgent.role)
                                              .where(col(ConversationAgent.conversation_id).in_(list(found)))):
        found[conversation_id].add(role)
    return {i: frozenset(roles) for i, roles in found.items()}


def questions_for(protocol: Protocol, role: str, agents: frozenset[str]) -> tuple[Question, ...]:
    """What a worker of ``role`` answers at the end of a dialog whose roles ``agents`` were played by agents: the
    role's own questions, and the evaluation of the agent that played the other role. An agent answers none."""
    if role in agents:
        return ()
    own = protocol.form(role).survey
    return own + evaluation_survey(protocol, role) if any(r != role for r in agents) else own


def survey_role(session: Session, protocol: Protocol, conversation: Conversation, worker: Worker,
                agents: Optional[frozenset[str]] = None) -> Optional[str]:
    """The role whose questions ``worker`` answers: one with questions whose last turn in this dialog they
    wrote."""
    agents = agent_roles(session, [conversation.id])[conversation.id] if agents is None else agents
    for role in protocol.roles:
        if not questions_for(protocol, role, agents):
            continue
        last = session.exec(select(Turn.worker_id).where(
            Turn.conversation_id == conversation.id, Turn.role == role, Turn.status == TurnStatus.submitted)
            .order_by(col(Turn.index).desc()).limit(1)).first()
        if last is not None and last == worker.id:
            return role
    return None


def asks(session: Session, protocol: Protocol, conversation_id: int, role: str) -> bool:
    """Whether a worker of ``role`` has questions to answer when this dialog ends (a page sends the worker whose
    turn ended it on to them)."""
    return bool(questions_for(protocol, role, agent_roles(session, [conversation_id])[conversation_id]))


@dataclass(frozen=True)
class SurveyView:
    conversation: Conversation
    protocol: str
    title: str
    role: str
    questions: tuple[Question, ...]
    answered: Optional[dict[str, Any]]  # the stored answers, once given
    shown: Optional[str] = None  # what the page shows beside the questions (Frames: the goal, to the wizard)


def survey_for(session: Session, conversation_id: int, worker: Worker) -> SurveyView:
    """The questions ``worker`` answers about this dialog; anybody else is refused."""
    conversation = session.get(Conversation, conversation_id)
    batch = session.get(Batch, conversation.batch_id) if conversation is not None else None
    protocol = PROTOCOLS.get(batch.protocol) if batch is not None else None
    agents = agent_roles(session, [conversation_id])[conversation_id] if protocol is not None else frozenset()
    if protocol is None or not any(questions_for(protocol, role, agents) for role in protocol.roles):
        raise NotFound("no dialog with end-of-dialog questions has this number")
    role = survey_role(session, protocol, conversation, worker, agents)
    if role is None:
        raise Forbidden("this dialog's questions are for the workers who wrote its last turns")
    if not conversation_over(session, conversation):
        raise Conflict("this dialog is not over yet; its questions come when it ends")
    stored = {a.question: a.answer for a in session.exec(select(SurveyAnswer).where(
        SurveyAnswer.conversation_id == conversation.id, SurveyAnswer.worker_id == worker.id))}
    title = session.get(Task, conversation.task_id).title
    parts = registry.parts(protocol.name) if registry.logged(protocol.name) else None
    shows = getattr(parts, "survey_shows", None)
    worded = getattr(parts, "survey_wording", None)
    wording = worded(conversation, role) if worded else {}
    questions = tuple(replace(q, label=wording[q.name]) if q.name in wording else q
                      for q in questions_for(protocol, role, agents))
    return SurveyView(conversation, protocol.name, title, role, questions, stored or None,
                      shows(session, conversation.id, role) if shows else None)


def answer_survey(session: Session, conversation_id: int, worker: Worker, raw: Mapping[str, Any]) -> bool:
    """Store the worker's answers, all or none. Returns False when they were stored already (a double
    submit, even a concurrent one, stores once)."""
    view = survey_for(session, conversation_id, worker)
    if view.answered is not None:
        return False
    clean = validate_survey(view.questions, dict(raw))
    try:
        with savepoint(session):
            for question in view.questions:
                session.add(SurveyAnswer(conversation_id=conversation_id, worker_id=worker.id, role=view.role,
                                         question=question.name, text=question.label,
                                         answer=clean[question.name]))
            session.flush()
    except IntegrityError:
        return False
    return True


def to_judge(session: Session, conversation_id: int, worker_id: int) -> bool:
    """The worker answered this dialog's questions and nothing has judged the answers yet."""
    return session.exec(select(SurveyAnswer.id).where(SurveyAnswer.conversation_id == conversation_id,
                                                      SurveyAnswer.worker_id == worker_id, ~_JUDGED_ALREADY)
                        .limit(1)).first() is not None


def unjudged(session: Session, before: datetime) -> list[tuple[int, int]]:
    """(conversation, worker) of the answers stored before ``before`` that nothing has judged: their message
    was lost (a broker outage, a killed worker)."""
    return [tuple(row) for row in session.exec(
        select(SurveyAnswer.conversation_id, SurveyAnswer.worker_id)
        .where(SurveyAnswer.at < before, ~_JUDGED_ALREADY).distinct()
        .order_by(SurveyAnswer.conversation_id, SurveyAnswer.worker_id))]


# Roles asked their own questions at the end of some dialog: a worker of any other role (the Wizard of Tasks'
# student and teacher) owes a survey only where agents played (the evaluation), and their queue, reloaded after
# every turn, asks the database nothing more when no agent ever played here.
SURVEYED_ROLES = frozenset(role for name in SURVEYED for role, form in PROTOCOLS[name].roles.items() if form.survey)

# Built once: the queue reloads after every turn (building a statement costs more than running it).
_AGENTS_PLAYED = select(ConversationAgent.conversation_id).limit(1)
_UNANSWERED = (
    select(Conversation, Batch.protocol, Task.title).join(Batch, Batch.id == Conversation.batch_id)
    .join(Task, Task.id == Conversation.task_id)
    .where(col(Batch.protocol).in_(SURVEYED)
           | col(Conversation.id).in_(select(ConversationAgent.conversation_id)),
           col(Conversation.status).in_([ConversationStatus.active, ConversationStatus.completed]),
           col(Conversation.id).in_(select(Turn.conversation_id).where(Turn.worker_id == bindparam("worker"))),
           col(Conversation.id).not_in(
               select(SurveyAnswer.conversation_id).where(SurveyAnswer.worker_id == bindparam("worker"))))
    .order_by(col(Conversation.id).desc()).limit(bindparam("limit"))
)


def surveys_due(session: Session, worker: Worker, limit: int = 100) -> list[dict[str, Any]]:
    """The dialogs whose questions ``worker`` still owes, newest first (for their queue)."""
    if worker.role not in SURVEYED_ROLES and session.exec(_AGENTS_PLAYED).first() is None:
        return []
    found = session.execute(_UNANSWERED, {"worker": worker.id, "limit": limit}).all()
    agents = agent_roles(session, [conversation.id for conversation, _, _ in found])
    due = []
    for conversation, protocol, title in found:
        if survey_role(session, PROTOCOLS[protocol], conversation, worker, agents[conversation.id]) != worker.role:
            continue
        if conversation_over(session, conversation):
            due.append({"conversation_id": conversation.id, "title": title})
    return due


def questionnaires(session: Session, conversation_ids: Sequence[int]) -> dict[int, dict[str, list]]:
    """Each dialog's answers in STAR's shape, ``{"user": [{"Answer": true, "Question": ...}], ...}``, in the
    order they were asked (a role's own questions, then its evaluation of an agent)."""
    rows = list(session.exec(select(SurveyAnswer).where(col(SurveyAnswer.conversation_id).in_(conversation_ids))
                             .order_by(col(SurveyAnswer.id))))
    protocols = dict(session.exec(
        select(Conversation.id, Batch.protocol).join(Batch, Batch.id == Conversation.batch_id)
        .where(col(Conversation.id).in_(conversation_ids))).all())
    agents = agent_roles(session, conversation_ids)
    found: dict[int, dict[str, list]] = {}
    for conversation_id in conversation_ids:
        protocol = PROTOCOLS.get(protocols.get(conversation_id, ""))
        found[conversation_id] = {role: [] for role, form in (protocol.roles.items() if protocol else ())
                                  if form.survey}

    def order(row: SurveyAnswer) -> tuple[int, str, int]:
        protocol = PROTOCOLS.get(protocols.get(row.conversation_id, ""))
        asked = ([q.name for q in questions_for(protocol, row.role, agents[row.conversation_id])]
                 if protocol and row.role in protocol.roles else [])
        return row.conversation_id, row.role, asked.index(row.question) if row.question in asked else 99

    for row in sorted(rows, key=order):
        found[row.conversation_id].setdefault(row.role, []).append({"Answer": row.answer, "Question": row.text})
    return found


@dataclass(frozen=True)
class QuestionCounts:
    role: str
    question: str  # its key
    label: str
    counts: dict[str, int]  # answer as shown (Yes/No, 1-5) -> how many gave it, in the question's order

    @property
    def answered(self) -> int:
        return sum(self.counts.values())


def distribution(session: Session, batch_id: int) -> list[QuestionCounts]:
    """How a batch's dialogs were judged: each survey question with the count of every answer, in the order
    the protocol asks them, the evaluation of agents after a role's own questions where it was answered (free
    text is not counted; an empty list for a protocol without surveys and without agents)."""
    batch = session.get(Batch, batch_id)
    protocol = PROTOCOLS.get(batch.protocol) if batch is not None else None
    if protocol is None:
        return []
    rows = session.exec(
        select(SurveyAnswer.role, SurveyAnswer.question, SurveyAnswer.answer)
        .join(Conversation, Conversation.id == SurveyAnswer.conversation_id)
        .where(Conversation.batch_id == batch_id))
    given: dict[tuple[str, str], list[Any]] = {}
    for role, question, answer in rows:
        given.setdefault((role, question), []).append(answer)
    found = []
    for role, form in protocol.roles.items():
        evaluated = [q for q in evaluation_survey(protocol, role) if (role, q.name) in given]
        for q in (*form.survey, *evaluated):
            if q.kind == "text":
                continue
            shown = ([("Yes", True), ("No", False)] if q.kind == "yes_no"
                     else [(text, int(value)) for value, text in q.options])
            answers = given.get((role, q.name), [])
            found.append(QuestionCounts(role, q.name, q.label,
                                        {text: sum(1 for a in answers if a == value and type(a) is type(value))
                                         for text, value in shown}))
    return found
