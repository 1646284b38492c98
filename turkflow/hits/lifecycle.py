"""A turn's life as a HIT: open, publish, take, submit, advance, reconcile.

Every function takes a database session and plain values and leaves the session with exactly the rows
that describe the new state; callers commit. The database enforces the invariants (one open turn per
conversation, one live HIT per turn, one rating per rating turn), so a retried or duplicated call fails on
a constraint instead of creating a second HIT, and the functions turn that failure into "already done".
"""

from __future__ import annotations

import functools
import random
import secrets
from collections import namedtuple
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from sqlalchemy import JSON, and_, bindparam, func, insert, literal, or_, true, union_all, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import aliased
from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel import Session, col, select

from turkflow import events, states
from turkflow.config import default
from turkflow.errors import AlreadySubmitted, Conflict, Forbidden, InvalidInput, NotFound
from turkflow.protocols.star import stages
from turkflow.hits import keep as keeping
from turkflow.hits.money import percent_cents
from turkflow.hits.provider import AGENT, CrowdProvider, Providers
from turkflow.models import (
    Agent,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchStatus,
    BatchWorker,
    Bonus,
    BonusKind,
    Conversation,
    ConversationAgent,
    ConversationStatus,
    Event,
    Hit,
    HitStatus,
    Rating,
    Task,
    Turn,
    TurnStatus,
    Worker,
    WorkerStatus,
    utcnow,
)
from turkflow.protocols.questions import (
    Protocol,
    TurnContext,
    clean_text,
    document_items,
    document_text,
    PROTOCOLS,
    get_protocol,
    validate_answers,
)
from turkflow.writing import writing_signals


LOCAL = "local"  # the provider whose HITs are leased from /queue


# ---- launching ---------------------------------------------------------------------------------------


def launch_batch(
    session: Session,
    tasks: Sequence[Task],
    conversations: int,
    *,
    name: str,
    provider: str = "local",
    reward_cents: int = default("reward_cents"),
    max_turns: int = default("max_turns"),
    budget_cents: Optional[int] = None,
    live: bool = False,
    quality: Optional[dict[str, Any]] = None,
    protocol: str = "wizard_of_tasks",
    scenarios: Optional[Sequence[tuple[Task, dict[str, Any]]]] = None,
    keep: Optional[keeping.Keep] = None,
    agents: Optional[dict[str, list[Agent]]] = None,
    on_agent_failure: str = "end",
    seed: int = 0,
    pairwise: bool = False,
    requester_id: Optional[int] = None,
) -> tuple[Batch, list[Hit]]:
    """Create a batch and its conversations, each with its first turn opened (HITs still to publish).

    The reward, the turn limit and the ``quality`` columns left out take the settings' defaults
    (``turkflow.config``); the edge that read ``TURKFLOW_*`` passes the values it read.

    Tasks are assigned round-robin, so N conversations over M tasks cover every task evenly, unless
    ``scenarios`` gives each conversation its task and scenario (STAR). A batch follows one protocol:
    every task must be written for it. ``keep``: whom each next turn of a role goes to (``turkflow.hits.keep``;
    None: the protocol's own rule, or whoever comes first where the platform cannot keep people).

    ``agents``: the roles agents play, each with its agents; every conversation's agent of a role is drawn
    here (``draw_agents``: seeded by ``seed``, balanced per task) and kept in ``ConversationAgent``, and the
    turns of that role are the agents queue's (``hits.agent``), never a platform's. ``on_agent_failure``:
    what an agent's turn out of attempts does, ``end`` the conversation or open the turn for ``people``.
    ``pairwise``: each turn of a role two or more agents play is answered by two of them, and the person who
    continues picks one (``turkflow.agents.pairwise``).
    ``requester_id``: the requester the batch belongs to (``turkflow.access``); None, the operator's.
    """
    if not tasks:
        raise ValueError("no task documents loaded; run `turkflow tasks load FILE` first")
    if conversations < 1:
        raise ValueError("conversations must be at least 1")
    if max_turns < 2:
        raise ValueError("max-turns must be at least 2")
    if reward_cents < 1:
        raise ValueError("reward must be at least $0.01")
    if budget_cents is not None and conversations * reward_cents > budget_cents:
        raise ValueError(f"a budget of {budget_cents / 100:.2f} USD cannot pay the first turns of {conversations} "
                         f"conversations at {reward_cents / 100:.2f} USD; launch at most "
                         f"{budget_cents // reward_cents} or raise the budget")
    get_protocol(protocol)
    other = next((t for t in tasks if t.protocol != protocol), None)
    if other is not None:
        raise ValueError(f"task {other.key!r} is for {other.protocol}, not {protocol}; "
                         "a batch follows one protocol")
    if scenarios is not None and len(scenarios) != conversations:
        raise ValueError("give one scenario per conversation")
    keep = keeping.for_launch(keep.as_option() if keep is not None else None, protocol, provider)
    agents = agents or {}
    unknown = sorted(set(agents) - set(get_protocol(protocol).roles))
    if unknown:
        raise ValueError(f"{protocol} has no role {unknown[0]!r}; its roles: {', '.join(get_protocol(protocol).roles)}")
    if any(not playing for playing in agents.values()):
        raise ValueError("give at least one agent for each role an agent plays")
    if on_agent_failure not in ("end", "people"):
        raise ValueError("on-agent-failure is end or people")
    if pairwise and not pairwise_roles(protocol, agents):
        if any(form.actions for form in get_protocol(protocol).roles.values()):
            raise ValueError(f"pairwise compares two agents' replies written in one answer; a {protocol} turn takes "
                             "in-turn actions (Wizard of Tasks turns only)")
        raise ValueError("pairwise compares the replies of two agents of one role turn by turn: give a role two or "
                         "more agents")
    if pairwise and provider != LOCAL:
        raise ValueError("pairwise batches run on the local queue")
    batch = Batch(name=name, provider=provider, reward_cents=reward_cents, max_turns=max_turns,
                  budget_cents=budget_cents, live=live, protocol=protocol, keep=keep.rule, keep_seconds=keep.seconds,
                  agents={role: [agent.name for agent in playing] for role, playing in agents.items()},
                  on_agent_failure=on_agent_failure, pairwise=pairwise, requester_id=requester_id,
                  **(quality or {}))
    session.add(batch)
    session.flush()
    events.record(session, "batch_launched", "system", batch_id=batch.id, conversations=conversations,
                  provider=provider, reward_cents=reward_cents, max_turns=max_turns,
                  **({"agents": batch.agents, "agent_seed": seed, "on_agent_failure": on_agent_failure,
                      "pairwise": pairwise} if agents else {}))
    chosen = [scenarios[n] if scenarios is not None else (tasks[n % len(tasks)], {}) for n in range(conversations)]
    players = {role: draw_agents([task.key for task, _ in chosen], [agent.id for agent in playing], seed, role)
               for role, playing in agents.items()}
    hits = []
    for n, (task, scenario) in enumerate(chosen):
        conversation = Conversation(batch_id=batch.id, task_id=task.id, scenario=scenario)
        session.add(conversation)
        session.flush()
        for role, drawn in players.items():
            session.add(ConversationAgent(conversation_id=conversation.id, role=role, agent_id=drawn[n]))
        opened = _open_turn(session, batch, conversation.id, index=0, role=get_protocol(protocol).first_role)
        session.expire(conversation, ["updated_at"])  # the opening's UPDATE set it
        hits.append(session.get(Hit, opened.hit_id))
    return batch, hits


