"""What judges a STAR writer where no peer rates a turn: STAR has no ratings, so the quality monitor counts
these instead (``turkflow.quality.monitor.judge_signal``, with the batch's ``judged m of n``).

- **The wizard's agreement with the knowledge base** (``KB_AGREEMENT``). A reply that announces an outcome
  ("Dr. Han is available at 3 pm", "your table is booked") must say what the task's last query returned:
  success after nothing was found or after a refusal, a refusal after a success, or a booking announced
  when no query booked (a check only checks), is an error. A reply that announces nothing is not judged.
  A picked suggestion claims what its template claims (``suggestions.polarities``), a written reply what
  its words say (``suggestions.claims``).
- **The wizard's following of the flow chart** (``CHART``): a picked reply should be one the page ranked
  near the top (``CHART_TOP``), where the chart's next step and STAR's wizards' habits put it (STAR's
  wizards picked within the top 3 in 97.5% of picks with their draft, bench/RESULTS.md); a reply picked from
  far down the list, again and again, is a wizard clicking at random. Replies in the wizard's own words are
  not judged by it.
- **The content of a turn** (``CONTENT``): a written turn the content checks flag near-empty, not English or
  copied counts against its writer, one without those flags for them (a greeting alone may open a dialog). Where peers rate turns (the Wizard of
  Tasks) the ratings judge the writing; here nothing else reads it. Repeats are not counted: the same
  scenario and the same templates make a writer's verbatim repeats normal in STAR.
- **The other role's end-of-dialog answers** (``SURVEY``). The user's "Did the assistant stay calm and
  helpful?" (and, in a happy scenario, "Did the assistant get your task done?") judges every wizard who wrote
  in the dialog; the wizard's "Did the user become aggressive or annoyed?" and, in an unhappy scenario,
  "Did the user change his/her mind?" judge the users. Several workers write each role here and the answers
  are about the role as a whole, so they judge only a writer of at least two thirds of the role's turns
  (``SURVEY_SHARE``; where the batch keeps people, ``--keep``, most dialogs have one), with one signal on their last turn of the
  dialog, and nobody when another writer of the role has been sent to review meanwhile (the answers are
  likely about them). A worker who is not active judges nobody.

Plain functions over the session; no Flask, Celery or ``turkflow.quality`` (the pipeline passes what they
return to the monitor).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task, Turn, TurnStatus, Worker, WorkerStatus
from turkflow.protocols.star import outcomes
from turkflow.protocols.star.kb import constraints_from
from turkflow.protocols.star.suggestions import (
    EMPTY, FAILED, FOUND, SUCCEEDED, DialogState, answer_text, claims, outcome_of,
)

SURVEY_SHARE = 2 / 3  # of a role's turns in a dialog: a writer of fewer is not judged by the survey
CHART_TOP = 3  # a picked reply ranked this high or higher follows the chart
KB_AGREEMENT = "star_kb_agreement"
CHART = "star_chart"
CONTENT = "star_content"
SURVEY = "star_survey"

# the content checks' flags (turkflow.quality.checks) that count against a STAR writer
NEAR_EMPTY = "near_empty"
COUNTED_FLAGS = (NEAR_EMPTY, "not_english", "copied_previous_turn", "copied_document")

# a statement that something is done, not merely possible: "is booked", "has been scheduled"
_DONE = re.compile(r"\b(booked|reserved|scheduled|confirmed|placed|submitted)\b")


@dataclass(frozen=True)
class Judged:
    """One judgement of a turn's writer, for ``monitor.judge_signal``."""

    turn: Turn
    ok: bool
    kind: str
    evidence: dict[str, Any]


def agreement(claim: int, text: str, outcome: Optional[str], booked: bool, searchable: bool
              ) -> Optional[tuple[bool, str]]:
    """The pure rule: whether a reply claiming ``claim`` (+1 success, -1 refusal, 0 nothing) agrees with the
    task's last query (``outcome``: ``suggestions.outcome_of``; None before any query; ``booked``: that
    query asked to book), and why not. None: nothing to judge."""
    if claim == 0:
        return None
    if claim > 0 and outcome in (EMPTY, FAILED):
        return False, "success claimed after the knowledge base said " + (
            "nothing was found" if outcome == EMPTY else "no")
    if claim < 0 and outcome in (SUCCEEDED, FOUND):
        return False, "a refusal claimed after the knowledge base " + (
            "said yes" if outcome == SUCCEEDED else "found an item")
    said = " ".join(s for s in re.split(r"(?<=[.!?\n])", text.lower()) if not s.strip().endswith("?"))
    if claim > 0 and not searchable and _DONE.search(said) and not (outcome == SUCCEEDED and booked):
        return False, "a booking claimed without a query that booked"
    return True, "agrees with the knowledge base"


