"""Protocols whose dialog is an event log written from their own pages: STAR, Frames, MEEP, and annotation (whose
one-turn conversations label the others' turns).

Each has a dialog module of plain functions, and the shared code (the worker pages, the CLI, the SGD export,
``turkflow replay``) reaches it through ``parts(name)`` instead of naming each protocol. A dialog module
provides:

- ``read_tasks(path) -> list[Task]``: the requester's files as unsaved tasks, all checked before any is
  returned (``turkflow tasks load --protocol NAME PATH``, then ``load_tasks`` below);
- ``make_scenarios(tasks, conversations, *, seed=0, **options) -> list[(Task, scenario)]``: a task and a
  scenario (``Conversation.scenario``) per conversation of a launch (annotation, whose conversations are
  another batch's turns, has ``launch(session, of_batch_id, scheme, annotators)`` instead);
- ``submit_turn(session, assignment_id, worker, body, *, as_answers=False) -> lifecycle.Submission``: a
  paid turn closed, its answers read off the events its worker logged;
- ``replay(session, conversation_ids) -> (count, differences)``: the logged actions run again, each
  difference a ``ReplayDifference``;
- ``sgd_dialogues(session, hash_key, filters)`` and ``sgd_services(session, names)``: the dialogs in the
  Schema-Guided Dialogue format and the services they name (Frames and MEEP; ``turkflow.dataset.sgd``
  converts STAR's own export; annotation, ``dialog=False``, has no dialog of its own);
- optionally ``survey_shows(session, conversation_id, role) -> str | None``: what a role's end-of-dialog
  page shows beside the questions (Frames shows the wizard the user's goal), ``survey_wording(conversation,
  role) -> {question: label}``: the dialog's own wording of a question (STAR's user is asked about their
  task as STAR worded it per task; the answer is stored with that wording), ``database_values(task)
  -> {column: [value, ...]}``: the task's database as an annotator picks from it (Frames), and
  ``verified_outcomes(session, conversation_ids) -> {conversation_id: Verified}``: each ended dialog's success
  checked against its goal (Frames' booking, STAR's task outcome, MEEP's destination), for agents' reports.

What the three modules do alike lives below the registry, once: who may log in a turn (``loggable``), the
event queries, a submit's fields (``one``, ``message_text``) and the closing of a paid turn, whose answers
are read off its events (``open_submit``, ``log_closing_action``, ``close_logged_turn``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from sqlalchemy import func
from sqlmodel import Session, col, select

from turkflow.errors import InvalidDocument, InvalidInput, NotFound, TurkflowError
from turkflow.dataset.export import ExportFilters
from turkflow.hits import lifecycle
from turkflow.models import (
    Assignment, AssignmentStatus, Batch, Conversation, DialogEvent, Hit, HitStatus, Task, Turn, TurnStatus,
    Worker,
)
from turkflow.protocols.questions import Protocol, clean_text


@dataclass(frozen=True)
class LoggedProtocol:
    name: str
    title: str  # as people write it: STAR, Frames, MEEP
    module: str  # its dialog module (the functions above)
    page: str  # the Flask endpoint of its turn page, which takes ``assignment_id``
    platforms: tuple[str, ...]  # the providers its pages run on
    replayed: str  # what ``replay`` counts: "queries", "searches", "clicks"
    dialog: bool = True  # False: its conversations label other protocols' turns (annotate), no dialog to export


LOGGED: dict[str, LoggedProtocol] = {p.name: p for p in (
    LoggedProtocol("star", "STAR", "turkflow.protocols.star.dialog", "star.turn", ("local", "prolific"), "queries"),
    LoggedProtocol("frames", "Frames", "turkflow.protocols.frames.dialog", "frames.turn", ("local", "prolific"),
                   "searches"),
    LoggedProtocol("meep", "MEEP", "turkflow.protocols.meep.dialog", "meep.turn", ("local", "prolific"), "clicks"),
    LoggedProtocol("annotate", "Annotation", "turkflow.protocols.annotate.dialog", "annotate.turn", ("local",),
                   "labels", dialog=False),
    LoggedProtocol("compare", "Side by side", "turkflow.protocols.compare.dialog", "compare.turn", ("local",),
                   "judgements", dialog=False),
)}


def logged(protocol: str) -> Optional[LoggedProtocol]:
    """The protocol's entry, or None for Wizard of Tasks (whose turn is one form)."""
    return LOGGED.get(protocol)