def pairwise_roles(protocol: str, agents: Mapping[str, Sequence[Any]]) -> list[str]:
    """The roles a pairwise batch of ``protocol`` compares turn by turn: those two or more agents play. A
    protocol whose turns take in-turn actions has none: its replies are not one answer each."""
    if any(form.actions for form in get_protocol(protocol).roles.values()):
        return []
    return sorted(role for role, playing in agents.items() if len(playing) >= 2)


def draw_agents(task_keys: Sequence[str], agent_ids: Sequence[int], seed: int, role: str) -> list[int]:
    """Each conversation's agent (conversations given by their tasks' keys, in order), balanced within each task
    (no task favours one agent) and over the batch (each task's conversations go first to the agents with the
    fewest so far), ties and the order within a task drawn from ``seed`` and the role, so the same launch draws
    the same agents."""
    rng = random.Random(f"{seed}:{role}")
    by_task: dict[str, list[int]] = {}
    for n, key in enumerate(task_keys):
        by_task.setdefault(key, []).append(n)
    drawn, counts = [0] * len(task_keys), {agent_id: 0 for agent_id in agent_ids}
    for key, positions in by_task.items():
        chosen: list[int] = []
        while len(chosen) < len(positions):
            ties = {agent_id: rng.random() for agent_id in agent_ids}
            for agent_id in sorted(agent_ids, key=lambda a: (counts[a], ties[a]))[:len(positions) - len(chosen)]:
                chosen.append(agent_id)
                counts[agent_id] += 1
        rng.shuffle(chosen)
        for position, agent_id in zip(positions, chosen):
            drawn[position] = agent_id
    return drawn


# The opening runs on every submitted turn: its statements are built once, on the tables, and write plain
# values (no ORM objects; a flush of a Turn and a Hit cost more than the INSERTs themselves).
_TURNS, _HITS, _CONVERSATIONS, _BATCHES = Turn.__table__, Hit.__table__, Conversation.__table__, Batch.__table__
_WORKERS, _EVENTS = Worker.__table__, Event.__table__
# One open turn per conversation and one turn per position: a turn another process opened first is not
# opened again (no row returned), without the savepoint an IntegrityError would need on PostgreSQL.
_NEW_TURN = {name: dialect.insert(_TURNS).on_conflict_do_nothing().returning(_TURNS.c.id)
             for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))}
_NEW_HIT = insert(_HITS).returning(*_HITS.c)  # the new HIT as a row, for its events and its publishing
# The columns a new HIT takes from the model's defaults (``created_at``, the only one made per row, is given).
_HIT_DEFAULTS = {name: field.default for name, field in Hit.model_fields.items()
                 if name not in ("id", "created_at") and not field.is_required()}
_TOUCHED = (update(_CONVERSATIONS).where(_CONVERSATIONS.c.id == bindparam("conversation"))
            .values(updated_at=bindparam("now")))
_PUBLISHED = states.update_to(Hit, HitStatus.open).where(Hit.id == bindparam("hit")).values(
    external_id=bindparam("external"))
_EVENT = insert(_EVENTS)


def hit_provider(batch: Any, role: str) -> str:
    """Where a turn of ``role`` goes: the agents queue when an agent plays the role, else the batch's platform."""
    return AGENT if role in (batch.agents or {}) else batch.provider


class Opened(NamedTuple):
    """A turn ``open_next_turn`` opened: its HIT, the HIT's provider (``AGENT`` for an agent's turn), whether it
    is published already, and the turn."""

    hit_id: int
    provider: str
    published: bool
    turn_id: int


def _open_turn(session: Session, batch: Batch, conversation_id: int, index: int, role: str,
               keep_for: Optional[int] = None, providers: Optional[Providers] = None) -> Optional[Opened]:
    """Open a turn and its HIT; returns the HIT's id, or None when the conversation has an open turn or this
    one already (another worker process opened it first).

    ``keep_for``: a worker who may take the turn (active), for whom the HIT is kept as the batch keeps people
    (``turkflow.hits.keep``: while they are present, or for a window, columns compared with the clock, so the
    turn goes to anyone once they leave or the window ends). ``providers``: with them, a HIT whose provider calls no
    platform (the local queue, the agents') is published in this transaction (``publish_hit`` does it for the
    others, after commit)."""
    session.flush()  # what the session holds is written first, as the ORM's flush would order it
    connection = session.connection()
    now = utcnow()
    turn_id = connection.execute(_NEW_TURN[connection.dialect.name], {
        "conversation_id": conversation_id, "index": index, "role": role, "status": TurnStatus.open,
        "worker_id": None, "text": None, "label": None, "answers": {}, "flags": [], "signals": {},
        "opened_at": now, "submitted_at": None, "reviewed_at": None}).scalar()
    if turn_id is None:
        return None
    provider = hit_provider(batch, role)
    kept = keeping.reservation(keeping.of_batch(batch), keep_for if provider != AGENT else None, now)
    hit = connection.execute(_NEW_HIT, {
        **_HIT_DEFAULTS, "turn_id": turn_id, "role": role, "provider": provider, "created_at": now, **kept}).one()
    connection.execute(_TOUCHED, {"conversation": conversation_id, "now": now})
    ids = {"batch_id": batch.id, "conversation_id": conversation_id, "turn_id": turn_id, "worker_id": None}
    written = [{"at": now, "kind": "turn_opened", "actor": "system", **ids, "data": {
        "index": index, "role": role, "hit_id": hit.id,
        **({"kept_for": hit.reserved_for_id} if hit.reserved_for_id is not None else {})}}]
    publisher = providers.get(provider) if providers is not None else None
    published = publisher is not None and not publisher.calls_platform
    if published:
        written.append(_publish(session, publisher, hit, batch, conversation_id))  # the HIT was just written
    connection.execute(_EVENT, written)
    return Opened(hit.id, provider, published, turn_id)


def _publish(session: Session, provider: CrowdProvider, hit: Hit, batch: Batch,
             conversation_id: int) -> Optional[dict[str, Any]]:
    """Tell the provider about a pending HIT and mark it open (one compare-and-set UPDATE): the
    ``hit_published`` event to write, or None when another process published it first. The opening
    (``_open_turn``, for a provider that calls no platform) and ``publish_hit`` (for the others, and the
    reconciler) both publish through here; the opening passes the HIT and the batch as the plain rows it
    wrote and read (it builds no objects), which such a provider only reads."""
    external_id = provider.publish_turn(session, hit, batch)
    if session.connection().execute(_PUBLISHED, {"hit": hit.id, "external": external_id}).rowcount != 1:
        return None
    return {"at": utcnow(), "kind": "hit_published", "actor": "provider", "batch_id": batch.id,
            "conversation_id": conversation_id, "turn_id": hit.turn_id, "worker_id": None,
            "data": {"hit_id": hit.id, "external_id": external_id}}


