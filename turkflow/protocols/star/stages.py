"""STAR's staged qualification: per role (user, wizard) a tutorial and a quiz per stage, as STAR ran it.

Stage 1 (single-task) unlocks the role for single-task STAR conversations; stage 2 (multi-task) is
offered only after stage 1 and unlocks conversations whose scenario has more than one task. A quiz has
ten questions, each with a hint; it passes when every answer is right and at most six hints were used
(STAR, section 3.1 and appendix D). The quiz texts are ours, about what STAR's workers do.

The server keeps the count: a hint is a ``StageHint`` row written before its text is sent, and grading
counts the rows, so no browser can use a hint unseen. An attempt is graded once (a conditional update
claims it), so a form sent twice grades once.

Who may take which turn is decided here for every way a turn reaches a worker: ``unlocked`` narrows the
local queue and a Prolific study's next turn to the conversations whose stage the worker passed, and
``check_stage`` refuses taking one directly. On MTurk the platform picks: a multi-task turn's HIT requires
the role's stage-2 qualification as well (``turkflow.hits.mturk.qualifications``).

Passing stage 1 sets ``Worker.onboarded``, so everything that asks whether a worker is onboarded (the
queue page, ``lifecycle.check_can_work``) treats a STAR worker as Wizard of Tasks' quiz does; a worker
recorded as onboarded without a quiz (``turkflow worker invite --onboarded``, a vouched Prolific group)
counts as having passed stage 1. Stage 2 is ``Worker.stage`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Optional

from sqlalchemy import Boolean, func, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.db import savepoint
from turkflow.errors import Conflict, Forbidden, InvalidAnswer, InvalidInput, NotFound
from turkflow.models import Conversation, StageAttempt, StageHint, Worker, WorkerStatus, utcnow

SINGLE_TASK, MULTI_TASK = 1, 2
LOCAL = "local"


@dataclass(frozen=True)
class StageQuestion:
    name: str
    text: str
    options: tuple[tuple[str, str], ...]  # (key, label)
    answer: str  # the key of the right option
    hint: str


@dataclass(frozen=True)
class Stage:
    role: str
    number: int
    title: str
    unlocks: str
    tutorial: tuple[str, ...]  # the tutorial page's paragraphs (STAR showed a video)
    questions: tuple[StageQuestion, ...]
    max_hints: int = 6
    max_attempts: int = 3  # graded attempts a local worker may make; a Prolific participant makes one

    def question(self, name: str) -> StageQuestion:
        for q in self.questions:
            if q.name == name:
                return q
        raise InvalidInput(f"no question {name[:40]!r} in this quiz", "hint")


def _q(name: str, text: str, options: tuple[tuple[str, str], ...], answer: str, hint: str) -> StageQuestion:
    return StageQuestion(name, text, options, answer, hint)


# ---- the quizzes: one place, data ------------------------------------------------------------------------

USER_SINGLE = Stage(
    role="user", number=SINGLE_TASK, title="User, stage 1: single-task dialogs",
    unlocks="user turns of single-task dialogs",
    tutorial=(
        "As the user you chat with an AI assistant (another person, the wizard) to get one thing done: book "
        "an apartment viewing, report a lost card, find a hotel. Your scenario on the left says what you "
        "want; the assistant does not see it.",
        "The assistant looks things up in a knowledge base you never see. Ask for what you need and let "
        "the assistant tell you what it found.",
        "Use the names the scenario gives (a doctor, a place, an airline): the knowledge base only knows "
        "those. A detail the scenario does not give, such as your phone number, you may make up.",
        "During the dialog the system sometimes gives you an instruction (change your mind, make small "
        "talk, something happened). Follow it in your next messages; if you overlooked one, follow it as "
        "soon as you notice.",
        "Other users may have written the earlier user turns: read the whole chat and continue it as the "
        "same person. End the dialog with Complete once your task is done or cannot be done and you have "
        "followed every instruction.",
    ),
    questions=(
        _q("goal", "Where do you learn what you want from the assistant?", (
            ("scenario", "In my scenario, shown beside the chat"),
            ("assistant", "The assistant tells me"),
            ("choose", "I choose any task I like"),
        ), "scenario", "The assistant cannot see your instructions; they are yours alone."),
        _q("invent", "You need a detail the scenario does not give (your phone number, say). You:", (
            ("give_up", "Give up the task"),
            ("make_up", "Make up something plausible"),
            ("refuse", "Refuse to answer the question"),
        ), "make_up", "The dialog should go on naturally; invented details are fine where none is given."),
        _q("nudge", "An instruction from the system appears during the dialog. You:", (
            ("ignore", "Ignore it: only the scenario counts"),
            ("tell", "Tell the assistant about the instruction"),
            ("follow", "Follow it in my next message(s)"),
        ), "follow", "The system's instructions are part of your scenario, given at a chosen moment."),
        _q("missed", "You notice you overlooked a system instruction two turns ago. You:", (
            ("follow_now", "Follow it now"),
            ("drop", "Drop it, it is outdated"),
            ("restart", "Start the dialog again"),
        ), "follow_now", "Late is better than never: the instruction still applies."),
        _q("kb", "Can you see the assistant's knowledge base and its search results?", (
            ("yes", "Yes, beside the chat"),
            ("no", "No: I ask the assistant for what I need"),
            ("sometimes", "Only after the assistant queried it"),
        ), "no", "Only the wizard's page shows the knowledge base."),
        _q("names", "Your scenario names a doctor you want to see. You:", (
            ("own", "Use a doctor I know instead"),
            ("given", "Ask for the doctor the scenario names"),
            ("any", "Ask for any doctor"),
        ), "given", "The knowledge base only holds what the scenarios name; other names find nothing."),
        _q("unhappy", "Your scenario says to change your mind about the time once one is offered. You:", (
            ("change", "Change it when a time is offered, in my own words"),
            ("accept", "Accept the first time offered"),
            ("start", "Say so in my very first message"),
        ), "change", "Unhappy scenarios test how the assistant copes with a change at that moment."),
        _q("history", "Earlier user turns of the chat were written by other users. You:", (
            ("restart", "Introduce myself and start over"),
            ("ignore", "Only answer the assistant's last message"),
            ("continue", "Read the whole chat and continue it as the same person"),
        ), "continue", "The dialog must read as one person talking to one assistant."),
        _q("complete", "When do you end the dialog with Complete?", (
            ("any", "As soon as the button is there"),
            ("done", "When my task is done or cannot be done and I followed every instruction"),
            ("never", "Never: the assistant ends it"),
        ), "done", "Check both the scenario and the system's instructions before you end."),
        _q("style", "How does a good user write?", (
            ("robot", "In keywords, as short as possible"),
            ("natural", "Naturally, in full sentences, as the scenario's person would"),
            ("copy", "By copying the scenario's text"),
        ), "natural", "The dialogs teach assistants how people talk; copied instructions teach nothing."),
    ),
)

WIZARD_SINGLE = Stage(
    role="wizard", number=SINGLE_TASK, title="Wizard, stage 1: single-task dialogs",
    unlocks="wizard turns of single-task dialogs",
    tutorial=(
        "As the wizard you play an AI assistant that helps the user with one task. The task's flow chart "
        "says what to do: which questions to ask, when to query the knowledge base, what to say about what "
        "it returns. Follow it whenever you can; it matters more than being brief or chatty.",
        "Read the chart from its first box. A request box is information you must get before the next "
        "step; a request-optional box is information you may ask for but do not need. If the user already "
        "gave something, do not ask for it again: go on to what the chart still needs.",
        "Query the knowledge base once the user has given what the chart asks for before its query box. "
        "Fill in only the fields the user gave. The user never sees the results: tell them what the chart "
        "says to tell. If nothing matches, follow the chart's branch for no result.",
        "To reply, type what you want to say and request suggestions: the chart's replies, ranked, filled "
        "with the knowledge-base item you selected. Pick the suggestion that says what the chart's next "
        "box says; select the right item first. Write your own reply only when none fits (the user did "
        "something the chart does not cover).",
        "Other wizards may have written the earlier wizard turns: read the whole chat and the logged "
        "queries, and continue from where the chart stands.",
    ),
    questions=(
        _q("important", "What matters most for the assistant?", (
            ("short", "Keeping the dialog as short as possible"),
            ("chart", "Following the task's flow chart whenever possible"),
            ("long", "Keeping the user chatting"),
        ), "chart", "The collected dialogs teach models to follow schemas."),
        _q("greeting", "The user's first message is only 'Hi there'. You:", (
            ("greet", "Greet them back (the chart's first box)"),
            ("list", "List every task you can help with"),
            ("confused", "Say you do not understand"),
        ), "greet", "Start at the chart's first box and wait for the user to say what they want."),
        _q("optional", "What does a request-optional box on the chart mean?", (
            ("skip", "A box I may ignore whenever I like"),
            ("required", "Information the query cannot run without"),
            ("optional", "Information I may ask for, that is not required"),
        ), "optional", "Optional boxes may narrow the search; the query runs without them."),
        _q("order", "The chart asks for a name, then a date. The user opens with the date. You:", (
            ("name", "Keep the date and ask for the name"),
            ("date", "Ask for the date again, in the chart's order"),
            ("query", "Query at once without the name"),
        ), "name", "Never ask for what you have; ask for what the chart still needs."),
        _q("when_query", "When do you query the knowledge base?", (
            ("first", "Before saying anything"),
            ("ready", "Once the user gave what the chart asks for before its query box"),
            ("asked", "Only when the user asks me to search"),
        ), "ready", "The chart's query box comes after the requests that feed it."),
        _q("fields", "The query form has a field the user never mentioned. You:", (
            ("empty", "Leave it empty"),
            ("guess", "Fill in a likely value"),
            ("all", "Fill every field with its first choice"),
        ), "empty", "A guessed constraint can hide the item the user wants."),
        _q("results", "Who sees the knowledge base's results?", (
            ("both", "The user and I"),
            ("me", "Only I: I tell the user what they need"),
            ("user", "Only the user"),
        ), "me", "The user's page never shows the knowledge base."),
        _q("no_result", "Your query returns nothing. You:", (
            ("invent", "Make up a result"),
            ("quiet", "Say nothing and query again"),
            ("branch", "Follow the chart's no-result branch (tell the user, ask what to change)"),
        ), "branch", "Charts have a path for no result; use it."),
        _q("suggestion", "Several suggested replies are offered. You pick:", (
            ("first", "Always the first one"),
            ("chart", "The one saying what the chart's next box says, with the right item selected"),
            ("longest", "The longest one"),
        ), "chart", "Suggestions are ranked, not chosen for you; the chart decides."),
        _q("custom", "When do you write your own reply instead of a suggestion?", (
            ("none_fits", "Only when no suggestion fits, as when the user goes off the chart"),
            ("always", "Whenever I like my words better"),
            ("never", "Never"),
        ), "none_fits", "Custom replies are logged as custom; use them for what the chart does not cover."),
    ),
)

USER_MULTI = Stage(
    role="user", number=MULTI_TASK, title="User, stage 2: multi-task dialogs",
    unlocks="user turns of multi-task dialogs",
    tutorial=(
        "In multi-task dialogs your scenario lists up to five things to get done in one conversation, "
        "say a hotel and then a ride. Everything from stage 1 still holds.",
        "Cover every task of the scenario. Unless it says otherwise you choose the order and may move back "
        "and forth between them, as people do.",
        "Say what you want next in your own words; the assistant switches tasks for you. You may refer back "
        "to a task you finished (change the time you booked, say).",
        "System instructions may concern any of the tasks, also one you finished: go back to it and follow "
        "them. Click Complete only when every task is done or cannot be done.",
    ),
    questions=(
        _q("changed", "What is new in multi-task dialogs?", (
            ("tasks", "My scenario has several tasks for one dialog"),
            ("role", "I play the assistant as well"),
            ("kb", "I can see the knowledge base"),
        ), "tasks", "Only the number of tasks changes."),
        _q("cover", "Your scenario lists two tasks. What is NOT ok?", (
            ("switch", "Switching back and forth between them"),
            ("small_talk", "Some small talk in between"),
            ("one", "Covering only one of them"),
        ), "one", "Every task of the scenario belongs in the dialog."),
        _q("order", "Must you do the tasks in the order listed?", (
            ("yes", "Yes, always"),
            ("no", "No, unless the scenario says so"),
            ("reverse", "No, always in reverse"),
        ), "no", "The order is yours unless the scenario fixes it."),
        _q("switch", "How do you move to the next task?", (
            ("words", "Just say what I want next"),
            ("code", "Type the task's name in capitals"),
            ("new", "End the dialog and start another"),
        ), "words", "The assistant switches tabs; you talk as you would to a person."),
        _q("back", "While on the second task you remember the first booking's time is wrong. You:", (
            ("ignore", "Leave it: that task is finished"),
            ("back", "Go back to it and ask to change the time"),
            ("new_dialog", "Complete the dialog and mention it nowhere"),
        ), "back", "Referring back to earlier tasks is welcome."),
        _q("nudge", "A system instruction concerns a task you finished earlier. You:", (
            ("follow", "Go back to that task and follow it"),
            ("skip", "Skip it"),
            ("later", "Follow it in my next dialog"),
        ), "follow", "Instructions apply whatever task you are on."),
        _q("complete", "When do you click Complete?", (
            ("first", "When the first task is done"),
            ("any", "When I get bored"),
            ("all", "When every task is done or cannot be done"),
        ), "all", "A multi-task dialog ends after its last task."),
        _q("names", "Each task in your scenario names a place. You:", (
            ("given", "Use the names given for each task"),
            ("mix", "Use one task's names for every task"),
            ("own", "Use places I know"),
        ), "given", "Each task's knowledge base knows its own names only."),
        _q("invent", "A task needs a detail your scenario does not give. You:", (
            ("refuse", "Refuse to answer"),
            ("stop", "Stop the dialog"),
            ("make_up", "Make up something plausible"),
        ), "make_up", "As in stage 1: invented details are fine where none is given."),
        _q("person", "Other users wrote earlier user turns of a multi-task dialog. You:", (
            ("same", "Continue as the same person, with all their tasks"),
            ("mine", "Start my own task over"),
            ("last", "Only answer the last message"),
        ), "same", "One person, one dialog, several tasks."),
    ),
)

WIZARD_MULTI = Stage(
    role="wizard", number=MULTI_TASK, title="Wizard, stage 2: multi-task dialogs",
    unlocks="wizard turns of multi-task dialogs",
    tutorial=(
        "In multi-task dialogs you help with up to five tasks, one tab each. Every tab has its own flow "
        "chart, knowledge base and suggestions. Everything from stage 1 still holds.",
        "When the user turns to another task, select its tab, then follow its chart from the point that "
        "fits what you already know: information the user gave for one task need not be asked again.",
        "Queries and suggestions belong to the selected task: select the tab before querying or picking "
        "a reply, or you will search the wrong knowledge base and offer the wrong replies.",
        "After finishing a task, ask whether you can help with anything else: the user may have more. If "
        "the user returns to an earlier task, go back to its tab and continue its chart.",
    ),
    questions=(
        _q("changed", "What is new for the wizard in multi-task dialogs?", (
            ("charts", "Several tasks, each with its own tab, chart and knowledge base"),
            ("design", "The charts look different"),
            ("role", "I also play the user"),
        ), "charts", "Only the number of charts changes."),
        _q("switch", "The user turns to another task. You:", (
            ("start", "Switch tabs and start that chart from its first box"),
            ("fits", "Switch tabs and follow that chart from the point that fits what I know"),
            ("custom", "Stay on my tab and write a custom reply"),
        ), "fits", "Do not ask again for what the user told you for another task."),
        _q("select", "Why select the task's tab before querying or picking a reply?", (
            ("looks", "It looks tidier"),
            ("user", "The user sees which tab I select"),
            ("belongs", "The form, the results and the suggestions belong to the selected task"),
        ), "belongs", "Each tab has its own API, database and templates."),
        _q("carry", "The second task's chart asks for a name the user gave for the first task. You:", (
            ("known", "Use the name I already have"),
            ("ask", "Ask for the name again"),
            ("skip", "Skip the task"),
        ), "known", "Carry information across tasks; the chart's point that fits is past that request."),
        _q("back", "The user returns to the first task to change a time. You:", (
            ("back", "Go back to the first task's tab and continue its chart"),
            ("refuse", "Say that task is finished"),
            ("current", "Handle it in the current tab"),
        ), "back", "Each task's chart continues in its own tab."),
        _q("which_kb", "Which knowledge base do you query for the hotel part of the dialog?", (
            ("any", "Whichever tab is open"),
            ("hotel", "The hotel task's, in its tab"),
            ("all", "All of them at once"),
        ), "hotel", "A query runs against the selected task's database."),
        _q("suggestions", "In multi-task dialogs, suggested replies are used:", (
            ("fits", "Whenever one fits, as in single-task dialogs"),
            ("never", "Never: the tasks are mixed"),
            ("first", "Only for the first task"),
        ), "fits", "Nothing about suggestions changes."),
        _q("finished", "You finished one task. You:", (
            ("end", "Say goodbye"),
            ("else", "Ask whether you can help with anything else"),
            ("guess", "Start the task you think comes next"),
        ), "else", "The user may have more tasks; you cannot see their scenario."),
        _q("important", "What still matters most?", (
            ("fast", "Finishing the tasks quickly"),
            ("talk", "Chatting with the user"),
            ("charts", "Following each task's flow chart whenever possible"),
        ), "charts", "As in stage 1, per tab."),
        _q("mixed", "The user asks about two tasks in one message. You:", (
            ("one", "Handle one task's part (its tab and chart), then the other"),
            ("ignore", "Answer only the easier part"),
            ("custom", "Answer both at once in a custom reply"),
        ), "one", "One task at a time keeps the log and the suggestions right."),
    ),
)

STAGES: dict[tuple[str, int], Stage] = {(s.role, s.number): s for s in
                                        (USER_SINGLE, WIZARD_SINGLE, USER_MULTI, WIZARD_MULTI)}
ROLES = ("user", "wizard")


def has_stages(role: str) -> bool:
    return role in ROLES


def stage_for(role: str, number: Any) -> Stage:
    """The role's stage ``number`` (1 or 2); anything else is refused naming the field."""
    if role not in ROLES:
        raise InvalidInput(f"STAR's qualification is for users and wizards, not {str(role)[:40]!r}", "role")
    if isinstance(number, str) and number.strip().isdecimal():
        number = int(number)
    if isinstance(number, bool) or (role, number) not in STAGES:
        raise InvalidInput(f"expected {SINGLE_TASK} (single-task) or {MULTI_TASK} (multi-task)", "stage")
    return STAGES[(role, number)]