def parts(protocol: str) -> ModuleType:
    return importlib.import_module(LOGGED[protocol].module)


@dataclass(frozen=True)
class LoadResult:
    created: int
    updated: int


def load_tasks(session: Session, tasks: Sequence[Task]) -> LoadResult:
    """Insert new tasks and update loaded ones in place (by key); a key another protocol holds is refused."""
    keys = [t.key for t in tasks]
    existing = {t.key: t for t in session.exec(select(Task).where(col(Task.key).in_(keys)))}
    for task in tasks:
        known = existing.get(task.key)
        if known is not None and known.protocol != task.protocol:
            raise InvalidDocument(f"task {task.key!r} is already loaded as a {known.protocol} task")
        if known is None:
            session.add(task)
            continue
        known.title, known.domain, known.star = task.title, task.domain, task.star
        session.add(known)
    session.flush()
    return LoadResult(created=len(tasks) - len(existing), updated=len(existing))


# ---- what the three dialog modules share ------------------------------------------------------------------

YES = (True, "on", "true", "yes", "1")  # a checkbox or JSON flag that says yes


def one(body: dict[str, Any], name: str) -> Any:
    """One value of a field, popped from ``body``: a form's one-element list is its element; two values are
    refused. ``options`` (a picked reply's options in STAR) is a list by nature and stays one."""
    value = body.pop(name, None)
    if isinstance(value, list) and name != "options":
        if len(value) > 1:
            raise InvalidInput("send this field once", name)
        value = value[0] if value else None
    return value


def message_text(fields: dict[str, Any], name: str, limit: int, required: bool = True) -> str:
    """A message popped from an action's ``fields``: cleaned text of at most ``limit`` characters that holds
    words (``clean_text``'s rule), even where the message may be left out (``required=False``)."""
    value = fields.pop(name, None)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("expected text", name)
    text = clean_text(value, name)
    if required and not text:
        raise InvalidInput("this text is required", name)
    if len(text) > limit:
        raise InvalidInput(f"write at most {limit} characters", name)
    return text


def dialog_events(session: Session, conversation_id: int) -> list[DialogEvent]:
    return list(session.exec(select(DialogEvent).where(DialogEvent.conversation_id == conversation_id)
                             .order_by(col(DialogEvent.id))))


def task_of(session: Session, protocol: Protocol, conversation: Conversation) -> Task:
    """The conversation's task (Frames' and MEEP's dialogs have one; a STAR dialog may have several)."""
    task = session.get(Task, conversation.task_id)
    if task is None or task.protocol != protocol.name:
        raise NotFound(f"this dialog's {LOGGED[protocol.name].title} task is not loaded")
    return task


def conversation_pages(session: Session, protocol: Protocol, filters: ExportFilters,
                       page_size: int) -> Iterator[list[tuple[Conversation, Task]]]:
    """The protocol's conversations that ``filters`` select (as every export format applies them), each with
    its task, in id order, a page of ``page_size`` at a time."""
    after = 0
    while True:
        page = list(session.exec(
            select(Conversation, Task).join(Task, Task.id == Conversation.task_id)
            .join(Batch, Batch.id == Conversation.batch_id)
            .where(Conversation.id > after, Batch.protocol == protocol.name, *filters.conditions())
            .order_by(col(Conversation.id)).limit(page_size)))
        if not page:
            return
        after = page[-1][0].id
        yield page


def own_events(session: Session, turn: Turn, worker: Worker) -> list[DialogEvent]:
    """What ``worker`` logged in ``turn``: a worker whose lease ran out may have logged there too."""
    return list(session.exec(select(DialogEvent).where(DialogEvent.turn_id == turn.id,
                                                       DialogEvent.worker_id == worker.id)
                             .order_by(col(DialogEvent.id))))