_PUBLISHING = (
    select(Hit, Turn, Conversation, Batch).join(Turn, Turn.id == Hit.turn_id)
    .join(Conversation, Conversation.id == Turn.conversation_id).join(Batch, Batch.id == Conversation.batch_id)
    .where(Hit.id == bindparam("hit"))
)


def publish_hit(session: Session, provider: CrowdProvider, hit_id: int) -> Hit:
    """Tell the crowd platform about a pending HIT; a second call for a published HIT does nothing."""
    row = session.execute(_PUBLISHING, {"hit": hit_id}).first()
    if row is None:
        raise NotFound(f"HIT {hit_id} does not exist")
    hit, turn, conversation, batch = row
    if hit.status != HitStatus.pending:
        return hit
    session.flush()  # what the session holds is written first, as the ORM's flush would order it
    published = _publish(session, provider, hit, batch, conversation.id)
    if published is None:  # another process published it meanwhile
        session.refresh(hit)
        return hit
    set_committed_value(hit, "external_id", published["data"]["external_id"])
    set_committed_value(hit, "status", HitStatus.open)
    session.connection().execute(_EVENT, [published])
    return hit


# ---- advancing ---------------------------------------------------------------------------------------


_BATCH_COLUMNS = tuple(column.name for column in _BATCHES.c)
_LAST_TURNS = (  # a conversation's last two turns (the one before the last may close it, or its writer keep the
    # next), with whether that writer may still work, and the conversation's and its batch's columns
    select(_TURNS.c.index, _TURNS.c.role, _TURNS.c.status, _TURNS.c.label, _TURNS.c.worker_id,
           _TURNS.c.conversation_id, _WORKERS.c.status.label("writer_status"),
           _CONVERSATIONS.c.status.label("conversation_status"),
           *(_BATCHES.c[name].label(f"batch_{name}") for name in _BATCH_COLUMNS))
    .select_from(_TURNS.join(_CONVERSATIONS, _CONVERSATIONS.c.id == _TURNS.c.conversation_id)
                 .join(_BATCHES, _BATCHES.c.id == _CONVERSATIONS.c.batch_id)
                 .outerjoin(_WORKERS, _WORKERS.c.id == _TURNS.c.worker_id))
    .order_by(_TURNS.c.index.desc()).limit(2)
)
_LAST_TURNS_OF = _LAST_TURNS.where(_TURNS.c.conversation_id == bindparam("conversation"))
_LAST_TURNS_AFTER = _LAST_TURNS.where(  # the same, found from a submitted turn: one read in all
    _TURNS.c.conversation_id == select(_TURNS.c.conversation_id).where(_TURNS.c.id == bindparam("turn"))
    .scalar_subquery())
# A conversation's batch as the opening read it: its columns, not a loaded object (building a ``Batch`` cost a
# fifth of an opening).
_BatchRow = namedtuple("_BatchRow", _BATCH_COLUMNS)




def open_next_turn(session: Session, conversation_id: int, providers: Optional[Providers] = None
                   ) -> Optional[Opened]:
    """Open the next turn of a conversation whose last turn is submitted, or close the conversation.

    Returns the new HIT, or None when there is nothing to open: the conversation is over, its batch is paused
    or over budget, or its next turn is already open (a duplicate call, a redelivered message). With
    ``providers``, a HIT whose platform is called by no one (the local queue) is published in this
    transaction. Runs on every submitted turn: one read of plain rows, then the writes (``_open_turn``).
    """
    rows = _core(session, _LAST_TURNS_OF, {"conversation": conversation_id}).all()
    if not rows:
        if session.get(Conversation, conversation_id) is None:
            raise NotFound(f"conversation {conversation_id} does not exist")
        return None  # no turn at all: nothing follows
    return _open_following(session, rows, providers)


def open_turn_after(session: Session, turn_id: int, providers: Optional[Providers] = None) -> Optional[Opened]:
    """``open_next_turn`` for the conversation of a submitted turn (the Celery task knows the turn, not its
    conversation), with the conversation found in the same read."""
    rows = _core(session, _LAST_TURNS_AFTER, {"turn": turn_id}).all()
    if not rows:
        raise NotFound(f"turn {turn_id} does not exist")
    return _open_following(session, rows, providers)


def _open_following(session: Session, rows: Sequence[Any], providers: Optional[Providers]) -> Optional[Opened]:
    """Open the turn after ``rows`` (a conversation's last two turns, from ``_LAST_TURNS``, the last first)."""
    conversation_id = rows[0].conversation_id
    last = rows[0]
    before = rows[1] if len(rows) > 1 else None
    if last.conversation_status != ConversationStatus.active or last.batch_status != BatchStatus.active:
        return None
    if last.status != TurnStatus.submitted:
        return None
    batch = _BatchRow._make(getattr(last, f"batch_{name}") for name in _BATCH_COLUMNS)  # as read, not loaded
    protocol = get_protocol(batch.protocol)
    end_reason = _end_reason(session, protocol, batch.max_turns, last, before)
    if end_reason:
        _complete(session, session.get(Batch, batch.id), session.get(Conversation, conversation_id), end_reason)
        return None
    if not _within_budget(session, batch):
        paused = session.get(Batch, batch.id)
        states.move(paused, BatchStatus.paused)
        session.add(paused)
        events.record(session, "batch_paused", "system", batch_id=batch.id, reason="budget reached")
        return None
    role = protocol.next_role(last.role)
    keep_for = (before.worker_id if before is not None and before.role == role
                and before.writer_status == WorkerStatus.active else None)
    return _open_turn(session, batch, conversation_id, last.index + 1, role, keep_for=keep_for, providers=providers)


def advance_conversation(session: Session, conversation_id: int) -> Optional[Hit]:
    """``open_next_turn`` answering with the new HIT (still to publish), for callers that go on with it."""
    opened = open_next_turn(session, conversation_id)
    return session.get(Hit, opened.hit_id) if opened is not None else None


def _end_reason(session: Session, protocol: Protocol, max_turns: int, last: Any,
                before: Optional[Any] = None) -> Optional[str]:
    """Why the conversation ends with ``last`` (a turn, or a row with its ``role``, ``label``, ``index`` and
    ``conversation_id``), or None; ``before``: the turn before it, if already read."""
    closes = last.role == protocol.first_role and last.label == protocol.closing_label
    if not protocol.closing_reply and closes:
        return protocol.closing_reason
    if last.role != protocol.first_role:
        reason = dict(protocol.other_closings).get(last.label)
        if reason:
            return reason
    if protocol.closing_reply and last.role != protocol.first_role and last.index > 0:
        if before is None or before.index != last.index - 1:
            before = session.exec(
                select(Turn).where(Turn.conversation_id == last.conversation_id, Turn.index == last.index - 1)
            ).one()
        if before.label == protocol.closing_label:
            return protocol.closing_reason
    if last.index + 1 >= max_turns:
        return "max_turns"
    return None


