"""A batch never stalls silently: notice when the turns waiting for a role have nobody left to take them.

The monitor blocks workers one by one; with a strict policy and noisy raters it can block every worker of a
role, and then the queue is simply empty for everyone left. Each sweep (the reconciler runs it) counts, per
running batch and role, the turns waiting and the onboarded workers who could take them. A role whose
turns wait while every such worker is blocked is *noticed*; still so after the grace period, it is
*stalled*: one ``batch_stalled`` event, a banner, a ``stalled:`` line in ``turkflow batch status``. It
clears by itself once a worker of that role can work again (unblocked, newly onboarded) or the batch ends.

Who could take a batch's turns: an onboarded worker of the role *on the batch's platform*. A worker's
platform is that of the batch of their latest turn, the same rule ``review.provider_name`` uses to carry out
their block; a worker without a turn yet counts for local batches only, because MTurk and Prolific create a
worker as they arrive to take a turn while a local worker is invited and onboarded before their first. So a
local-queue worker never hides a stall of a Prolific or MTurk batch (they cannot take its HITs), nor the
other way round, and a student invited and onboarded for a local batch clears its stall at once. (A crowd
worker who arrived but has not submitted a turn yet counts as local until they do; rare, and only for as
long as that.) Workers who never onboarded are left out: they could never take a turn, so they are no
supply lost. A worker without a turn yet whose id names their platform (``prolific:<PID>``, made when a
participant takes an onboarding quiz) counts for that platform's batches instead. The count is one grouped query over the
workers, reading each one's latest turn through the ``(worker_id, id)`` index; it never scans a batch's
turns.

STAR's stages (``turkflow.protocols.star.stages``): a turn of a multi-task dialog is only taken by a worker who
passed stage 2. A role whose multi-task turns wait while no active worker of the role passed stage 2 (its
workers passed stage 1 only, or are blocked) is starved too, even if its single-task turns flow: those
dialogs would wait for ever. Its stall says so (``RoleStall.stage`` 2) and what to do: open the role's
stage-2 onboarding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Optional

from sqlalchemy import case, func
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from turkflow import events
from turkflow.access import Access, of_batches
from turkflow.protocols.star import stages
from turkflow.hits.lifecycle import LOCAL
from turkflow.hits.registry import PLATFORMS
from turkflow.models import (
    Batch,
    BatchStatus,
    Conversation,
    RoleStall,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
)
from turkflow.protocols.questions import PROTOCOLS


@dataclass(frozen=True)
class RoleSupply:
    """Who can take a batch role's waiting turns."""

    role: str
    waiting: int  # open turns of this role in the batch
    workers: int  # onboarded workers of the role on the batch's platform
    eligible: int  # of those, not blocked
    waiting_multi: int = 0  # of the waiting turns, those of STAR's multi-task dialogs
    eligible_multi: int = 0  # of the eligible workers, those who passed STAR's stage 2

    @property
    def blocked(self) -> bool:
        return self.waiting > 0 and self.workers > 0 and self.eligible == 0

    @property
    def starved(self) -> bool:
        return self.blocked or (self.waiting_multi > 0 and self.workers > 0 and self.eligible_multi == 0)

    @property
    def stage(self) -> int:
        """The stage nobody eligible passed: 2 when only the multi-task turns lack a worker, else 1."""
        return stages.SINGLE_TASK if self.blocked or not self.starved else stages.MULTI_TASK

    @property
    def stuck(self) -> int:
        """The waiting turns nobody can take."""
        return self.waiting if self.stage == stages.SINGLE_TASK else self.waiting_multi


def role_supply(session: Session, batch_id: int) -> list[RoleSupply]:
    """Waiting turns and the onboarded workers who could take them, per role (see the module docstring)."""
    multi = stages.multi_task(Conversation.scenario)
    waiting: dict[str, int] = {}
    waiting_multi: dict[str, int] = {}
    for role, is_multi, count in session.exec(
        select(Turn.role, multi, func.count()).join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.open).group_by(Turn.role, multi)
    ).all():
        waiting[role] = waiting.get(role, 0) + count
        if is_multi:
            waiting_multi[role] = waiting_multi.get(role, 0) + count
    batch = session.get(Batch, batch_id)
    for role in batch.agents or {}:  # an agent's turns wait for the agents queue, never for people
        waiting.pop(role, None)
        waiting_multi.pop(role, None)
    provider = batch.provider
    latest = aliased(Turn)
    platform = (  # of the batch of the worker's latest turn
        select(Batch.provider).join(Conversation, Conversation.batch_id == Batch.id)
        .join(latest, latest.conversation_id == Conversation.id)
        .where(latest.worker_id == Worker.id).order_by(col(latest.id).desc()).limit(1)
        .correlate(Worker).scalar_subquery()
    )
    arrived = case(*((col(Worker.external_id).startswith(f"{name}:"), name) for name in PLATFORMS
                     if name != LOCAL), else_=LOCAL)  # a platform that names its workers so
    second = Worker.stage >= stages.MULTI_TASK
    workers: dict[str, int] = {}
    eligible: dict[str, int] = {}
    eligible_multi: dict[str, int] = {}
    for role, status, passed_second, count in session.exec(
        select(Worker.role, Worker.status, second, func.count())
        .where(Worker.onboarded == True, func.coalesce(platform, arrived) == provider)  # noqa: E712
        .group_by(Worker.role, Worker.status, second)
    ).all():
        workers[role] = workers.get(role, 0) + count
        if status == WorkerStatus.active:
            eligible[role] = eligible.get(role, 0) + count
            if passed_second:
                eligible_multi[role] = eligible_multi.get(role, 0) + count
    protocol = PROTOCOLS.get(batch.protocol)  # None: a protocol this version no longer knows
    roles = protocol.roles if protocol is not None else sorted(waiting)
    return [RoleSupply(role=str(role), waiting=waiting.get(role, 0), workers=workers.get(role, 0),
                       eligible=eligible.get(role, 0), waiting_multi=waiting_multi.get(role, 0),
                       eligible_multi=eligible_multi.get(role, 0)) for role in roles]