def loggable(session: Session, protocol: Protocol, turn: Turn, worker: Worker,
             not_held: Optional[TurkflowError] = None) -> Conversation:
    """The conversation of ``turn`` when ``worker`` may log in it now: one of ``protocol``'s, the turn open
    and held by ``worker`` (only the worker holding the turn's live assignment writes its events).
    Otherwise an ``InvalidInput`` naming ``turn``, or ``not_held`` when the worker does not hold it."""
    conversation = session.get(Conversation, turn.conversation_id)
    batch = session.get(Batch, conversation.batch_id)
    if batch.protocol != protocol.name:
        raise InvalidInput(f"this conversation follows {batch.protocol}, not {LOGGED[protocol.name].title}",
                           "turn")
    if turn.status != TurnStatus.open:
        raise InvalidInput("this turn is no longer open", "turn")
    held = session.exec(
        select(Assignment.id).join(Hit, Hit.id == Assignment.hit_id)
        .where(Hit.turn_id == turn.id, Hit.status == HitStatus.open, Assignment.worker_id == worker.id,
               Assignment.status == AssignmentStatus.accepted)).first()
    if held is None:
        raise not_held or InvalidInput("you do not hold this turn", "turn")
    return conversation


def check_room(session: Session, turn: Turn, worker: Worker, most: int) -> None:
    """Refuse one more in-turn action of ``worker`` in ``turn`` once they logged ``most`` (the protocol's
    setting, ``Settings.max_actions``): 600 searches in one turn made every answer 1.65 MB and the next wizard's
    page 8.2 MB."""
    logged = session.exec(select(func.count()).select_from(DialogEvent).where(
        DialogEvent.turn_id == turn.id, DialogEvent.worker_id == worker.id)).one()
    if logged >= most:
        raise InvalidInput(f"this turn holds {logged} actions, the most one turn may: send your reply now",
                           "action")


LOG_PAGE = 20  # entries of a dialog's log a wizard's page shows at once (Frames' searches, STAR's queries)


@dataclass(frozen=True)
class LogPage:
    """A page of a dialog's log, newest first: its entries, how many the log holds, and where the pages of
    older and newer entries start (None: there is none). A dialog of hundreds of searches made a wizard's page
    of megabytes."""

    entries: list[Any]
    total: int
    older: Optional[int]
    newer: Optional[int]


def log_page(log: Sequence[Any], older: int, size: int = LOG_PAGE) -> LogPage:
    """The ``size`` entries of ``log`` (newest first) from its ``older``-th."""
    end = older + size
    return LogPage(list(log[older:end]), len(log), end if end < len(log) else None,
                   max(0, older - size) if older else None)


@dataclass(frozen=True)
class Judged:
    """What a submitted turn says of a writer where no peer rates them (an annotation's agreement, a judge's
    answer to a known-answer pair): one signal for ``monitor.judge_signal``, which the pipeline's review passes
    on from the protocol's ``judged_turn``."""

    turn: Turn
    ok: bool
    kind: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class ReplayDifference:
    """A logged action of a conversation that gives something else when run again now: ``what`` says which
    one, what was logged and what it gives now; ``turn_index`` names its turn where the protocol says it."""

    conversation_id: int
    what: str
    turn_index: Optional[int] = None
    event_id: Optional[int] = None  # the logged event run again (STAR's query)
    difference: Any = None  # the protocol's own record of it (MEEP's ``meep.execute.Difference``)

    def describe(self) -> str:
        turn = f", turn {self.turn_index + 1}" if self.turn_index is not None else ""
        return f"conversation {self.conversation_id}{turn}, {self.what}"


@dataclass(frozen=True)
class Verified:
    """A dialog's success checked against its goal (a booking against the user's constraints, the destination
    driven to against the one wanted): ``ok``, and ``evidence`` a reader can check it by (JSON)."""

    ok: bool
    evidence: dict[str, Any]


# ---- closing a paid turn -----------------------------------------------------------------------------------


@dataclass
class Submit:
    """A submit of the turn its worker holds, read: the answers given with ``as_answers`` (the label
    question's and ``response``), the writing ``signals``, and ``rest``, the fields the protocol's own pages
    send (the closing action to log), which the protocol pops before ``close_logged_turn``."""

    assignment_external_id: str
    worker: Worker
    turn: Turn
    label_name: str
    as_answers: bool
    rest: dict[str, Any]
    signals: Any = None
    label: Any = None
    response: Any = None