def ends_conversation(session: Session, turn: Turn) -> bool:
    """Whether this submitted turn is its conversation's last: known at once, so the worker who wrote it
    hears so before the Celery task that closes the conversation has run."""
    conversation = session.get(Conversation, turn.conversation_id)
    batch = session.get(Batch, conversation.batch_id)
    return turn.status == TurnStatus.submitted and _end_reason(session, get_protocol(batch.protocol),
                                                                batch.max_turns, turn) is not None


def _complete(session: Session, batch: Batch, conversation: Conversation, reason: str) -> None:
    states.move(conversation, ConversationStatus.completed)
    conversation.end_reason = reason
    conversation.completed_at = conversation.updated_at = utcnow()
    session.add(conversation)
    events.record(session, "conversation_completed", "system", batch_id=batch.id,
                  conversation_id=conversation.id, reason=reason, turns=conversation.turn_count)
    remaining = session.exec(
        select(func.count()).select_from(Conversation)
        .where(Conversation.batch_id == batch.id, Conversation.status == ConversationStatus.active)
    ).one()
    if remaining == 0:
        states.move(batch, BatchStatus.completed)
        session.add(batch)
        events.record(session, "batch_completed", "system", batch_id=batch.id)


_COUNTED_HITS = (
    select(func.count()).select_from(Hit).join(Turn, Turn.id == Hit.turn_id)
    .join(Conversation, Conversation.id == Turn.conversation_id)
    .where(Conversation.batch_id == bindparam("batch"), Hit.status != HitStatus.expired, Hit.provider != AGENT)
)
_BONUSES = (
    select(func.coalesce(func.sum(Bonus.amount_cents), 0)).select_from(Bonus)
    .join(Turn, Turn.id == Bonus.turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
    .where(Conversation.batch_id == bindparam("batch"), Bonus.kind != BonusKind.reward)
)
_COMMITTED = (  # read on every opening of a batch with a budget: one statement, built once
    select(_BATCHES.c.reward_cents, _BATCHES.c.fee_percent, _COUNTED_HITS.scalar_subquery().label("hits"),
           _BONUSES.scalar_subquery().label("bonuses"))
    .where(_BATCHES.c.id == bindparam("batch"))
)


def committed_cents(session: Session, batch_id: int, next_reward_cents: int = 0) -> int:
    """Rewards of every HIT published or submitted in the batch (not expired ones, not an agent's) plus bonuses recorded,
    and the platform fee the batch counts in its budget (Prolific's, ``Batch.fee_percent``, with its VAT),
    rounded once on the total; ``next_reward_cents`` counts a turn about to open with them. A reward paid
    as a bonus (``BonusKind.reward``) is its HIT's reward, already counted with the HIT."""
    batch = _core(session, _COMMITTED, {"batch": batch_id}).one()
    spent = batch.hits * batch.reward_cents + batch.bonuses + next_reward_cents
    return spent + percent_cents(spent, batch.fee_percent)


def _within_budget(session: Session, batch: Batch) -> bool:
    if batch.budget_cents is None:
        return True
    return committed_cents(session, batch.id, next_reward_cents=batch.reward_cents) <= batch.budget_cents


# ---- the local queue: taking a turn -----------------------------------------------------------------


def open_hits_for(session: Session, worker: Worker, now: Optional[datetime] = None, limit: int = 50) -> list[Hit]:
    """Local HITs a worker may take now: their role, published, not leased by someone else, batch active, not
    kept for another worker (``turkflow.hits.keep``); those kept for this worker come first.

    HITs of other providers are taken on their own platform, never from the local queue.
    """
    statement = (_takeable(select(Hit), stages.sees_multi_task(worker)).order_by(*_KEPT_FIRST)
                 .limit(bindparam("limit")))
    return list(session.execute(statement, _queue_params(worker, now, limit)).scalars())


def _takeable(query: Any, multi_task_passed: bool) -> Any:
    """Narrow a query over ``Hit`` to the local HITs a worker of role ``role`` may take at ``now`` (bound
    parameters): STAR turns only of conversations whose qualification stage the worker passed
    (``turkflow.protocols.star.stages``)."""
    return stages.unlocked_at(
        query.join(Turn, Turn.id == Hit.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .join(Batch, Batch.id == Conversation.batch_id)
        .where(
            Hit.status == HitStatus.open,
            Hit.role == bindparam("role"),
            Hit.provider == LOCAL,
            Batch.status == BatchStatus.active,
            or_(col(Hit.lease_expires_at).is_(None), col(Hit.lease_expires_at) < bindparam("now")),
            keeping.open_to(Hit),
            or_(col(Batch.protocol).not_in(DISTINCT_WRITERS),
                ~_task_taken(Conversation.batch_id, Conversation.task_id).exists()),
        ),
        multi_task_passed,
    )


# Protocols whose workers write at most one conversation of a task in a batch (annotation replicas).
DISTINCT_WRITERS = tuple(p.name for p in PROTOCOLS.values() if p.distinct_writers)


def _task_taken(batch_id: Any, task_id: Any) -> Any:
    """The worker's (bound ``worker``) assignments, kept or held, in conversations of this batch and task."""
    hit, turn, conversation = aliased(Hit), aliased(Turn), aliased(Conversation)
    return (select(Assignment.id).join(hit, hit.id == Assignment.hit_id).join(turn, turn.id == hit.turn_id)
            .join(conversation, conversation.id == turn.conversation_id)
            .where(Assignment.worker_id == bindparam("worker"), Assignment.status != AssignmentStatus.abandoned,
                   conversation.batch_id == batch_id, conversation.task_id == task_id))


_TASK_TAKEN = _task_taken(bindparam("batch"), bindparam("task")).limit(1)


# Turns kept for the worker listing them first, then the oldest.
_KEPT_FIRST = (keeping.kept_first(Hit), Hit.id)


def _queue_params(worker: Worker, now: Optional[datetime], limit: int) -> dict[str, Any]:
    return {"role": worker.role, "worker": worker.id, "now": now or utcnow(), "limit": limit}


@functools.cache  # built once per process, when a queue is first listed, not on every import
def _queue_statement(multi_task_passed: bool, lateral: bool) -> Any:
    """The turns kept for the worker, then the oldest takeable turns (kept ones among them too: the caller
    drops those twice), each part cut at the limit in ``Hit.id`` order, so the database reads about
    ``limit`` open HITs along ``ix_hit_queue`` (status, role, id) and stops. Sorting every open HIT of the
    role after joining each to its turn, conversation, task and previous turn was half of PostgreSQL's CPU
    per turn, and PostgreSQL's plan for it (generic, as prepared statements are) read every turn of every
    conversation, growing with the collection (``bench capacity``).

    ``lateral`` (PostgreSQL): each HIT of the ordered scan not leased is judged by the whole takeable query
    for that one HIT, a LATERAL subquery the planner cannot turn into a join that starts elsewhere. SQLite
    has no LATERAL; its planner walks the index in order by itself."""
    previous = aliased(Turn)
    columns = (Turn.conversation_id, Turn.index, Task.title, previous.text.label("last_text"),
               previous.role.label("last_role"))

    def takeable(query: Any) -> Any:
        return (_takeable(query, multi_task_passed).join(Task, Task.id == Conversation.task_id)
                .outerjoin(previous, and_(previous.conversation_id == Turn.conversation_id,
                                          previous.index == Turn.index - 1)))

    def part(kept: int) -> Any:
        hit = aliased(Hit) if lateral else Hit
        only = (keeping.kept_for(hit),) if kept == 0 else ()
        if lateral:
            judged = takeable(select(*columns).select_from(Hit)).where(Hit.id == hit.id).limit(1).lateral()
            query = (select(hit.id, *judged.c, literal(kept).label("kept")).select_from(hit).join(judged, true())
                     .where(hit.status == HitStatus.open, hit.role == bindparam("role"), hit.provider == LOCAL,
                            or_(col(hit.lease_expires_at).is_(None), col(hit.lease_expires_at) < bindparam("now"))))
        else:
            query = takeable(select(hit.id, *columns, literal(kept).label("kept")))
        return query.where(*only).order_by(hit.id).limit(bindparam("limit")).subquery()

    both = union_all(select(part(0)), select(part(1))).subquery()
    return select(both).order_by(both.c.kept, both.c.id)


def queue_entries(session: Session, worker: Worker, now: Optional[datetime] = None,
                  limit: int = 50) -> list[dict[str, Any]]:
    """The queue's rows: each HIT ``open_hits_for`` offers, with its task title and the message it answers,
    in the worker's own order (``_spread``).

    One query for the whole list, built once: workers reload the queue after every submission.
    """
    statement = _queue_statement(stages.sees_multi_task(worker), lateral=session.get_bind().dialect.name == "postgresql")
    entries, kept, listed = [], 0, set()
    for hit_id, conversation_id, index, title, last_message, last_role, others in _core(
            session, statement, _queue_params(worker, now, limit)):
        if hit_id in listed:  # kept for this worker, and among the oldest too
            continue
        listed.add(hit_id)
        kept += not others
        entries.append({"hit_id": hit_id, "conversation_id": conversation_id, "turn_index": index, "title": title,
                        "last_message": last_message, "last_role": last_role})
    entries = entries[:limit]
    return entries[:kept] + _spread(entries[kept:], worker.id)


_SPREAD = 10  # how many of the oldest open turns each worker's queue starts with, in an order of their own


def _spread(oldest_first: list[Any], worker_id: int) -> list[Any]:
    """The oldest ``_SPREAD`` turns turned round by the worker's id, then the rest oldest first. When every
    queue listed the same turn first, workers who took the first turn of a page read a little earlier all
    went for the one turn (one got it; the others a 409 and a reload); now they start on different turns,
    and the oldest stay on top of every queue, so none waits behind newer work."""
    window = min(_SPREAD, len(oldest_first))
    if window < 2:
        return oldest_first
    start = worker_id % window
    return oldest_first[start:window] + oldest_first[:start] + oldest_first[window:]


def check_can_work(worker: Worker, role: str) -> None:
    if worker.status != WorkerStatus.active:
        raise Forbidden("you are blocked from taking turns; the requester reviews blocks daily")
    if worker.role != role:
        raise Forbidden(f"this turn is for a {role}; you are registered as a {worker.role}")
    if not worker.onboarded:
        raise Forbidden(f"take the {worker.role} onboarding quiz first (/onboarding)")


# Statements the hot path (take, the turn page, submit, open the next turn) runs on every turn are built
# once with bound parameters: building one costs several times what running it on an indexed table does
# (``python -m bench floor``). Their UPDATEs leave the session's objects alone (``synchronize_session``
# off); the functions set what they changed on the objects they hold.
_QUICK = {"synchronize_session": False}


def _core(session: Session, statement: Any, params: dict[str, Any]) -> Any:
    """Run a hot-path statement that reads or writes columns, not objects, as Core on the session's
    connection, after flushing what the session holds (as ``session.execute`` would): the ORM's handling of
    such a statement costs two to three times what SQLite takes to run it (``python -m bench floor``)."""
    session.flush()
    return session.connection().execute(statement, params)

_TAKING = (
    select(Hit, Turn, Conversation, Batch, Task, Assignment)
    .join(Turn, Turn.id == Hit.turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
    .join(Batch, Batch.id == Conversation.batch_id).join(Task, Task.id == Conversation.task_id)
    .outerjoin(Assignment, and_(Assignment.hit_id == Hit.id, Assignment.worker_id == bindparam("worker"),
                                Assignment.status == AssignmentStatus.accepted))
    .where(Hit.id == bindparam("hit")).limit(1)
)
_LEASE = (
    update(Hit).where(Hit.id == bindparam("hit"), Hit.status == HitStatus.open,
                      or_(col(Hit.lease_expires_at).is_(None), col(Hit.lease_expires_at) < bindparam("now")))
    .values(lease_expires_at=bindparam("until")).execution_options(**_QUICK)
)


def take_turn(session: Session, worker: Worker, hit_id: int, lease_seconds: int,
              now: Optional[datetime] = None) -> Assignment:
    """Lease a HIT to a worker. Taking a turn you already hold returns your lease (double clicks)."""
    return take(session, worker, hit_id, lease_seconds, now).assignment


def take(session: Session, worker: Worker, hit_id: int, lease_seconds: int,
         now: Optional[datetime] = None, max_held: Optional[int] = None) -> Held:
    """``take_turn``, answering with everything the turn page shows (one statement reads it). Hold on to it:
    the session keeps only objects something refers to, and a ``session.get`` of a dropped one queries again.
    ``max_held``: the turns a worker may hold at once (``Settings.max_held_turns``); one more is a Conflict."""
    now = now or utcnow()
    row = session.execute(_TAKING, {"hit": hit_id, "worker": worker.id}).first()
    if row is None or row[0].provider != LOCAL:
        raise NotFound(f"turn {hit_id} does not exist")
    hit, turn, conversation, batch, task, mine = row
    check_can_work(worker, hit.role)
    stages.check_stage(worker, conversation.scenario)
    _check_task_not_taken(session, worker, batch, conversation)
    keeping.check_not_withheld(session, hit, worker.id, now)
    leased_before = hit.lease_expires_at
    if mine is not None and leased_before and leased_before >= now:
        return Held(mine, hit, turn, conversation, batch, task)
    until = now + timedelta(seconds=lease_seconds)
    if _core(session, _LEASE, {"hit": hit.id, "now": now, "until": until}).rowcount != 1:
        raise Conflict("another worker has taken this turn; pick another one from the queue")
    if max_held is not None:
        _check_holds_fewer(session, worker, hit, max_held, now)
    set_committed_value(hit, "lease_expires_at", until)
    if leased_before is not None:  # a lease that ran out: its holder's assignment ends (none without one)
        _abandon_assignments(session, hit, reason="lease_expired", now=now)
    assignment = Assignment(hit_id=hit.id, worker_id=worker.id, external_id=f"L{secrets.token_hex(12)}",
                            accepted_at=now)
    session.add(assignment)
    session.flush()
    events.record(session, "turn_taken", f"worker:{worker.id}", conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=worker.id, assignment_id=assignment.id,
                  lease_expires_at=until.isoformat())
    return Held(assignment, hit, turn, conversation, batch, task)


def _check_holds_fewer(session: Session, worker: Worker, hit: Hit, max_held: int, now: datetime) -> None:
    """Refuse a take that would make the worker hold more than ``max_held`` turns at once. Counted after this
    take's lease is written, with the worker's row locked (PostgreSQL; SQLite's write lock already orders the
    takes), so two takes at the same moment cannot both slip under the limit."""
    _core(session, _WORKER_LOCK, {"worker": worker.id})
    held = _core(session, _HOLDING, {"worker": worker.id, "hit": hit.id, "now": now}).scalar_one()
    if held >= max_held:
        raise Conflict(f"you hold {held} turns already, the most one worker may hold at once: submit one (or let "
                       "its time run out) before taking another")


_WORKER_LOCK = select(Worker.id).where(Worker.id == bindparam("worker")).with_for_update()
_HOLDING = (select(func.count()).select_from(Assignment).join(Hit, Hit.id == Assignment.hit_id)
         .where(Assignment.worker_id == bindparam("worker"), Assignment.status == AssignmentStatus.accepted,
                Hit.status == HitStatus.open, Hit.id != bindparam("hit"),
                col(Hit.lease_expires_at) >= bindparam("now")))


def _check_task_not_taken(session: Session, worker: Worker, batch: Batch, conversation: Conversation) -> None:
    """Refuse a second conversation of one task to a worker of a ``distinct_writers`` protocol: an annotator
    labels each turn once, so its replicas have as many annotators."""
    if batch.protocol in DISTINCT_WRITERS and _core(session, _TASK_TAKEN, {
            "worker": worker.id, "batch": batch.id, "task": conversation.task_id}).first() is not None:
        raise Conflict("you have this turn already (each turn goes to different workers); pick another one from "
                       "the queue")


def _abandon_assignments(session: Session, hit: Hit, reason: str, now: datetime) -> None:
    for assignment in session.exec(
        select(Assignment).where(Assignment.hit_id == hit.id, Assignment.status == AssignmentStatus.accepted)
    ).all():
        abandon_assignment(session, assignment, reason, actor="system")


def release_expired_leases(session: Session, now: Optional[datetime] = None) -> int:
    """Return abandoned turns to the pool: leases past their time lose their assignment."""
    now = now or utcnow()
    hits = session.exec(
        select(Hit).where(Hit.status == HitStatus.open, col(Hit.lease_expires_at).is_not(None),
                          col(Hit.lease_expires_at) < now)
    ).all()
    for hit in hits:
        _abandon_assignments(session, hit, reason="lease_expired", now=now)
        hit.lease_expires_at = None
        session.add(hit)
    return len(hits)


# ---- submitting --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    turn: Turn
    rating: Optional[Rating]
    created: bool  # False when this was a repeated submit of an already stored turn


class Held(NamedTuple):
    """An assignment and everything its turn page and its submit read, loaded in one statement."""

    assignment: Assignment
    hit: Hit
    turn: Turn
    conversation: Conversation
    batch: Batch
    task: Task


_HELD = (
    select(Assignment, Hit, Turn, Conversation, Batch, Task)
    .join(Hit, Hit.id == Assignment.hit_id).join(Turn, Turn.id == Hit.turn_id)
    .join(Conversation, Conversation.id == Turn.conversation_id).join(Batch, Batch.id == Conversation.batch_id)
    .join(Task, Task.id == Conversation.task_id)
    .where(Assignment.external_id == bindparam("assignment"))
)
_EARLIER = (
    select(Turn.id, Turn.index, Turn.role, Turn.worker_id, Turn.text, Turn.label, Turn.answers)
    .where(Turn.conversation_id == bindparam("conversation"), Turn.index < bindparam("index"),
           Turn.status == TurnStatus.submitted).order_by(Turn.index)
)
_RATING_BY = select(Rating).where(Rating.rater_turn_id == bindparam("turn"))
_SUBMITTED = (
    states.update_to(Assignment, AssignmentStatus.submitted).where(Assignment.id == bindparam("assignment"))
    .values(submitted_at=bindparam("now")).execution_options(**_QUICK)
)
_WRITTEN = (
    states.update_to(Turn, TurnStatus.submitted).where(Turn.id == bindparam("turn"))
    .values(worker_id=bindparam("author"), text=bindparam("written"), label=bindparam("labelled"),
            answers=bindparam("given", type_=JSON), signals=bindparam("seen", type_=JSON),
            submitted_at=bindparam("now"))
    .execution_options(**_QUICK)
)
# Whom a requester sees (``turkflow.access``): a writer's first turn in a batch adds its row, later ones nothing.
_WROTE_IN = {name: dialect.insert(BatchWorker.__table__).on_conflict_do_nothing()
             for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))}
_HIT_DONE = (
    states.update_to(Hit, HitStatus.submitted).where(Hit.id == bindparam("hit")).values(lease_expires_at=None)
    .execution_options(**_QUICK)
)
_COUNTED = (
    update(Conversation).where(Conversation.id == bindparam("conversation"))
    .values(turn_count=bindparam("count"), updated_at=bindparam("now")).execution_options(**_QUICK)
)


def held(session: Session, assignment_external_id: str) -> Optional[Held]:
    """The assignment with this external id and its HIT, turn, conversation, batch and task, or None; later
    ``session.get`` of any of them needs no query."""
    row = session.execute(_HELD, {"assignment": assignment_external_id}).first()
    return Held(*row) if row is not None else None


@dataclass(frozen=True, slots=True)
class Earlier:
    """What a turn page and a submit read of a turn before the current one (the whole history is read on
    every page and submit, so only these columns, and no ORM object per turn)."""

    id: int
    index: int
    role: str
    worker_id: Optional[int]
    text: Optional[str]
    label: Optional[str]
    answers: dict[str, Any]


def earlier_turns(session: Session, turn: Turn) -> list[Earlier]:
    """The submitted turns before ``turn`` in its conversation, in order."""
    return [Earlier(*row) for row in
            _core(session, _EARLIER, {"conversation": turn.conversation_id, "index": turn.index})]


def turn_context(session: Session, turn: Turn, task: Task,
                 earlier: Optional[Sequence[Earlier]] = None) -> TurnContext:
    """What the protocol judges a turn's answers by; ``earlier``: the turns before it, if already read."""
    shared: list[str] = []
    for before in earlier if earlier is not None else earlier_turns(session, turn):
        for item in before.answers.get("shared", []):
            if item not in shared:
                shared.append(item)
    return TurnContext(
        index=turn.index,
        role=turn.role,
        shareable=tuple(item["id"] for item in document_items(task)),
        shared_so_far=tuple(shared),
        document_text=document_text(task),
    )


def submit_turn(session: Session, assignment_external_id: str, worker: Worker, raw: dict[str, Any],
                now: Optional[datetime] = None, *, loaded: Optional[Held] = None) -> Submission:
    """Store a worker's turn: answers, text, the rating of the previous turn, all in one transaction.

    The assignment must be the worker's own. Submitting again returns the stored turn untouched, so a
    double click or a retried request never creates a second turn. ``loaded``: what ``held`` returned for
    the assignment in this transaction, if the caller read it already.
    """
    now = now or utcnow()
    found = loaded if loaded is not None else held(session, assignment_external_id)
    if found is None:
        raise NotFound("this assignment does not exist")
    assignment, hit, turn, conversation, batch, task = found
    if assignment.worker_id != worker.id:
        raise Forbidden("this turn was assigned to another worker")
    if assignment.status in (AssignmentStatus.submitted, AssignmentStatus.approved, AssignmentStatus.rejected):
        response = next(q.name for q in get_protocol(batch.protocol).form(turn.role).questions if q.is_response)
        check_resent(turn, raw.get(response), response)
        rating = session.execute(_RATING_BY, {"turn": turn.id}).scalars().first()
        return Submission(turn=turn, rating=rating, created=False)
    if assignment.status == AssignmentStatus.abandoned:
        raise Conflict("your time on this turn ran out and another worker took it")
    if worker.status != WorkerStatus.active:
        raise Forbidden("you are blocked from taking turns; the requester reviews blocks daily")

    protocol = get_protocol(batch.protocol)
    earlier = earlier_turns(session, turn)
    answers = validate_answers(protocol, turn_context(session, turn, task, earlier), raw)
    form = protocol.form(turn.role)
    label = answers[form.label_question().name]
    text = next(answers[q.name] for q in form.questions if q.is_response)

    if _core(session, _SUBMITTED, {"assignment": assignment.id, "now": now}).rowcount != 1:
        session.rollback()  # a concurrent submit of the same assignment got there first
        return submit_turn(session, assignment_external_id, worker, raw, now)
    signals = writing_signals(raw)
    if _core(session, _WRITTEN, {"turn": turn.id, "author": worker.id, "written": text, "labelled": label,
                                  "given": answers, "seen": signals, "now": now}).rowcount != 1:
        raise Conflict("this turn has already been written by another worker")
    record_writer(session, batch.id, worker.id)
    if _core(session, _HIT_DONE, {"hit": hit.id}).rowcount != 1:
        states.move(hit, HitStatus.submitted)  # refused as an illegal move (it was not open), as it would be
    _core(session, _COUNTED, {"conversation": conversation.id, "count": turn.index + 1, "now": now})
    for obj, values in ((assignment, {"status": AssignmentStatus.submitted, "submitted_at": now}),
                        (turn, {"status": TurnStatus.submitted, "worker_id": worker.id, "text": text,
                                "label": label, "answers": answers, "signals": signals, "submitted_at": now}),
                        (hit, {"status": HitStatus.submitted, "lease_expires_at": None}),
                        (conversation, {"turn_count": turn.index + 1, "updated_at": now})):
        for name, value in values.items():  # what the UPDATEs wrote, so the session's objects say it too
            set_committed_value(obj, name, value)
    rating = _store_rating(session, turn, worker, answers, now, earlier)
    events.record(session, "turn_submitted", f"worker:{worker.id}", batch_id=batch.id,
                  conversation_id=conversation.id, turn_id=turn.id, worker_id=worker.id,
                  assignment_id=assignment.id, index=turn.index, role=turn.role, label=label, text=text,
                  answers=answers)
    session.flush()
    return Submission(turn=turn, rating=rating, created=True)


def record_writer(session: Session, batch_id: int, worker_id: int) -> None:
    """Remember that the worker wrote a turn in the batch (``BatchWorker``), once."""
    _core(session, _WROTE_IN[session.get_bind().dialect.name], {"batch_id": batch_id, "worker_id": worker_id})


def check_resent(turn: Turn, sent: Any, field: str) -> None:
    """A submit of a turn already stored must repeat it. The same text is the idempotent resubmit (a double
    click, a retried request) and changes nothing; other text is refused naming what was stored, never
    dropped in silence. ``sent`` is the text as it came (a form's one-item list too); none, nothing to check."""
    if isinstance(sent, list) and len(sent) == 1:
        sent = sent[0]
    if not isinstance(sent, str):
        return
    try:
        same = clean_text(sent) == (turn.text or "")
    except InvalidInput:
        same = False
    if not same:
        raise AlreadySubmitted(field, turn.text or "")


def _store_rating(session: Session, turn: Turn, worker: Worker, answers: dict, now: datetime,
                  earlier: Sequence[Earlier]) -> Optional[Rating]:
    if "relevant" not in answers or turn.index == 0:
        return None
    rated = earlier[-1] if earlier else None  # a turn opens only once the one before it is submitted
    if rated is None or rated.index != turn.index - 1:
        raise Conflict(f"turn {turn.index} of conversation {turn.conversation_id} has no submitted turn before it")
    rating = Rating(rated_turn_id=rated.id, rater_turn_id=turn.id, author_id=rated.worker_id,
                    rater_id=worker.id, relevant=answers["relevant"], useful=answers["useful"], created_at=now)
    session.add(rating)
    return rating


# ---- what a turn page shows -------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnView:
    turn: Turn
    conversation: Conversation
    batch: Batch
    task: Task
    protocol: Protocol
    context: TurnContext
    history: list[dict[str, Any]]
    items: list[dict[str, Any]]


def turn_view(session: Session, turn: Turn, loaded: Optional[Held] = None) -> TurnView:
    """Everything the turn page renders: the history with each turn's shared items resolved. ``loaded``: what
    ``held`` or ``take`` read of this turn, if the caller has it (no query for its rows then)."""
    if loaded is not None:
        conversation, batch, task = loaded.conversation, loaded.batch, loaded.task
    else:
        conversation = session.get(Conversation, turn.conversation_id)
        batch = session.get(Batch, conversation.batch_id)
        task = session.get(Task, conversation.task_id)
    items = document_items(task)
    by_id = {item["id"]: item for item in items}
    earlier = earlier_turns(session, turn)
    history = [
        {
            "index": t.index,
            "role": t.role,
            "text": t.text,
            "label": t.label,
            "shared": [by_id[i] for i in t.answers.get("shared", []) if i in by_id],
        }
        for t in earlier
    ]
    return TurnView(turn=turn, conversation=conversation, batch=batch, task=task,
                    protocol=get_protocol(batch.protocol), context=turn_context(session, turn, task, earlier),
                    history=history, items=items)


# ---- batches: pause, resume, cancel -----------------------------------------------------------------


def set_batch_status(session: Session, batch: Batch, status: BatchStatus, actor: str) -> list[Hit]:
    """Pause, resume or cancel a batch. Returns HITs the provider must expire (on cancel)."""
    states.move(batch, status)
    session.add(batch)
    events.record(session, f"batch_{status}", actor, batch_id=batch.id)
    if status != BatchStatus.cancelled:
        return []
    live_hits = list(session.exec(
        select(Hit).join(Turn, Turn.id == Hit.turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == batch.id, col(Hit.status).in_([HitStatus.pending, HitStatus.open]))
    ))
    for hit in live_hits:
        states.move(hit, HitStatus.expired)
        session.add(hit)
    for conversation in session.exec(
        select(Conversation).where(Conversation.batch_id == batch.id, Conversation.status == ConversationStatus.active)
    ):
        states.move(conversation, ConversationStatus.cancelled)
        conversation.end_reason = "cancelled"
        session.add(conversation)
    session.execute(
        states.update_to(Turn, TurnStatus.cancelled)
        .where(col(Turn.conversation_id).in_(select(Conversation.id).where(Conversation.batch_id == batch.id)))
    )
    return live_hits


def end_conversation(session: Session, conversation_id: int, reason: str) -> bool:
    """End an active conversation now, as its last turn would (``_complete``, its batch completed with its last
    conversation) but with ``reason`` (an agent out of attempts): its open turn is cancelled and that turn's
    live HITs expire, so nothing of it is stored or paid later. Returns False when it had ended already."""
    conversation = session.get(Conversation, conversation_id)
    if conversation is None or conversation.status != ConversationStatus.active:
        return False
    for hit in session.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id).where(
            Turn.conversation_id == conversation_id, col(Hit.status).in_([HitStatus.pending, HitStatus.open]))):
        states.move(hit, HitStatus.expired)
        session.add(hit)
        _abandon_assignments(session, hit, reason=reason, now=utcnow())
    session.execute(states.update_to(Turn, TurnStatus.cancelled).where(Turn.conversation_id == conversation_id))
    _complete(session, session.get(Batch, conversation.batch_id), conversation, reason)
    return True


