"""Who may see and change what on the dashboard: a lab's researchers share one turkflow.

A batch belongs to the requester who launched it (``turkflow batch launch --owner``; a batch of nobody's is the
operator's). A requester sees and changes their own batches and those an admin granted them (``BatchGrant``);
an admin sees and changes every batch and manages requesters. A worker is seen by a requester when they wrote
a turn in a batch that requester sees, and only with what they did there (their turns, ratings, bonuses and
quality decisions in those batches); the worker's status is shown as it is, since it is one status.

Blocking is not a change to one batch: a blocked worker takes no turn of any batch, and the crowd platforms
block platform-wide (a Prolific block-list group applies to every study of the workspace, an MTurk block to
every HIT of the account). So a requester who is not an admin may block or unblock a worker only when every
batch the worker has written in is one they may see; otherwise an admin decides. Building the review queue and
managing requesters are an admin's.

Every dashboard view, its JSON and its actions ask through these functions. A thing the requester may not see
is answered as if it did not exist (``NotFound``, a 404); a change to something they see but may not change is
``Forbidden`` (a 403). The CLI runs as the ``OPERATOR``, who may do everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from sqlalchemy import ColumnElement, Select, or_, true
from sqlmodel import Session, col, select

from turkflow.errors import Forbidden, NotFound
from turkflow.models import Batch, BatchGrant, BatchWorker, Bonus, Conversation, Requester, Turn, Worker


@dataclass(frozen=True)
class Access:
    """Whose eyes a dashboard read or change is for: a requester (``requester_id``), an admin, or the operator
    (no requester: the CLI)."""

    requester_id: Optional[int]
    admin: bool

    @classmethod
    def of(cls, requester: Requester) -> "Access":
        return cls(requester_id=requester.id, admin=requester.admin)


OPERATOR = Access(requester_id=None, admin=True)


def batch_ids(access: Access) -> Optional[Select]:
    """The ids of the batches ``access`` may see, as a subquery; None: every batch."""
    if access.admin:
        return None
    granted = select(BatchGrant.batch_id).where(BatchGrant.requester_id == access.requester_id)
    return select(Batch.id).where(or_(Batch.requester_id == access.requester_id, col(Batch.id).in_(granted)))


def of_batches(access: Access, batch_id: Any) -> ColumnElement[bool]:
    """A condition that holds where the column ``batch_id`` names a batch ``access`` may see."""
    ids = batch_ids(access)
    return true() if ids is None else col(batch_id).in_(ids)


def of_conversations(access: Access, conversation_id: Any) -> ColumnElement[bool]:
    """A condition that holds where the column ``conversation_id`` names a conversation of a batch ``access``
    may see (a turn's, on the turn's own table): a lookup of that conversation per row, so a page of a few rows
    costs a few lookups however many conversations the requester's batches hold."""
    ids = batch_ids(access)
    return true() if ids is None else select(Conversation.id).where(
        Conversation.id == conversation_id, col(Conversation.batch_id).in_(ids)).exists()


def of_turns(access: Access, turn_id: Any) -> ColumnElement[bool]:
    """A condition that holds where the column ``turn_id`` (of another table than turn's: a rating's, a
    bonus's) names a turn of a batch ``access`` may see."""
    if access.admin:
        return true()
    return select(Turn.id).where(Turn.id == turn_id, of_conversations(access, Turn.conversation_id)).exists()


def of_workers(access: Access, worker_id: Any) -> ColumnElement[bool]:
    """A condition that holds where the column ``worker_id`` names a worker who wrote a turn in a batch
    ``access`` may see (``BatchWorker``: as many rows as those batches have writers, however long the history)."""
    ids = batch_ids(access)
    return true() if ids is None else col(worker_id).in_(
        select(BatchWorker.worker_id).where(col(BatchWorker.batch_id).in_(ids)))


def batch(session: Session, access: Access, batch_id: int) -> Batch:
    """The batch, if ``access`` may see it; otherwise it does not exist."""
    found = session.get(Batch, batch_id)
    if found is None or not _sees(session, access, found.id):
        raise NotFound(f"batch {batch_id} does not exist")
    return found


def conversation(session: Session, access: Access, conversation_id: int) -> Conversation:
    found = session.get(Conversation, conversation_id)
    if found is None or not _sees(session, access, found.batch_id):
        raise NotFound(f"conversation {conversation_id} does not exist")
    return found


def turn_batch_id(session: Session, turn_id: int) -> int:
    return session.exec(select(Conversation.batch_id).join(Turn, Turn.conversation_id == Conversation.id)
                        .where(Turn.id == turn_id)).one()


def bonus(session: Session, access: Access, bonus_id: int) -> Bonus:
    found = session.get(Bonus, bonus_id)
    if found is None or not _sees(session, access, turn_batch_id(session, found.turn_id)):
        raise NotFound(f"no bonus {bonus_id}")
    return found


def worker(session: Session, access: Access, worker_id: int) -> Worker:
    found = session.get(Worker, worker_id)
    if found is None or (not access.admin and session.exec(
            select(Worker.id).where(Worker.id == worker_id, of_workers(access, Worker.id))).first() is None):
        raise NotFound(f"worker {worker_id} does not exist")
    return found


def may_change_status(session: Session, access: Access, worker_id: int) -> bool:
    """Whether ``access`` may block or unblock the worker: an admin may; a requester only when every batch the
    worker wrote in is one they may see, since a block keeps the worker out of every batch."""
    if access.admin:
        return True
    elsewhere = select(BatchWorker.batch_id).where(BatchWorker.worker_id == worker_id,
                                                    ~of_batches(access, BatchWorker.batch_id))
    return session.exec(elsewhere.limit(1)).first() is None


def check_change_status(session: Session, access: Access, worker: Worker) -> None:
    if not may_change_status(session, access, worker.id):
        raise Forbidden(f"{worker.name or worker.external_id} also wrote turns in batches you cannot see, and a "
                        "block keeps a worker out of every batch (and, on Prolific and MTurk, of every study "
                        "or HIT): an admin decides")


def check_admin(access: Access, what: str) -> None:
    """Refuse what only an admin may do (``what``: "manage requesters")."""
    if not access.admin:
        raise Forbidden(f"only an admin may {what}")


def _sees(session: Session, access: Access, batch_id: int) -> bool:
    return access.admin or session.exec(
        select(Batch.id).where(Batch.id == batch_id, of_batches(access, Batch.id))).first() is not None
