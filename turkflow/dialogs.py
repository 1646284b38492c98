"""Protocols whose dialog is an event log written from their own pages: STAR, Frames and MEEP.

Each has a dialog module of plain functions, and the shared code (the worker pages, the CLI, the SGD export,
``turkflow replay``) reaches it through ``parts(name)`` instead of naming each protocol. A dialog module
provides:

- ``read_tasks(path) -> list[Task]``: the requester's files as unsaved tasks, all checked before any is
  returned (``turkflow tasks load --protocol NAME PATH``, then ``load_tasks`` below);
- ``make_scenarios(tasks, conversations, *, seed=0, **options) -> list[(Task, scenario)]``: a task and a
  scenario (``Conversation.scenario``) per conversation of a launch;
- ``submit_turn(session, assignment_id, worker, body, *, as_answers=False) -> lifecycle.Submission``: a
  paid turn closed, its answers read off the events its worker logged;
- ``replay(session, conversation_ids) -> (count, differences)``: the logged actions run again, each
  difference with ``conversation_id`` and ``describe()``;
- ``sgd_dialogues(session, hash_key, filters)`` and ``sgd_services(session, names)``: the dialogs in the
  Schema-Guided Dialogue format and the services they name;
- optionally ``survey_shows(session, conversation_id, role) -> str | None``: what a role's end-of-dialog
  page shows beside the questions (Frames shows the wizard the user's goal).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Optional, Sequence

from sqlmodel import Session, col, select

from turkflow.errors import InvalidDocument
from turkflow.models import Task


@dataclass(frozen=True)
class LoggedProtocol:
    name: str
    title: str  # as people write it: STAR, Frames, MEEP
    module: str  # its dialog module (the functions above)
    page: str  # the Flask endpoint of its turn page, which takes ``assignment_id``
    platforms: tuple[str, ...]  # the providers its pages run on
    replayed: str  # what ``replay`` counts: "queries", "searches", "clicks"


LOGGED: dict[str, LoggedProtocol] = {p.name: p for p in (
    LoggedProtocol("star", "STAR", "turkflow.star_dialog", "star.turn", ("local", "prolific"), "queries"),
    LoggedProtocol("frames", "Frames", "turkflow.frames_dialog", "frames.turn", ("local",), "searches"),
    LoggedProtocol("meep", "MEEP", "turkflow.meep_dialog", "meep.turn", ("local",), "clicks"),
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