# ---- repair -----------------------------------------------------------------------------------------


def stalled_conversations(session: Session, submitted_before: datetime, limit: int = 500) -> list[int]:
    """Active conversations in active batches with no open turn whose last turn was submitted before
    ``submitted_before``.

    These are the ones a lost Celery message or a crash left behind (or whose batch was just resumed).
    """
    open_turn = select(Turn.id).where(Turn.conversation_id == Conversation.id, Turn.status == TurnStatus.open)
    last_submitted = select(func.max(Turn.submitted_at)).where(Turn.conversation_id == Conversation.id)
    return list(session.exec(
        select(Conversation.id).join(Batch, Batch.id == Conversation.batch_id)
        .where(Conversation.status == ConversationStatus.active, Batch.status == BatchStatus.active,
               ~open_turn.exists(), last_submitted.scalar_subquery() < submitted_before)
        .order_by(Conversation.updated_at).limit(limit)
    ))


def unreviewed_turns(session: Session, submitted_before: datetime, limit: int = 500) -> list[int]:
    """Submitted turns the monitor and content checks have not reviewed yet, oldest first (a range of the
    partial index ``ix_turn_unreviewed``, which holds only these)."""
    return list(session.exec(
        select(Turn.id).where(Turn.status == TurnStatus.submitted, col(Turn.reviewed_at).is_(None),
                              Turn.submitted_at < submitted_before)
        .order_by(Turn.submitted_at).limit(limit)
    ))