def describe(role: str, workers: int, waiting: int, stage: int = stages.SINGLE_TASK) -> str:
    """The requester's words for a stall: what happened and what to do."""
    turns = f"{waiting} turns wait" if waiting != 1 else "1 turn waits"
    if stage == stages.MULTI_TASK:
        return (f"no active {role} passed stage 2 (multi-task); {turns} for one in multi-task dialogs; "
                f"open {role} stage 2 (Prolific: `turkflow prolific onboarding --role {role} --stage 2`) or "
                "review the blocked")
    who = f"all {workers} {role}s are blocked" if workers > 1 else f"the only {role} is blocked"
    return f"{who}; {turns} for a {role}; review the queue or change the policy"


@dataclass
class StallChanges:
    stalled: list[RoleStall] = field(default_factory=list)
    cleared: list[RoleStall] = field(default_factory=list)


def sweep(session: Session, now: datetime, after: timedelta) -> StallChanges:
    """Notice, confirm and clear stalls for every batch; safe to run any number of times."""
    changes = StallChanges()
    running = list(session.exec(select(Batch.id).where(Batch.status == BatchStatus.active)))
    open_stalls = {(s.batch_id, s.role): s for s in session.exec(
        select(RoleStall).where(col(RoleStall.cleared_at).is_(None)))}
    for batch_id in running:
        for supply in role_supply(session, batch_id):
            stall = open_stalls.pop((batch_id, supply.role), None)
            if supply.starved:
                _keep(session, batch_id, supply, stall, now, after, changes)
            elif stall is not None:
                _clear(session, stall, now, changes)
    for stall in open_stalls.values():  # batches that ended or paused
        _clear(session, stall, now, changes)
    return changes


def _keep(session: Session, batch_id: int, supply: RoleSupply, stall: Optional[RoleStall], now: datetime,
          after: timedelta, changes: StallChanges) -> None:
    if stall is None:
        stall = RoleStall(batch_id=batch_id, role=supply.role, noticed_at=now)
    stall.workers, stall.waiting, stall.stage = supply.workers, supply.stuck, supply.stage
    if stall.stalled_at is None and now - stall.noticed_at >= after:
        stall.stalled_at = now
        changes.stalled.append(stall)
        events.record(session, "batch_stalled", "system", batch_id=batch_id, role=supply.role,
                      workers=supply.workers, waiting=supply.stuck, stage=supply.stage,
                      message=describe(supply.role, supply.workers, supply.stuck, supply.stage))
    session.add(stall)


def _clear(session: Session, stall: RoleStall, now: datetime, changes: StallChanges) -> None:
    stall.cleared_at = now
    session.add(stall)
    if stall.stalled_at is not None:
        changes.cleared.append(stall)
        events.record(session, "batch_stall_cleared", "system", batch_id=stall.batch_id, role=stall.role,
                      stalled_seconds=round((now - stall.stalled_at).total_seconds()))


def stalls(session: Session, batch_id: int) -> list[RoleStall]:
    """The batch's confirmed, uncleared stalls (what the banner and ``batch status`` show)."""
    return list(session.exec(
        select(RoleStall).where(RoleStall.batch_id == batch_id, col(RoleStall.cleared_at).is_(None),
                                col(RoleStall.stalled_at).is_not(None)).order_by(RoleStall.role)
    ))


def banners(session: Session, access: Access, batch_id: Optional[int] = None) -> list[str]:
    """What the dashboard's red banners say: every confirmed stall (of one batch, or of all batches ``access``
    may see, named)."""
    query = (select(RoleStall, Batch.name).join(Batch, Batch.id == RoleStall.batch_id)
             .where(col(RoleStall.cleared_at).is_(None), col(RoleStall.stalled_at).is_not(None),
                    of_batches(access, RoleStall.batch_id)))
    if batch_id is not None:
        query = query.where(RoleStall.batch_id == batch_id)
    return [(f"Batch {s.batch_id} “{name}” is stalled: " if batch_id is None else "Stalled: ")
            + describe(s.role, s.workers, s.waiting, s.stage)
            for s, name in session.exec(query.order_by(RoleStall.batch_id, RoleStall.role))]


def stalled_roles(session: Session) -> set[str]:
    """Roles stalled in any batch: the daily review puts their workers first."""
    return set(session.exec(
        select(RoleStall.role).where(col(RoleStall.cleared_at).is_(None), col(RoleStall.stalled_at).is_not(None))
    ))