def kb_verdict(events: Sequence[DialogEvent], turn_id: int, tasks: Mapping[str, Task],
               polarity: Mapping[str, Mapping[str, int]], searchable: Mapping[str, bool]
               ) -> Optional[tuple[bool, dict[str, Any]]]:
    """Judge the reply that closed wizard turn ``turn_id`` against the knowledge base: (ok, evidence), or
    None when the reply claims no outcome. ``polarity``: each task's reply claims; ``searchable``: per API."""
    closing = [n for n, e in enumerate(events) if e.turn_id == turn_id and e.agent == "Wizard"
               and e.action in ("pick_suggestion", "utter")]
    if not closing:
        return None
    said, before = events[closing[-1]], events[:closing[-1]]
    text = said.data.get("Text", "")
    label = said.data.get("ActionLabel") if said.action == "pick_suggestion" else None
    name = (next((n for n, t in tasks.items() if label in t.star["replies"]), None) if label
            else _open_task(before, tasks))
    if name is None:
        return None
    api = tasks[name].star["api"]
    item, nothing, query = None, False, None
    for event in before:
        if event.data.get("APIName") != api:
            continue
        if event.action == "query":
            query = event
        elif event.action == "return_item":
            found = event.data.get("Item")
            nothing = found is None
            item = None if found is None else {k: v for k, v in found.items() if k != "APIName"}
    booked = query is not None and outcomes.booking(constraints_from(query.data.get("Constraints", [])))
    verdict = agreement(polarity[name].get(label, 0) if label else claims(text), text,
                        outcome_of(DialogState(nothing_found=nothing, item=item)), booked, searchable[api])
    if verdict is None:
        return None
    ok, why = verdict
    shown = "nothing found" if nothing else "no query yet" if item is None else answer_text(item) or "an item"
    return ok, {"said": text[:120], "reply": label or "own words", "knowledge_base": shown[:120],
                "query": query.id if query else None, "why": why}


def chart_verdict(events: Sequence[DialogEvent], turn_id: int) -> Optional[tuple[bool, dict[str, Any]]]:
    """Whether the reply wizard turn ``turn_id`` picked was among the first ``CHART_TOP`` the page offered
    (its ``ActionLabelOptions``, in the page's order); None for a reply in the wizard's own words."""
    picked = [e for e in events if e.turn_id == turn_id and e.action == "pick_suggestion"]
    if not picked:
        return None
    label, offered = picked[-1].data.get("ActionLabel"), list(picked[-1].data.get("ActionLabelOptions") or [])
    rank = offered.index(label) + 1 if label in offered else len(offered) + 1
    return rank <= CHART_TOP, {"picked": label, "rank": f"{rank} of {len(offered)}",
                               "ranked_first": offered[0] if offered else None}


def _open_task(events: Sequence[DialogEvent], tasks: Mapping[str, Task]) -> Optional[str]:
    chosen = [e.data["Task"] for e in events if e.action == "select_task" and e.data.get("Task") in tasks]
    return chosen[-1] if chosen else next(iter(tasks), None)


def content_verdict(turn: Turn) -> Optional[tuple[bool, dict[str, Any]]]:
    """A written turn's content checks as a signal (None for a picked suggestion: the template's words are
    not the wizard's). ``not_typed`` is left to the monitor's own rule (``judge_writing``)."""
    if turn.label == "pick_suggestion" or not turn.text:
        return None
    flagged = [flag for flag in turn.flags if flag in COUNTED_FLAGS
               and not (flag == NEAR_EMPTY and turn.index == 0)]  # "Hi." opens a dialog
    return not flagged, {"said": turn.text[:120], "flags": ", ".join(flagged) or "none"}


def survey_verdict(role: str, answers: Mapping[str, Any], happy: bool) -> bool:
    """The pure rule: whether a role's end-of-dialog answers speak well of the other role (module docstring).
    An unanswered question counts for the judged."""
    if role == "user":
        return answers.get("calm") is not False and (not happy or answers.get("task_done") is not False)
    return answers.get("aggressive") is not True and (happy or answers.get("changed_mind") is not False)


# ---- on the session: what the pipeline asks -------------------------------------------------------------


def turn_signals(turn: Turn, events: Sequence[DialogEvent], tasks: Mapping[str, Task],
                 polarity: Mapping[str, Mapping[str, int]], searchable: Mapping[str, bool]) -> list[Judged]:
    """The signals a submitted STAR turn gives about its writer, from the dialog's events (its content checks
    must have run)."""
    found = []
    content = content_verdict(turn)
    if content is not None:
        found.append(Judged(turn, content[0], CONTENT, content[1]))
    if turn.role != "wizard":
        return found
    for kind, verdict in ((KB_AGREEMENT, kb_verdict(events, turn.id, tasks, polarity, searchable)),
                          (CHART, chart_verdict(events, turn.id))):
        if verdict is not None:
            found.append(Judged(turn, verdict[0], kind, verdict[1]))
    return found


def judged_survey(session: Session, conversation_id: int, worker_id: int) -> list[Judged]:
    """The signals one worker's end-of-dialog answers give about every writer of the other role, each on
    that writer's last turn of the dialog (none before the answers are stored)."""
    answered = session.exec(select(SurveyAnswer).where(SurveyAnswer.conversation_id == conversation_id,
                                                       SurveyAnswer.worker_id == worker_id)).all()
    if not answered or session.get(Worker, worker_id).status != WorkerStatus.active:
        return []
    role = answered[0].role
    answers = {a.question: a.answer for a in answered}
    conversation = session.get(Conversation, conversation_id)
    ok = survey_verdict(role, answers, bool(conversation.scenario.get("happy", True)))
    judged_role = "wizard" if role == "user" else "user"
    written = session.exec(select(Turn).where(Turn.conversation_id == conversation_id, Turn.role == judged_role,
                                              Turn.status == TurnStatus.submitted, col(Turn.worker_id).is_not(None))
                           .order_by(col(Turn.index))).all()
    turns = Counter(t.worker_id for t in written)
    last = {t.worker_id: t for t in written}
    if any(session.get(Worker, writer).status != WorkerStatus.active for writer in turns):
        return []
    return [Judged(last[writer], ok, SURVEY, {
        "conversation": conversation_id, "answered_by": worker_id, **answers,
        "turns": f"{count} of {len(written)}"}) for writer, count in turns.items()
        if writer != worker_id and count >= SURVEY_SHARE * len(written)]