def unpublished_hits(session: Session, older_than: datetime, limit: int = 500) -> list[int]:
    """HITs whose row was written but whose publishing never finished."""
    return list(session.exec(
        select(Hit.id).where(Hit.status == HitStatus.pending, Hit.created_at < older_than).order_by(Hit.id).limit(limit)
    ))


def turn_for_assignment(session: Session, assignment: Assignment) -> Turn:
    return session.get(Turn, session.get(Hit, assignment.hit_id).turn_id)


def batch_of_hit(session: Session, hit: Hit) -> Batch:
    turn = session.get(Turn, hit.turn_id)
    return session.get(Batch, session.get(Conversation, turn.conversation_id).batch_id)


# ---- what a platform tells us: work returned, verdicts, HITs that ended unanswered ---------------------


def abandon_assignment(session: Session, assignment: Assignment, reason: str, actor: str = "provider") -> bool:
    """An accepted assignment its worker returned, abandoned or let run out; the HIT is available again."""
    if assignment.status != AssignmentStatus.accepted:
        return False
    states.move(assignment, AssignmentStatus.abandoned)
    session.add(assignment)
    turn = turn_for_assignment(session, assignment)
    events.record(session, "assignment_abandoned", actor, conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id, reason=reason)
    return True


def settle_assignment(session: Session, assignment: Assignment, status: AssignmentStatus) -> bool:
    """Take the platform's verdict on a submitted assignment (approved or rejected there, by us or by the
    platform's auto-approval); returns whether our record changed."""
    if assignment.status == status:
        return False
    before = assignment.status
    states.move(assignment, status)
    assignment.reviewed_at = utcnow()
    session.add(assignment)
    turn = turn_for_assignment(session, assignment)
    events.record(session, f"assignment_{status}", "provider", conversation_id=turn.conversation_id,
                  turn_id=turn.id, worker_id=assignment.worker_id, assignment_id=assignment.id, was=before)
    return True