def open_submit(session: Session, protocol: Protocol, assignment_external_id: str, worker: Worker,
                body: Mapping[str, Any], *, as_answers: bool = False) -> Optional[Submit]:
    """The submit of a turn ``worker`` holds, read; None when the assignment is somebody else's or no longer
    open (``lifecycle.submit_turn`` then refuses it, or returns the stored turn of a repeated submit)."""
    assignment = session.exec(
        select(Assignment).where(Assignment.external_id == assignment_external_id)).first()
    if assignment is None:
        raise NotFound("this assignment does not exist")
    if assignment.worker_id != worker.id or assignment.status != AssignmentStatus.accepted:
        return None
    turn = session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)
    rest = dict(body)
    sent = Submit(assignment_external_id, worker, turn, protocol.form(turn.role).label_question().name,
                  as_answers, rest, signals=one(rest, "signals"))
    if as_answers:
        sent.label, sent.response = one(rest, sent.label_name), one(rest, "response")
    return sent


def submitted_before(session: Session, assignment_external_id: str, worker: Worker,
                     body: Mapping[str, Any]) -> lifecycle.Submission:
    """A submit ``open_submit`` did not open: refused (not the worker's, or no longer theirs), or the stored
    turn of a repeated submit, which must repeat its text (``lifecycle.check_resent``: a double click or a
    retried request changes nothing; other text is a 409 naming what was stored), whichever page sent it."""
    submission = lifecycle.submit_turn(session, assignment_external_id, worker, {})
    if not submission.created:
        lifecycle.check_resent(submission.turn, body.get("text"), "text")
    return submission


def log_closing_action(session: Session, sent: Submit, act: Callable[..., Any],
                       closing: Sequence[str]) -> None:
    """What a page's submit logs now: the closing ``action`` with its fields, through the protocol's
    ``act(session, turn, worker, action, fields)``, then ``complete`` when the user ends the dialog."""
    rest, turn = sent.rest, sent.turn
    complete = one(rest, "complete") in YES
    action = one(rest, "action")
    if action is not None:
        if action not in closing:
            raise InvalidInput(f"a {turn.role}'s turn closes with {' or '.join(closing)}", "action")
        act(session, turn, sent.worker, action, {k: one(rest, k) for k in list(rest)})
    elif rest:
        raise InvalidInput("not a field of a submit", str(sorted(rest)[0])[:60])
    if complete:
        if turn.role != "user":
            raise InvalidInput("only the user ends the dialog", "complete")
        act(session, turn, sent.worker, "complete", {})


def close_logged_turn(session: Session, sent: Submit, *, closing: Sequence[str], holds: str,
                      logged_as: str = "events", ending: Sequence[str] = ("complete",)) -> lifecycle.Submission:
    """Submit the turn through ``lifecycle.submit_turn`` with the answers its holder's events say.

    The turn must hold exactly one ``closing`` action (``holds`` says which in a refusal: "exactly one
    message"); the label is the ``ending`` action the turn holds (the user's ``complete``, Frames' wizard's
    ``book``), else that action, and the response its text. Answers given with ``as_answers`` must agree with them (``logged_as`` names the log in the
    refusal: events, clicks); a field nobody asked for is refused."""
    if sent.rest:
        refused = "not a question of this turn" if sent.as_answers else "not a field of a submit"
        raise InvalidInput(refused, str(sorted(sent.rest)[0])[:60])
    mine = own_events(session, sent.turn, sent.worker)
    closed = [e for e in mine if e.action in closing]
    if len(closed) != 1:
        raise InvalidInput(f"this turn must hold {holds}; it holds {len(closed)}", sent.label_name)
    label = next((e.action for e in mine if e.action in ending), closed[0].action)
    text = closed[0].data["Text"]
    if sent.label is not None and sent.label != label:
        raise InvalidInput(f"this turn's {logged_as} say {label!r}", sent.label_name)
    given = sent.response
    if given is not None and (not isinstance(given, str) or clean_text(given, "response") != text):
        raise InvalidInput("differs from the message this turn logged", "response")
    answers: dict[str, Any] = {sent.label_name: label, "response": text}
    if sent.signals is not None:
        answers["signals"] = sent.signals
    return lifecycle.submit_turn(session, sent.assignment_external_id, sent.worker, answers)