# ---- grading: a plain function -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageGrade:
    passed: bool
    wrong: list[str]  # questions answered wrongly or not at all
    hints_used: int
    reasons: list[str]  # why it failed, in the worker's words; empty when passed


def clean_answers(stage: Stage, raw: Mapping[str, Any]) -> dict[str, str]:
    """The answers to the stage's questions, from a form (a list per field) or a JSON object. A value
    that is not one of the question's options, or sent twice, is refused naming the question; an
    unanswered question is left out (it grades as wrong); other fields are ignored."""
    clean = {}
    for q in stage.questions:
        value = raw.get(q.name)
        values = list(value) if isinstance(value, (list, tuple)) else [] if value is None else [value]
        if len(values) > 1:
            raise InvalidAnswer(q.name, "answer once")
        if not values:
            continue
        keys = [key for key, _ in q.options]
        if not isinstance(values[0], str) or values[0] not in keys:
            raise InvalidAnswer(q.name, f"choose one of: {', '.join(keys)}")
        clean[q.name] = values[0]
    return clean


def grade(stage: Stage, answers: Mapping[str, str], hints_used: int) -> StageGrade:
    """Pass when every question is answered right and at most ``stage.max_hints`` hints were used."""
    wrong = [q.name for q in stage.questions if answers.get(q.name) != q.answer]
    reasons = [f"{q.name}: {'not answered' if q.name not in answers else 'not the right answer'}"
               for q in stage.questions if q.name in wrong]
    if hints_used > stage.max_hints:
        reasons.append(f"hints: used {hints_used}, at most {stage.max_hints} may be used")
    return StageGrade(passed=not reasons, wrong=wrong, hints_used=hints_used, reasons=reasons)


