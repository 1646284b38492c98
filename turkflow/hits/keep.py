"""Keeping people: whom a conversation's next turn of a role goes to.

One HIT per turn lets whoever comes first write each turn, so a dialog of 30 turns can have ten users; STAR,
Frames and MEEP were collected with one user and one wizard per dialog. A batch says how strongly it keeps
people (``Batch.keep``, stored with it as launched; its protocol's ``keeps`` by default):

- ``any``: whoever comes first (the Wizard of Tasks paper's rule);
- ``session``: the worker who wrote that role's last turn in the conversation, while they are present. A
  worker is present until ``Worker.present_until`` (their last page request plus TURKFLOW_PRESENCE_SECONDS; the
  page they wait on asks more often than that; the moment they left, or their Prolific session ended) or while
  they hold a turn. So a turn of theirs answered by the other role is offered to them first, and when they
  leave, time out or are blocked it goes to anyone: nothing waits on someone who left;
- ``window`` (``--keep SECONDS``): that worker, for SECONDS after the turn opens, present or not (the local
  queue only).

The opening marks the HIT (``Hit.reserved_for_id``, and ``reserved_until`` for a window: columns compared with the
clock, so a reservation ends by itself), and every way a worker gets a turn (the local queue, a Prolific study
link) leaves out the turns ``withheld`` from them and offers those ``kept_for`` them first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Optional

from sqlalchemy import and_, bindparam, case, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from turkflow.errors import Conflict, InvalidInput
from turkflow.models import Assignment, AssignmentStatus, Hit, HitStatus, KeepRule, Worker, WorkerStatus
from turkflow.protocols.questions import get_protocol

LOCAL, PROLIFIC = "local", "prolific"


@dataclass(frozen=True)
class Keep:
    """A batch's rule, and its window's seconds."""

    rule: KeepRule = KeepRule.any
    seconds: int = 0

    @property
    def keeps(self) -> bool:
        return self.rule != KeepRule.any

    def as_option(self) -> str:
        """As ``--keep`` takes it: any, session or SECONDS."""
        return str(self.seconds) if self.rule == KeepRule.window else self.rule.value

    def described(self) -> str:
        """What the rule does, in a line (``batch launch``, ``batch status``, the batch page)."""
        if self.rule == KeepRule.session:
            return ("a role's next turn goes first to the worker who wrote that role's last turn, while they are "
                    "present (their session); then to anyone")
        if self.rule == KeepRule.window:
            return (f"a role's next turn is kept {self.seconds} s for the worker who wrote that role's last turn, "
                    "then offered to anyone")
        return "a role's next turn goes to whoever comes first"


def parse(text: str, option: str = "--keep") -> Keep:
    """``any``, ``session`` or SECONDS (a window; 0 is ``any``), refused naming ``option``."""
    value = (text or "").strip().lower()
    if value in (KeepRule.any, KeepRule.session):
        return Keep(KeepRule(value))
    if value.isdigit():
        return Keep(KeepRule.window, int(value)) if int(value) else Keep()
    raise InvalidInput(f"expected any, session or a number of seconds, got {text[:40]!r}", option)


def for_launch(text: Optional[str], protocol: str, provider: str, option: str = "--keep") -> Keep:
    """The rule a batch is launched with: ``text`` (``--keep``, else TURKFLOW_KEEP: ``option`` names the one it
    came from; empty: the protocol's own), refused where the platform cannot keep it. On MTurk whoever accepts a
    HIT writes it; on Prolific our page picks the turn a participant gets, but a participant there is present
    only within their session."""
    keep = parse(text, option) if text else Keep(KeepRule(get_protocol(protocol).keeps))
    if provider == LOCAL or not keep.keeps:
        return keep
    if provider == PROLIFIC and keep.rule == KeepRule.session:
        return keep
    if not text:  # the protocol's default where this platform cannot keep people: whoever comes first
        return Keep()
    where = "a Prolific participant is kept within their session: use --keep session" if provider == PROLIFIC \
        else f"{provider} gives each HIT to whoever accepts it first"
    raise InvalidInput(f"{keep.as_option()} cannot be kept on {provider}: {where}, or --keep any", option)


def of_batch(batch: Any) -> Keep:
    return Keep(KeepRule(batch.keep), batch.keep_seconds)


def reservation(keep: Keep, keep_for: Optional[int], now: datetime) -> dict[str, Any]:
    """The columns a new HIT is kept with for ``keep_for`` (the role's last writer, if they may still work)."""
    if not keep.keeps or keep_for is None:
        return {"reserved_for_id": None, "reserved_until": None}
    until = now + timedelta(seconds=keep.seconds) if keep.rule == KeepRule.window else None
    return {"reserved_for_id": keep_for, "reserved_until": until}


# ---- who may take a kept turn -----------------------------------------------------------------------------------

# A keeper's turn in hand (another HIT than the one judged).
_HELD = aliased(Hit, name="held_hit")


def keeper_holds(hit: Any) -> Any:
    """An EXISTS saying the HIT (``Hit`` or an alias of it) is kept for its keeper at the bound ``now``: they are
    active, and within the window, or (kept for their session) present or writing a turn."""
    writing = (select(Assignment.id).join(_HELD, _HELD.id == Assignment.hit_id)
               .where(Assignment.worker_id == Worker.id, Assignment.status == AssignmentStatus.accepted,
                      _HELD.status == HitStatus.open, col(_HELD.lease_expires_at) > bindparam("now")))
    return select(Worker.id).where(
        Worker.id == hit.reserved_for_id, Worker.status == WorkerStatus.active,
        or_(col(hit.reserved_until) > bindparam("now"),
            and_(col(hit.reserved_until).is_(None),
                 or_(col(Worker.present_until) > bindparam("now"), writing.exists())))).exists()


def open_to(hit: Any) -> Any:
    """The HIT is not withheld from the bound ``worker``: kept for nobody, for them, or for a keeper who may no
    longer take it."""
    return or_(col(hit.reserved_for_id).is_(None), hit.reserved_for_id == bindparam("worker"), ~keeper_holds(hit))


def kept_for(hit: Any) -> Any:
    """The HIT is kept for the bound ``worker`` (to offer it to them first)."""
    return and_(hit.reserved_for_id == bindparam("worker"),
                or_(col(hit.reserved_until).is_(None), col(hit.reserved_until) > bindparam("now")))


def kept_first(hit: Any) -> Any:
    """An ORDER BY term putting the turns kept for the bound ``worker`` first."""
    return case((kept_for(hit), 0), else_=1)


def check_not_withheld(session: Session, hit: Hit, worker_id: int, now: datetime) -> None:
    """Refuse a turn kept for another worker who may still take it, saying until when (a window) or why."""
    if hit.reserved_for_id is None or hit.reserved_for_id == worker_id:
        return
    if not session.execute(select(keeper_holds(Hit)).where(Hit.id == hit.id), {"now": now}).scalar():
        return
    mine = "this turn is kept for the worker who wrote this role's last turn in the conversation"
    if hit.reserved_until is None:
        raise Conflict(f"{mine} while they are here; it goes to anyone once they leave. Pick another one from "
                       "the queue")
    wait = max(1, math.ceil((hit.reserved_until - now).total_seconds()))
    raise Conflict(f"{mine} until {hit.reserved_until:%H:%M:%S} UTC ({wait} s from now); then anyone may take it. "
                   "Pick another one from the queue")


# ---- presence -----------------------------------------------------------------------------------------------


def seen(session: Session, worker: Any, now: datetime, presence_seconds: int) -> None:
    """The worker's page asked for something: present for ``presence_seconds`` more. Written only when that moves
    their presence on by more than a third (pages that ask every few seconds write every ten or so)."""
    until = now + timedelta(seconds=presence_seconds)
    known = worker.present_until
    if known is not None and known >= until - timedelta(seconds=presence_seconds / 3):
        return
    session.execute(update(Worker).where(Worker.id == worker.id, or_(col(Worker.present_until).is_(None),
                                                                     col(Worker.present_until) < until))
                    .values(present_until=until))


def left(session: Session, worker_id: int, now: datetime) -> None:
    """The worker left (closed the page they waited on, or their session ended): present no longer, so their
    conversations' next turns go to anyone (a turn they hold stays theirs until its lease ends)."""
    session.execute(update(Worker).where(Worker.id == worker_id, or_(col(Worker.present_until).is_(None),
                                                                     col(Worker.present_until) > now))
                    .values(present_until=now))
