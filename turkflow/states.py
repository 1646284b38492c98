"""Every status change, in one place: which moves each entity may make, and the one function that makes them.

``MOVES`` is each entity's state machine, read off what the code does: a HIT is published (pending to
open), written (open to submitted) or ends unanswered (expired); a worker is blocked for a while by the
quality monitor, for good or unblocked by a person. A status listed among its own moves may be set again and
nothing changes (a batch paused twice, a review queue rebuilt the same day); any other move not listed raises
``IllegalTransition``.

Nothing else writes a status column (``tests/test_states.py`` reads the source to keep it so):

- ``move(entity, to)`` changes an ORM object's status;
- ``update_to(Model, to)`` is the compare-and-set ``UPDATE ... SET status = to WHERE status IN (the states
  allowed to move to it)``, one statement, for the paths where concurrent requests race (two submits of one
  turn, two payers of one bonus): the caller adds its own ``where`` and ``values``, and reads ``rowcount``
  to learn whether it won;
- ``platform_follows(worker_id, target)`` records that a worker's crowd platform now reflects their status.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import Update, update
from sqlmodel import col

from turkflow.errors import IllegalTransition
from turkflow.models import (
    AgentTurn,
    AgentTurnStatus,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    Bonus,
    BonusStatus,
    Conversation,
    ConversationStatus,
    Hit,
    HitStatus,
    PlaceStatus,
    ProlificPlace,
    ReviewEntry,
    ReviewStatus,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
)

A, B, C, H = AssignmentStatus, BatchStatus, ConversationStatus, HitStatus
R, T, W = ReviewStatus, TurnStatus, WorkerStatus

MOVES: Mapping[type, Mapping[str, frozenset[str]]] = {
    Batch: {
        # pausing, resuming or cancelling twice (a person repeating a command) changes nothing
        B.active: frozenset({B.active, B.paused, B.cancelled, B.completed}),  # completed: its last conversation
        B.paused: frozenset({B.paused, B.active, B.cancelled}),
        B.cancelled: frozenset({B.cancelled}),
        B.completed: frozenset(),
    },
    Conversation: {
        C.active: frozenset({C.completed, C.cancelled}),
        C.completed: frozenset(),
        C.cancelled: frozenset(),
    },
    Turn: {
        T.open: frozenset({T.submitted, T.cancelled}),
        T.submitted: frozenset(),
        T.cancelled: frozenset(),
    },
    Hit: {
        H.pending: frozenset({H.open, H.expired}),  # expired: its batch was cancelled before it was published
        H.open: frozenset({H.submitted, H.expired}),
        H.submitted: frozenset(),
        H.expired: frozenset(),
    },
    Assignment: {
        A.accepted: frozenset({A.submitted, A.abandoned}),
        A.submitted: frozenset({A.approved, A.rejected, A.unpaid}),
        A.rejected: frozenset({A.approved}),  # a rejection overridden on the platform (MTurk allows it)
        A.approved: frozenset(),
        A.abandoned: frozenset(),
        # the turn is kept, so it is paid: approved late (Prolific allows a timed-out one), else its reward
        # goes as a bonus
        A.unpaid: frozenset({A.approved, A.compensated}),
        A.compensated: frozenset(),
    },
    ProlificPlace: {
        # a session: the participant writes turn after turn, then ends it on our page or leaves on Prolific
        PlaceStatus.open: frozenset({PlaceStatus.finished, PlaceStatus.left}),
        # finished on our page: Prolific approves it, or it was returned or timed out there after all
        PlaceStatus.finished: frozenset({PlaceStatus.approved, PlaceStatus.left}),
        # left: paid if the participant wrote turns (approved late where Prolific allows, else a bonus)
        PlaceStatus.left: frozenset({PlaceStatus.approved, PlaceStatus.compensated}),
        PlaceStatus.approved: frozenset(),
        PlaceStatus.compensated: frozenset(),
    },
    Worker: {
        W.active: frozenset({W.temporarily_blocked, W.blocked}),
        W.temporarily_blocked: frozenset({W.blocked, W.active}),
        W.blocked: frozenset({W.active}),
    },
    Bonus: {
        BonusStatus.pending: frozenset({BonusStatus.paid}),
        BonusStatus.paid: frozenset(),
    },
    AgentTurn: {
        # calling: claimed by an agents-queue worker; back to waiting after a failed call (or a worker lost
        # mid-call); each end once
        AgentTurnStatus.waiting: frozenset({AgentTurnStatus.calling, AgentTurnStatus.cancelled}),
        AgentTurnStatus.calling: frozenset({AgentTurnStatus.waiting, AgentTurnStatus.answered, AgentTurnStatus.failed,
                                            AgentTurnStatus.handed_over, AgentTurnStatus.cancelled}),
        AgentTurnStatus.answered: frozenset(),
        AgentTurnStatus.failed: frozenset(),
        AgentTurnStatus.handed_over: frozenset(),
        AgentTurnStatus.cancelled: frozenset(),
    },
    ReviewEntry: {
        # the daily job rebuilds the queue: a worker blocked again since their entry was resolved is back
        R.pending: frozenset({R.pending, R.blocked, R.unblocked}),
        R.blocked: frozenset({R.pending}),
        R.unblocked: frozenset({R.pending}),
    },
}

NAMES = {Batch: "batch", Conversation: "conversation", Turn: "turn", Hit: "HIT", Assignment: "assignment",
         Worker: "worker", Bonus: "bonus", ReviewEntry: "review entry", AgentTurn: "agent turn",
         ProlificPlace: "Prolific place"}


def allowed(model: type, current: str, to: str) -> bool:
    """Whether an entity of ``model`` in ``current`` may be set to ``to`` (the same status where listed)."""
    return to in _moves(model).get(current, frozenset())


def move(entity: Any, to: str) -> bool:
    """Set ``entity``'s status to ``to`` if its state machine allows it; returns whether the status changed
    (False: it already was ``to`` and that may be set again). The caller adds the entity and records events.

    Raises ``IllegalTransition`` for any other move."""
    model, current = type(entity), getattr(entity, "status", None)
    if not allowed(model, current, to):
        raise IllegalTransition(NAMES[model], entity.id, current, to)
    if current == to:
        return False
    entity.status = to
    return True


def sources(model: type, to: str) -> frozenset[str]:
    """The statuses from which an entity of ``model`` may move to ``to`` (not ``to`` itself)."""
    moves = _moves(model)
    found = frozenset(current for current, targets in moves.items() if to in targets and current != to)
    if not found:
        raise ValueError(f"no {NAMES[model]} may become {to}")
    return found


def update_to(model: type, to: str) -> Update:
    """``UPDATE model SET status = to WHERE status IN (sources)``: the single-statement compare-and-set.
    Add the row's own conditions with ``.where(...)`` and other columns with ``.values(...)``; a rowcount of
    0 means another request moved the row first (or it is in a state that cannot move to ``to``)."""
    allowed_from = sorted(sources(model, to))
    status = col(model.status)
    where = status == allowed_from[0] if len(allowed_from) == 1 else status.in_(allowed_from)
    return update(model).where(where).values(status=to)


def platform_follows(worker_id: int, target: WorkerStatus) -> Update:
    """Record that the worker's crowd platform now reflects ``target``, if that is still their status.

    ``Worker.platform_status`` is not a state machine of its own: it follows ``status`` (any status to any
    other, as the person's and the monitor's decisions go), one platform call behind."""
    return update(Worker).where(Worker.id == worker_id, Worker.status == target).values(platform_status=target)


def _moves(model: type) -> Mapping[str, frozenset[str]]:
    if model not in MOVES:
        raise TypeError(f"{model.__name__} has no status machine in turkflow.states")
    return MOVES[model]


__all__ = ["MOVES", "allowed", "move", "platform_follows", "sources", "update_to"]