# ---- which conversations a worker may take -----------------------------------------------------------------


def is_multi_task(scenario: Mapping[str, Any]) -> bool:
    """A STAR scenario that says it is multi-task (ours or STAR's key) or lists more than one task."""
    tasks = scenario.get("tasks")
    return (scenario.get("multi_task") is True or scenario.get("MultiTask") is True
            or (isinstance(tasks, list) and len(tasks) > 1))


def required_stage(scenario: Mapping[str, Any]) -> int:
    """The stage a worker must have passed to take a turn of a conversation with this scenario (a Wizard
    of Tasks conversation has none, so stage 1, which its roles never need, is as far as it goes)."""
    return MULTI_TASK if is_multi_task(scenario) else SINGLE_TASK


def passed_stage(worker: Worker) -> int:
    """The highest stage the worker passed; an onboarded worker has passed stage 1 (module docstring)."""
    return max(worker.stage, SINGLE_TASK if worker.onboarded else 0)


class multi_task(FunctionElement):
    """``is_multi_task`` of a JSON scenario column in SQL, on SQLite and PostgreSQL alike; it never fails
    on a malformed scenario (a scalar where a list belongs is simply not multi-task)."""

    type = Boolean()
    inherit_cache = True
    name = "multi_task"


@compiles(multi_task, "sqlite")
def _multi_task_sqlite(element: multi_task, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return (f"(json_type({column}, '$.multi_task') IS 'true' OR json_type({column}, '$.MultiTask') IS 'true' "
            f"OR (json_type({column}, '$.tasks') IS 'array' "
            f"AND json_type({column}, '$.tasks[1]') IS NOT NULL))")


@compiles(multi_task, "postgresql")
def _multi_task_postgresql(element: multi_task, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    flag = "(json_typeof({c} -> '{k}') = 'boolean' AND ({c} ->> '{k}') = 'true')"
    return (f"COALESCE({flag.format(c=column, k='multi_task')} OR {flag.format(c=column, k='MultiTask')} "
            f"OR (json_typeof({column} -> 'tasks') = 'array' AND ({column} -> 'tasks' -> 1) IS NOT NULL), "
            "false)")


def sees_multi_task(worker: Worker) -> bool:
    """Whether the worker may take turns of multi-task dialogs (passed stage 2)."""
    return passed_stage(worker) >= MULTI_TASK


def unlocked(query: Any, worker: Worker) -> Any:
    """Narrow a query that joins ``Conversation`` to the conversations whose stage ``worker`` passed."""
    return unlocked_at(query, sees_multi_task(worker))


def unlocked_at(query: Any, multi_task_passed: bool) -> Any:
    """``unlocked`` for a worker who did or did not pass stage 2 (statements built once, for either)."""
    return query if multi_task_passed else query.where(~multi_task(Conversation.scenario))


def check_stage(worker: Worker, scenario: Mapping[str, Any]) -> None:
    """Refuse a turn of a conversation whose stage the worker has not passed."""
    needed = required_stage(scenario)
    if passed_stage(worker) < needed:
        raise Forbidden(f"this turn is part of a multi-task dialog: pass the {worker.role} stage {needed} "
                        "(multi-task) quiz on /onboarding first")


# ---- attempts: opened, hinted, graded once -----------------------------------------------------------------


@dataclass(frozen=True)
class AttemptView:
    """What the quiz page shows of an attempt."""

    stage: Stage
    attempt: StageAttempt
    hints: dict[str, str]  # question -> hint text, for the hints taken
    hints_left: int


def next_stage(worker: Worker) -> Optional[Stage]:
    """The stage the worker may take now: stage 1, then stage 2; None when both are passed."""
    passed = passed_stage(worker)
    return None if passed >= MULTI_TASK else stage_for(worker.role, passed + 1)


def check_offered(worker: Worker, stage: Stage) -> None:
    if worker.status != WorkerStatus.active:
        raise Forbidden("you are blocked from taking turns; the requester reviews blocks daily")
    if worker.role != stage.role:
        raise Forbidden(f"this quiz is for {stage.role}s; you are registered as a {worker.role}")
    if stage.number > passed_stage(worker) + 1:
        raise Forbidden(f"stage {stage.number} is offered once you passed stage {stage.number - 1}")


def open_attempt(session: Session, worker: Worker, stage: Stage) -> Optional[StageAttempt]:
    return session.exec(select(StageAttempt).where(
        StageAttempt.worker_id == worker.id, StageAttempt.stage == stage.number,
        col(StageAttempt.graded_at).is_(None))).first()


def graded_attempts(session: Session, worker: Worker, stage: Stage) -> int:
    return session.exec(select(func.count()).select_from(StageAttempt).where(
        StageAttempt.worker_id == worker.id, StageAttempt.stage == stage.number,
        col(StageAttempt.graded_at).is_not(None))).one()


def start_attempt(session: Session, worker: Worker, stage: Stage, provider: str = LOCAL,
                  max_attempts: Optional[int] = None) -> StageAttempt:
    """The worker's open attempt at the stage, opened now if there is none (starting twice is one start).
    A stage passed already, or whose attempts are used up, is refused."""
    check_offered(worker, stage)
    if passed_stage(worker) >= stage.number:
        raise Conflict(f"you passed {stage.role} stage {stage.number} already")
    existing = open_attempt(session, worker, stage)
    if existing is not None:
        return existing
    limit = stage.max_attempts if max_attempts is None else max_attempts
    if graded_attempts(session, worker, stage) >= limit:
        raise Forbidden(f"you have used all {limit} attempts at {stage.role} stage {stage.number}")
    attempt = StageAttempt(worker_id=worker.id, role=stage.role, stage=stage.number, provider=provider)
    try:
        with savepoint(session):
            session.add(attempt)
            session.flush()
    except IntegrityError:  # started twice at once: one open attempt per worker and stage
        return open_attempt(session, worker, stage)
    events.record(session, "stage_started", f"worker:{worker.id}", worker_id=worker.id, role=stage.role,
                  stage=stage.number, attempt_id=attempt.id, provider=provider)
    return attempt


def _attempt(session: Session, worker: Worker, stage: Stage, attempt_id: Any) -> StageAttempt:
    if isinstance(attempt_id, str) and attempt_id.strip().isdecimal():
        attempt_id = int(attempt_id)
    if isinstance(attempt_id, bool) or not isinstance(attempt_id, int) or not 0 < attempt_id < 2**31:
        raise InvalidInput("expected the number of your attempt", "attempt")
    attempt = session.get(StageAttempt, attempt_id)
    if attempt is None or attempt.worker_id != worker.id or attempt.stage != stage.number:
        raise NotFound("no such attempt of yours at this stage")
    return attempt


def hints_taken(session: Session, attempt: StageAttempt) -> list[str]:
    return list(session.exec(select(StageHint.question).where(StageHint.attempt_id == attempt.id)
                             .order_by(StageHint.id)))


def request_hint(session: Session, worker: Worker, stage: Stage, attempt_id: Any, question: Any) -> str:
    """Record the hint for ``question`` and return its text: the row is written before the text goes
    out, so every hint seen is counted. The same hint again costs nothing more; a hint beyond the budget
    or for a graded attempt is refused."""
    if not isinstance(question, str):
        raise InvalidInput("name one question", "hint")
    q = stage.question(question)
    attempt = _attempt(session, worker, stage, attempt_id)
    if attempt.graded_at is not None:
        raise Conflict("this attempt is graded already; hints are for open attempts")
    taken = hints_taken(session, attempt)
    if q.name in taken:
        return q.hint
    if len(taken) >= stage.max_hints:
        raise Conflict(f"you have used all {stage.max_hints} hints of this quiz")
    try:
        with savepoint(session):
            session.add(StageHint(attempt_id=attempt.id, question=q.name))
            session.flush()
    except IntegrityError:  # the same hint asked twice at once
        return q.hint
    events.record(session, "stage_hint", f"worker:{worker.id}", worker_id=worker.id, role=stage.role,
                  stage=stage.number, attempt_id=attempt.id, question=q.name)
    return q.hint


def grade_attempt(session: Session, worker: Worker, stage: Stage, attempt_id: Any, raw: Mapping[str, Any],
                  now: Optional[datetime] = None) -> StageGrade:
    """Grade the attempt once, counting the hints the server recorded; passing stage 1 onboards the worker
    and unlocks single-task turns, stage 2 multi-task ones. Sending it again returns the first grade."""
    check_offered(worker, stage)
    attempt = _attempt(session, worker, stage, attempt_id)
    if attempt.graded_at is not None:
        return _stored_grade(attempt)
    answers = clean_answers(stage, raw)
    claimed = session.execute(
        update(StageAttempt).where(StageAttempt.id == attempt.id, col(StageAttempt.graded_at).is_(None))
        .values(graded_at=now or utcnow())).rowcount
    if claimed != 1:  # a concurrent send graded it first
        session.rollback()
        return _stored_grade(_attempt(session, worker, stage, attempt_id))
    result = grade(stage, answers, len(hints_taken(session, attempt)))
    session.execute(update(StageAttempt).where(StageAttempt.id == attempt.id).values(
        answers=answers, hints_used=result.hints_used, passed=result.passed, reasons=result.reasons))
    if result.passed:
        values: dict[str, Any] = {"stage": stage.number}
        if stage.number == SINGLE_TASK:
            values["onboarded"] = True
        session.execute(update(Worker).where(Worker.id == worker.id, Worker.stage < stage.number)
                        .values(**values))
    session.flush()
    session.refresh(worker)
    events.record(session, "stage_graded", f"worker:{worker.id}", worker_id=worker.id, role=stage.role,
                  stage=stage.number, attempt_id=attempt.id, passed=result.passed, wrong=result.wrong,
                  hints=result.hints_used, provider=attempt.provider)
    return result


def _stored_grade(attempt: StageAttempt) -> StageGrade:
    stage = stage_for(attempt.role, attempt.stage)
    wrong = [q.name for q in stage.questions if attempt.answers.get(q.name) != q.answer]
    return StageGrade(passed=bool(attempt.passed), wrong=wrong, hints_used=attempt.hints_used or 0,
                      reasons=list(attempt.reasons))


def attempt_view(session: Session, stage: Stage, attempt: StageAttempt) -> AttemptView:
    taken = hints_taken(session, attempt)
    hints = {name: stage.question(name).hint for name in taken}
    left = max(stage.max_hints - len(taken), 0)
    return AttemptView(stage=stage, attempt=attempt, hints=hints, hints_left=left)
