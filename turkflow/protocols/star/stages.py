"""STAR's staged qualification: per role (user, wizard) a tutorial and a quiz per stage, as STAR ran it.

Stage 1 (single-task) unlocks the role for single-task STAR conversations; stage 2 (multi-task) is
offered only after stage 1 and unlocks conversations whose scenario has more than one task. A quiz has
ten questions, each with a hint; it passes when every answer is right and at most six hints were used
(STAR, section 3.1 and appendix D). The quiz texts are ours, about what STAR's workers do. The tutorial is
in named parts (each paragraph starts with its name); a question is a situation to apply it to (a
knowledge-base answer and the reply it calls for, a scenario whose item is taken), never a sentence of the
tutorial asked back, and its hint names the part that answers it, never the answer.

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
from turkflow.protocols.star import MULTI_TASK, SINGLE_TASK
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

def _see(section: str) -> str:
    """A hint: where the tutorial answers the question, never the answer itself."""
    return f"See the part “{section}” of the tutorial above."


USER_SINGLE = Stage(
    role="user", number=SINGLE_TASK, title="User, stage 1: single-task dialogs",
    unlocks="user turns of single-task dialogs",
    tutorial=(
        "Your scenario. As the user you chat with an AI assistant (another person, the wizard) to get one "
        "thing done: book an apartment viewing, report a lost card, find a hotel. The scenario shown beside "
        "the chat is your situation, and the assistant cannot read it. Use the names and values it gives (a "
        "doctor, a place, an airline): the assistant's knowledge base knows only those. A detail it does not "
        "give, such as a phone number or a birth date, you may invent.",
        "The knowledge base. The assistant searches a knowledge base your page never shows. Ask for what you "
        "need in words and let the assistant report what it found. When the assistant says what you wanted "
        "does not exist or is taken, do what your scenario says for that case; if it says nothing, take an "
        "alternative the assistant offers or let that part go. Never claim to know better than the search.",
        "System instructions. During the dialog the system may give you an instruction in a yellow box: "
        "change your mind, make small talk, or something happens to you. Act on it in your next messages, "
        "in your own words, as the person you play; if one was missed, act on it as soon as you notice.",
        "Several writers. Other people may have written the earlier user turns. Read the whole chat: what "
        "they said about you (a name, a date) is true for you too.",
        "Ending. The Complete button ends the dialog. Use it once your task is done or cannot be done and "
        "every instruction you received has been acted on.",
        "Writing. Write naturally, in sentences, as the person in the scenario would speak; never in "
        "keywords or by copying the scenario's text.",
    ),
    questions=(
        _q("goal", "You open a user turn. The chat is still empty. What is your first message based on?", (
            ("scenario", "The text beside the chat that describes my situation"),
            ("assistant", "Whatever the assistant will propose"),
            ("choose", "Any errand I can think of"),
        ), "scenario", _see("Your scenario")),
        _q("invent", "The assistant asks for your date of birth. Your scenario names a doctor and a day, "
                     "nothing else. You reply:", (
            ("give_up", "By ending the dialog"),
            ("make_up", "With a plausible date that I make up"),
            ("refuse", "That I cannot say"),
        ), "make_up", _see("Your scenario")),
        _q("unavailable", "Your scenario: see Dr. Han on Monday. The assistant replies that Dr. Han has no "
                          "appointment on Monday; your scenario says nothing about that case. You:", (
            ("insist", "Repeat that I want Monday until it works"),
            ("adapt", "Ask about another day or doctor, or accept that it cannot be done"),
            ("invent", "Say that Dr. Han already promised me Monday"),
        ), "adapt", _see("The knowledge base")),
        _q("nudge", "Your scenario: a table for two on Saturday. After your second message a yellow box "
                    "says: your friend cannot come on Saturday. Your next message:", (
            ("ignore", "Confirms Saturday as planned"),
            ("tell", "Tells the assistant that the system sent me an instruction"),
            ("follow", "Says that Saturday no longer works and asks about another day"),
        ), "follow", _see("System instructions")),
        _q("missed", "Reading the chat, you see a yellow box from three turns ago that no user acted on. "
                     "You:", (
            ("follow_now", "Do what it asked in this message"),
            ("drop", "Leave it, its moment has passed"),
            ("restart", "Press Complete and begin a fresh dialog"),
        ), "follow_now", _see("System instructions")),
        _q("kb", "The assistant writes: I found three Italian restaurants. You want one with outdoor "
                 "seating. You:", (
            ("yes", "Look the three up on my page"),
            ("no", "Ask the assistant whether one of them has outdoor seating"),
            ("sometimes", "Name some restaurant I like"),
        ), "no", _see("The knowledge base")),
        _q("names", "Your scenario says: see Dr. Alexis on Thursday. The assistant asks which doctor you "
                    "want. You write:", (
            ("own", "Dr. Smith, my family doctor"),
            ("given", "Dr. Alexis, please."),
            ("any", "Any doctor will do."),
        ), "given", _see("Your scenario")),
        _q("history", "An earlier user turn, written by someone else, said your name is Maria. The "
                      "assistant now asks for your name. You answer:", (
            ("restart", "With my own name"),
            ("ignore", "With a new name I make up"),
            ("continue", "Maria"),
        ), "continue", _see("Several writers")),
        _q("complete", "The assistant has booked your table. A yellow box earlier asked you to ask about "
                       "parking, and nobody has yet. You:", (
            ("any", "Press Complete: the table is booked"),
            ("done", "Ask about parking first, then press Complete"),
            ("never", "Wait for the assistant to close the dialog"),
        ), "done", _see("Ending")),
        _q("style", "The assistant asked which day you would like. Which reply is best?", (
            ("robot", "day=Friday"),
            ("natural", "Friday would suit me, ideally in the morning."),
            ("copy", "The scenario's paragraph, pasted as it is"),
        ), "natural", _see("Writing")),
    ),
)

WIZARD_SINGLE = Stage(
    role="wizard", number=SINGLE_TASK, title="Wizard, stage 1: single-task dialogs",
    unlocks="wizard turns of single-task dialogs",
    tutorial=(
        "The flow chart. As the wizard you play an AI assistant that helps the user with one task. The "
        "task's flow chart says what to do: which questions to ask, when to query the knowledge base, what "
        "to say about its answer. Follow it whenever you can; it matters more than being brief or chatty. A "
        "user who has not said what they want yet gets the chart's first box, the greeting.",
        "Requests. A request box is information you must get before the next step; a request-optional box "
        "is information you may ask for but can go without. Information the user already gave is never "
        "asked for again: go on to the first thing the chart still needs, whatever order the user chose.",
        "The knowledge base. Query once the user has given what the chart's boxes before its query box ask "
        "for, and fill in only the fields the user gave: a guessed field can hide what the user wants. The "
        "user never sees the answer, so tell them what the chart says to tell, following the branch the "
        "answer decides. Never tell a user that something is available or booked unless the knowledge base "
        "said so; a Check request only checks, and only a query with request type Book books.",
        "Suggestions. Type what you mean to say and request suggestions: the chart's replies, ranked and "
        "filled with the item you selected. Pick the one saying what the chart's coming box says. Write your "
        "own reply only when none fits, because the user went somewhere the chart does not go.",
        "Several writers. Other wizards may have written the earlier wizard turns: read the whole chat and "
        "the logged queries, and continue from where the chart stands.",
    ),
    questions=(
        _q("important", "Two replies would both answer the user: the chart's coming box, or a warmer "
                        "sentence of your own. You send:", (
            ("short", "My warmer sentence"),
            ("chart", "The chart's box"),
            ("long", "Both, one after the other"),
        ), "chart", _see("The flow chart")),
        _q("greeting", "The user's first message is only: Hi there! You reply:", (
            ("greet", "Hello, how can I help?"),
            ("list", "I can book doctors, hotels, rides and more."),
            ("confused", "Could I have your name, please?"),
        ), "greet", _see("The flow chart")),
        _q("optional", "Only a request-optional box (floor) stands before the query. The user gave the rest "
                       "and does not mind which floor. You:", (
            ("skip", "Set floor 1 to be safe"),
            ("required", "Ask for a floor until they name one"),
            ("optional", "Run the query without a floor"),
        ), "optional", _see("Requests")),
        _q("order", "The chart asks for a name, then a day, then a time. The user opens with: Thursday at "
                    "3 pm, please. Your next question is about:", (
            ("name", "The name"),
            ("date", "The day"),
            ("query", "The time"),
        ), "name", _see("Requests")),
        _q("when_query", "The doctor chart asks for name, doctor, day, time and symptoms, then queries. The "
                         "user gave all but the symptoms. You:", (
            ("first", "Query now and ask about symptoms later"),
            ("ready", "Ask about the symptoms"),
            ("asked", "Say the appointment is booked"),
        ), "ready", _see("The knowledge base")),
        _q("fields", "The user wants an Italian restaurant and never mentioned price. In the query form "
                     "you:", (
            ("empty", "Leave price blank"),
            ("guess", "Choose a medium price"),
            ("all", "Tick every price"),
        ), "empty", _see("The knowledge base")),
        _q("results", "You checked Dr. Han for Monday at 10 am. The knowledge base answered: The doctor has a "
                      "conflicting appointment at that time. You reply:", (
            ("both", "Dr. Han is free at 10 am. Shall I book it?"),
            ("me", "Unfortunately Dr. Han cannot see you at 10 am on Monday."),
            ("user", "Your appointment with Dr. Han is booked!"),
        ), "me", _see("The knowledge base")),
        _q("no_result", "Your search for Thai food in the city centre returned no item. You:", (
            ("invent", "Recommend a Thai place I know"),
            ("quiet", "Run the same search again until something appears"),
            ("branch", "Tell the user nothing matches and ask what they could change"),
        ), "branch", _see("The knowledge base")),
        _q("booked", "A query with request type Check said the slot is free. The user answers: great, "
                     "please go ahead. You:", (
            ("confirm", "Tell the user the appointment is booked"),
            ("book", "Send the query once more as a Book request, then report the answer"),
            ("call", "Ask the user to call the clinic"),
        ), "book", _see("The knowledge base")),
        _q("custom", "The user asks whether the hotel accepts dogs. No suggestion and no knowledge-base "
                     "field says anything about pets. You:", (
            ("none_fits", "Write a reply of my own"),
            ("always", "Pick the closest suggestion anyway"),
            ("never", "Skip the question and go on with the chart"),
        ), "none_fits", _see("Suggestions")),
    ),
)

USER_MULTI = Stage(
    role="user", number=MULTI_TASK, title="User, stage 2: multi-task dialogs",
    unlocks="user turns of multi-task dialogs",
    tutorial=(
        "Several tasks. In multi-task dialogs your scenario lists up to five things to get done in one "
        "conversation, say a hotel and then a ride. Everything from stage 1 still holds.",
        "Order. Unless the scenario fixes an order, you choose it, and you may move back and forth between "
        "the tasks as people do. All of them belong in the dialog.",
        "Switching. Say what you want next in your own words; the assistant changes task for you. You may "
        "return to a task you finished, for instance to change something about it.",
        "Instructions. A yellow box may concern any of the tasks, also one you finished: go back to that "
        "task and act on it.",
        "Ending. Press Complete only once each task of the scenario is done or cannot be done.",
    ),
    questions=(
        _q("changed", "What is new in a stage 2 dialog compared to stage 1?", (
            ("tasks", "My scenario asks for a hotel and a taxi in the same chat"),
            ("role", "I also write the assistant's replies"),
            ("kb", "The knowledge base answers appear on my page"),
        ), "tasks", _see("Several tasks")),
        _q("cover", "Your scenario: book a hotel, then a taxi to it. The hotel is booked and you would "
                    "like to stop. You:", (
            ("switch", "Make small talk until the assistant ends it"),
            ("small_talk", "Press Complete"),
            ("one", "Ask for the taxi next"),
        ), "one", _see("Order")),
        _q("order", "Your scenario lists a restaurant, then the weather, and says nothing about order. You "
                    "open with the weather. Is that fine?", (
            ("yes", "No: the listed order must be kept"),
            ("no", "Yes"),
            ("reverse", "Only if the assistant agrees first"),
        ), "no", _see("Order")),
        _q("switch", "The hotel is done and you want a ride to the airport. Your message:", (
            ("words", "Thanks! Now I need a ride to the airport at 6."),
            ("code", "TASK: RIDE_BOOK"),
            ("new", "Nothing: I press Complete and wait for a new dialog"),
        ), "words", _see("Switching")),
        _q("back", "While arranging the ride you remember the hotel stay should be two nights, not one. "
                   "You:", (
            ("ignore", "Let it be: the hotel task is over"),
            ("back", "Tell the assistant the stay should be two nights"),
            ("new_dialog", "Mention it after pressing Complete"),
        ), "back", _see("Switching")),
        _q("nudge", "You are on the ride task. A yellow box says: you want a room with a balcony. You:", (
            ("follow", "Ask the assistant about a room with a balcony at the hotel"),
            ("skip", "Ignore it: the hotel is done"),
            ("later", "Ask for a car with a balcony"),
        ), "follow", _see("Instructions")),
        _q("complete", "Two of your three tasks are done. The assistant says the party venue cannot be "
                       "booked that day, and your scenario says nothing more about it. You:", (
            ("first", "Must keep asking until the venue is booked"),
            ("any", "Must wait for the assistant to finish"),
            ("all", "May press Complete"),
        ), "all", _see("Ending")),
        _q("names", "Your scenario names Hotel Aurora for the stay and Luigi's for dinner. On the "
                    "restaurant task the assistant asks where you want to eat. You answer:", (
            ("given", "At Luigi's, please."),
            ("mix", "At Hotel Aurora, please."),
            ("own", "At the pizza place near my office."),
        ), "given", _see("Several tasks")),
        _q("invent", "The taxi task asks for your phone number; your scenario gives none. You:", (
            ("refuse", "Say I cannot give one"),
            ("stop", "Skip the taxi task"),
            ("make_up", "Give a plausible number I make up"),
        ), "make_up", _see("Several tasks")),
        _q("person", "Earlier users of this dialog booked the hotel for Sam Lee. On the ride task the "
                     "assistant asks for the passenger's name. You answer:", (
            ("same", "Sam Lee"),
            ("mine", "My own name"),
            ("last", "A new name I make up"),
        ), "same", _see("Several tasks")),
    ),
)

WIZARD_MULTI = Stage(
    role="wizard", number=MULTI_TASK, title="Wizard, stage 2: multi-task dialogs",
    unlocks="wizard turns of multi-task dialogs",
    tutorial=(
        "Tabs. In multi-task dialogs you help with up to five tasks, one tab each. Every tab has its own "
        "flow chart, knowledge base and suggestions. Everything from stage 1 still holds.",
        "Changing task. When the user turns to another task, select its tab, then follow its chart from the "
        "point that fits what you already know: information the user gave for one task is not asked again.",
        "Selecting first. Queries and suggestions belong to the selected tab: select the right one before "
        "querying or picking a reply, or you search the wrong knowledge base and offer the wrong replies.",
        "Finishing a task. When a chart has no box left, ask whether you can help with anything else: the "
        "user may have more. When the user comes back to an earlier task, return to its tab and continue.",
    ),
    questions=(
        _q("changed", "What does a stage 2 wizard page add to stage 1's?", (
            ("charts", "Several task tabs to move between"),
            ("design", "Charts drawn differently"),
            ("role", "Writing the user's turns too"),
        ), "charts", _see("Tabs")),
        _q("switch", "You booked the hotel for Sam Lee. The user now asks for a taxi; the ride chart starts "
                     "by asking the name. You:", (
            ("start", "Open the ride tab and ask for the name"),
            ("fits", "Open the ride tab and ask for what the ride needs besides the name"),
            ("custom", "Stay on the hotel tab and write my own reply"),
        ), "fits", _see("Changing task")),
        _q("select", "On the hotel tab, the user asks about the weather in Paris and you query at once. "
                     "What goes wrong?", (
            ("looks", "Nothing: the page guesses the task"),
            ("user", "The user sees the hotel tab"),
            ("belongs", "The query goes to the hotel database and the replies offered are hotel replies"),
        ), "belongs", _see("Selecting first")),
        _q("carry", "The user gave their name for the doctor appointment. The follow-up task's chart also "
                    "starts by asking the name. You:", (
            ("known", "Go past that box with the name I have"),
            ("ask", "Ask for the name again"),
            ("skip", "Skip the whole task"),
        ), "known", _see("Changing task")),
        _q("back", "During the taxi task the user wants to move the hotel booking to Friday. You:", (
            ("back", "Select the hotel tab and continue its chart with Friday"),
            ("refuse", "Say the hotel is done"),
            ("current", "Handle it from the taxi tab"),
        ), "back", _see("Finishing a task")),
        _q("which_kb", "On the restaurant tab the user asks whether it will rain in Berlin tomorrow. Before "
                       "querying you:", (
            ("any", "Stay on the restaurant tab"),
            ("hotel", "Select the weather tab"),
            ("all", "Answer from what I know"),
        ), "hotel", _see("Selecting first")),
        _q("suggestions", "Your hotel query answered: Reservation Failed. You:", (
            ("fits", "Tell the user it failed, with the fitting suggestion or my own words"),
            ("never", "Tell the user the room is reserved"),
            ("first", "Say nothing and query again"),
        ), "fits", _see("Tabs")),
        _q("finished", "The ride is booked and the ride chart has no box left. You:", (
            ("end", "Say goodbye"),
            ("else", "Ask if there is something more the user needs"),
            ("guess", "Start the hotel chart, which users often want next"),
        ), "else", _see("Finishing a task")),
        _q("important", "The user chats while asking about two tasks. What decides each of your replies "
                        "most?", (
            ("fast", "Finishing quickly"),
            ("talk", "Keeping the user chatting"),
            ("charts", "The chart of the task the reply is about"),
        ), "charts", _see("Tabs")),
        _q("mixed", "The user writes: book the table for 8 pm, and will it rain tomorrow? You:", (
            ("one", "Handle the restaurant in its tab, then the weather in its tab"),
            ("ignore", "Answer only the weather"),
            ("custom", "Answer both in one reply of my own"),
        ), "one", _see("Tabs")),
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
