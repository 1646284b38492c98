"""Onboarding: a short quiz per role about its guidelines, with an answer key and a pass mark.

A worker holds one role for the whole study and gets it by passing that role's quiz. The same quiz
serves both providers: local workers take it on ``/onboarding`` (graded here), MTurk workers take it as
the qualification test of the role's qualification type, which MTurk grades with the answer key
``turkflow.hits.mturk.qualifications`` writes from the same quiz (the qualification's value is the score
in percent, and turn HITs require at least the pass mark).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from sqlmodel import Session

from turkflow import events
from turkflow.errors import Forbidden
from turkflow.models import Role, Worker, WorkerStatus
from turkflow.protocols.compare.known import ONBOARDING as KNOWN_PAIRS, Dialog
from turkflow.protocols.questions import CHOICES, JUDGE


@dataclass(frozen=True)
class QuizQuestion:
    name: str
    text: str
    options: tuple[tuple[str, str], ...]  # (key, label)
    answer: str  # the key of the right option
    pair: tuple[Dialog, ...] = ()  # a judge's known-answer pair: the left and the right dialog, side by side


@dataclass(frozen=True)
class Quiz:
    role: str
    title: str
    intro: str
    questions: tuple[QuizQuestion, ...]


STUDENT_QUIZ = Quiz(
    role=Role.student,
    title="Student onboarding: learning a task by chatting",
    intro="You will play a curious learner who only sees the title of a task (a recipe or a how-to) and "
          "asks a teacher, turn by turn, how to do it. Answer these questions about the guidelines.",
    questions=(
        QuizQuestion("sees", "What do you see of the task document?", (
            ("title", "Only its title (and picture)"),
            ("all", "The whole document"),
            ("steps", "The list of steps"),
        ), "title"),
        QuizQuestion("history", "Earlier turns of the chat were written by other students. What do you do?", (
            ("continue", "Read the whole chat and continue it naturally"),
            ("restart", "Start the conversation again from the beginning"),
            ("ignore", "Ignore them and ask what you like"),
        ), "continue"),
        QuizQuestion("rating", "You are asked whether the teacher's last message was useful. You answer:", (
            ("honest", "Honestly: whether it helps you proceed with the task"),
            ("always_yes", "Always yes, to be kind"),
            ("always_no", "No, unless it finishes the task"),
        ), "honest"),
        QuizQuestion("stop", "The task is done. Which intent do you choose?", (
            ("stop", "Stop"),
            ("request_step", "Request the next step"),
            ("other", "Other"),
        ), "stop"),
        QuizQuestion("questions", "Before moving to the next step you should:", (
            ("ask", "Ask at least one open question about the current step"),
            ("skip", "Always ask for the next step straight away"),
            ("wait", "Wait for the teacher to continue on their own"),
        ), "ask"),
    ),
)

TEACHER_QUIZ = Quiz(
    role=Role.teacher,
    title="Teacher onboarding: guiding a student through a task",
    intro="You will play an expert who sees the whole task document and guides a student, turn by turn. "
          "Answer these questions about the guidelines.",
    questions=(
        QuizQuestion("sees", "What does the student see of the task document?", (
            ("title", "Only its title (and picture), plus what you share"),
            ("all", "The whole document"),
            ("nothing", "Nothing at all"),
        ), "title"),
        QuizQuestion("share", "How do you show the student a step or an ingredient list?", (
            ("tick", "Tick the document items to share them"),
            ("paste", "Paste the text into your response"),
            ("link", "Send a link to the document"),
        ), "tick"),
        QuizQuestion("external", "The document does not answer the student's question. You:", (
            ("search", "May use common sense or a web search, and give the URL you used"),
            ("refuse", "Tell the student it cannot be answered"),
            ("invent", "Make something up"),
        ), "search"),
        QuizQuestion("words", "Your response should be:", (
            ("own", "In your own words (pasting is disabled, copied text is flagged)"),
            ("copy", "Copied from the document, to be exact"),
            ("short", "A single word"),
        ), "own"),
        QuizQuestion("history", "Earlier teacher turns were written by other teachers. You:", (
            ("continue", "Read the whole chat and continue it naturally"),
            ("restart", "Start the task again from step 1"),
            ("ignore", "Only answer the very last message"),
        ), "continue"),
    ),
)

JUDGE_QUIZ = Quiz(
    role=JUDGE.role,
    title="Judge onboarding: comparing two dialogs",
    intro="You will read two dialogs about the same task side by side and say which assistant you would rather "
          "talk to, or that they are about the same, with a short reason. Answer these questions, then compare "
          "the pairs below as you would in the study.",
    questions=(
        QuizQuestion("read", "Before choosing, you:", (
            ("both", "Read both dialogs to the end"),
            ("first", "Read the first few turns of each"),
            ("left", "Read the left one and skim the right one"),
        ), "both"),
        QuizQuestion("judge", "You are asked about the assistants. A user in one dialog is rude. You:", (
            ("assistant", "Judge how each assistant helped, not how the user behaved"),
            ("user", "Prefer the dialog with the politer user"),
            ("tie", "Always say they are about the same"),
        ), "assistant"),
        *(QuizQuestion(known.name, f"{known.task}: which assistant would you rather talk to?", CHOICES,
                       known.answer, pair=(known.left, known.right)) for known in KNOWN_PAIRS),
    ),
)

QUIZZES: dict[str, Quiz] = {STUDENT_QUIZ.role: STUDENT_QUIZ, TEACHER_QUIZ.role: TEACHER_QUIZ,
                            JUDGE_QUIZ.role: JUDGE_QUIZ}


def quiz_for(role: str) -> Quiz:
    try:
        return QUIZZES[role]
    except KeyError:
        raise ValueError(f"no onboarding quiz for role {role!r}; roles: {', '.join(QUIZZES)}") from None


@dataclass(frozen=True)
class Grade:
    score: int  # percent, rounded
    passed: bool
    wrong: list[str]  # names of the questions answered wrongly or not at all


def grade(quiz: Quiz, answers: Mapping[str, Any], pass_percent: int) -> Grade:
    """Score answers against the key, the way MTurk's PercentageMapping does (rounded percent)."""
    wrong = [q.name for q in quiz.questions if answers.get(q.name) != q.answer]
    score = round(100 * (len(quiz.questions) - len(wrong)) / len(quiz.questions))
    return Grade(score=score, passed=score >= pass_percent, wrong=wrong)


def onboard_worker(session: Session, worker: Worker, answers: Mapping[str, Any], pass_percent: int) -> Grade:
    """Grade a local worker's quiz for their role; passing onboards them (retakes are allowed)."""
    if worker.status != WorkerStatus.active:
        raise Forbidden("you are blocked from taking turns; the requester reviews blocks daily")
    result = grade(quiz_for(worker.role), answers, pass_percent)
    if result.passed and not worker.onboarded:
        worker.onboarded = True
        session.add(worker)
    events.record(session, "onboarding_graded", f"worker:{worker.id}", worker_id=worker.id, role=worker.role,
                  score=result.score, passed=result.passed, wrong=result.wrong)
    return result