def reopen_turn(session: Session, hit: Hit, reason: str, provider: Optional[str] = None) -> Optional[Hit]:
    """The HIT ended on its platform without a submission: mark it expired and open a new attempt for the
    same turn (still to publish), on ``provider`` if given (an agent's turn handed to people goes to its batch's
    platform). Returns None when the turn no longer needs one (written or cancelled)."""
    if hit.status not in (HitStatus.pending, HitStatus.open):
        return None
    states.move(hit, HitStatus.expired)
    session.add(hit)
    for stale in session.exec(select(Assignment).where(Assignment.hit_id == hit.id,
                                                       Assignment.status == AssignmentStatus.accepted)):
        abandon_assignment(session, stale, reason)
    session.flush()
    turn = session.get(Turn, hit.turn_id)
    if turn.status != TurnStatus.open:
        return None
    attempt = Hit(turn_id=turn.id, attempt=hit.attempt + 1, provider=provider or hit.provider, role=hit.role)
    session.add(attempt)
    session.flush()
    conversation = session.get(Conversation, turn.conversation_id)
    events.record(session, "turn_reopened", "provider", batch_id=conversation.batch_id,
                  conversation_id=conversation.id, turn_id=turn.id, expired_hit_id=hit.id, hit_id=attempt.id,
                  attempt=attempt.attempt, reason=reason)
    return attempt


__all__ = [
    "Earlier", "Held", "Opened", "Submission", "TurnView",
    "abandon_assignment", "advance_conversation", "batch_of_hit", "check_can_work", "check_resent", "committed_cents",
    "earlier_turns", "held", "launch_batch", "open_hits_for", "open_next_turn", "queue_entries", "publish_hit",
    "release_expired_leases", "reopen_turn",
    "set_batch_status", "settle_assignment", "stalled_conversations", "submit_turn", "take", "take_turn",
    "turn_context", "turn_for_assignment", "turn_view", "unpublished_hits", "unreviewed_turns",
]
