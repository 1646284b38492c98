"""The simulation report: what the crowd did, what the database holds, what it cost, and how well the
quality monitor caught the bad workers, judged against the hidden truth.

The report has two parts. ``reproducible`` depends only on the seed and the parameters: the same seed
gives the same numbers on any machine and backend. ``measured`` holds timings (wall time, throughput,
latency per route and from submission to the next open HIT) and HTTP error counts, which are not.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict
from typing import Any, Iterable, Optional

from sqlmodel import Session, col, select

from turkflow.config import default
from turkflow.hits.money import fee_cents
from turkflow.models import (Assignment, AssignmentStatus, Batch, Bonus, Conversation, Event, Hit, PlaceStatus,
                             ProlificPlace, QualityDecision, RaterReliability, Rating, Turn, TurnStatus, Worker,
                             WorkerStatus)
from turkflow.quality import stall
from turkflow.quality.monitor import Policy, machine_written
from turkflow.simulator.crowd import Behaviour, SimWorker
from turkflow.simulator.driver import Outcome, as_utc
from turkflow.simulator.policies import Efficacy, RatingRecord, TurnRecord, compare, gold_records, judge


def turn_stream(session: Session, batch_id: int, names: dict[int, str], keys_per_char: float,
                order: Optional[dict[int, tuple]] = None) -> list[TurnRecord]:
    """The batch's submitted turns as the monitor saw them, in the order it judged them: by submission (or by
    ``order``, a sort key per turn id: the simulator's rounds, so that a seed replays the same way whatever the
    timing within a round), the ratings among them in the order they were stored (the order the live monitor
    judged each author in: an author gets at most one rating a round)."""
    turns = sorted(session.exec(
        select(Turn.id, Turn.worker_id, Turn.text, Turn.flags, Turn.signals, Turn.submitted_at)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == batch_id, Turn.status == TurnStatus.submitted)
    ).all(), key=lambda t: order.get(t[0], (float("inf"), t[0])) if order else (as_utc(t[5]), t[0]))
    ratings = session.exec(
        select(Rating.rater_turn_id, Rating.author_id, Rating.rater_id, Rating.relevant, Rating.useful)
        .join(Turn, Turn.id == Rating.rater_turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == batch_id).order_by(Rating.id)
    ).all()
    # people's turns and their ratings of each other: an agent's turns (--agent) have a report of their own
    turns = [t for t in turns if t[1] in names]
    ratings = [r for r in ratings if r[1] in names and r[2] in names]
    machine = {turn_id: machine_written(flags, text or "", signals, keys_per_char)
               for turn_id, _, text, flags, signals, _ in turns}
    writer = {turn_id: names[worker_id] for turn_id, worker_id, *_ in turns}
    own = {rating[0]: rating for rating in ratings}
    given = iter(ratings)
    stream = []
    for turn_id, *_ in turns:
        if turn_id in own:  # a turn that rated: its own rating in round order, else the next in storage order
            rater_turn, author, rater, relevant, useful = own[turn_id] if order else next(given)
            stream.append(TurnRecord(writer[rater_turn], machine[rater_turn],
                                     RatingRecord(names[author], relevant, useful, names[rater])))
        else:
            stream.append(TurnRecord(writer[turn_id], machine[turn_id]))
    return stream


def build_report(session: Session, outcome: Outcome, parameters: dict[str, Any],
                 policies: Iterable[Policy], fee_percent: float,
                 keys_per_char: float = default("typed_keys_per_char")) -> dict[str, Any]:
    """``fee_percent``: Prolific's service fee, charged on the money of a batch on any provider (what the
    same work costs on Prolific, where paid collection runs today). ``keys_per_char``: the monitor's
    machine-written threshold (TURKFLOW_TYPED_KEYS_PER_CHAR), for the replays."""
    names = {worker_id: name for name, worker_id in outcome.worker_ids.items()}
    position = {cid: n for n, cid in enumerate(outcome.conversation_ids)}
    stored = session.exec(
        select(Turn.id, Turn.conversation_id, Turn.index, Turn.worker_id, Turn.text, Turn.submitted_at)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == outcome.batch_id, Turn.status == TurnStatus.submitted)
    ).all()
    ratings = session.exec(
        select(Rating.id, Rating.author_id, Rating.relevant, Rating.useful, Rating.created_at)
        .join(Turn, Turn.id == Rating.rater_turn_id).join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == outcome.batch_id).order_by(Rating.id)
    ).all()
    stored = [row for row in stored if row.worker_id in names]  # people's (agents': agents_report)
    ratings = [row for row in ratings if row.author_id in names]
    stream = turn_stream(session, outcome.batch_id, names, keys_per_char,
                         order={r.turn_id: (r.round, r.conversation, r.index) for r in outcome.turns.values()})

    live_blocked = _live_blocks(session, outcome, names, ratings)
    bonus_rows = session.exec(
        select(Bonus.worker_id, Bonus.amount_cents).join(Turn, Turn.id == Bonus.turn_id)
        .join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == outcome.batch_id)
    ).all()
    bonus_by_name: Counter[str] = Counter()
    bonus_turns: Counter[str] = Counter()
    for worker_id, amount in bonus_rows:
        bonus_by_name[names[worker_id]] += amount
        bonus_turns[names[worker_id]] += 1
    live_policy = outcome.policy
    batch = session.get(Batch, outcome.batch_id)
    rewarded = _rewarded(session, outcome.batch_id, stored, names)
    money = _money(outcome, rewarded, names, bonus_rows, batch.reward_cents, fee_percent)
    live = judge(outcome.crowd, {name: n for name, (n, _) in live_blocked.items()}, dict(bonus_turns), live_policy,
                 blocked_written={name: written for name, (_, written) in live_blocked.items()},
                 identified_after=_live_identified(session, outcome, names),
                 paid_share=money["share_paid_to_spammers_and_pasters"])
    comparison = compare(outcome.crowd, stream, policies, stopped=frozenset(live_blocked),
                         reward_cents=batch.reward_cents, start=gold_records(outcome.crowd, outcome.gold))
    replayed_live = next((e for e in comparison if e.policy == live_policy.text), None)

    reproducible = {
        "turns": _turn_counts(outcome, stored, position, names),
        "conversations": _conversations(session, outcome),
        "rounds": outcome.rounds,
        "stop_reason": outcome.stop_reason,
        "ratings": len(ratings),
        "crowd": _crowd_table(outcome, stored, rewarded, names, live_blocked, bonus_by_name, batch.reward_cents),
        "money": money,
        "monitor": {
            "policy": live_policy.text,
            **_efficacy(live),
            "median_turns_written_before_block": _median(
                [written for name, (_, written) in live_blocked.items() if _worker(outcome, name).bad_writer]),
            "replay_agrees_with_live_monitor": replayed_live is not None and (
                replayed_live.blocked_by_behaviour == live.blocked_by_behaviour
                and replayed_live.median_rated_turns_before_block == live.median_rated_turns_before_block),
        },
        "policies": [_efficacy(e) for e in comparison],
        "stalled": [stall.describe(r.role, r.workers, r.waiting)
                    for r in stall.role_supply(session, outcome.batch_id) if r.starved],
        "refused_requests": dict(sorted(outcome.refused.items())),
        "revised_answers": dict(sorted(outcome.revised.items())),
        "same_worker": _same_worker(session, outcome),
        "one_writer_per_role_share": _one_writer_per_role(session, outcome),
        "next_turn_wait_p95_seconds": _next_turn_wait_p95(outcome),
    }
    return {"parameters": parameters, "reproducible": reproducible, "measured": _measured(session, outcome, stored)}


def _live_identified(session: Session, outcome: Outcome, names: dict[int, str]) -> dict[str, int]:
    """Raters the live monitor identified: ratings they had given when it did (0: by their gold answers)."""
    return {names[worker_id]: after for worker_id, after in session.exec(
        select(RaterReliability.rater_id, RaterReliability.identified_after)
        .where(col(RaterReliability.verdict).is_not(None), col(RaterReliability.rater_id).in_(list(names)))
    )}


def _worker(outcome: Outcome, name: str) -> SimWorker:
    return outcome.by_name[name]


def _turn_counts(outcome: Outcome, stored, position, names) -> dict[str, Any]:  # noqa: ANN001
    confirmed = {(r.conversation, r.index): r for r in outcome.turns.values()}
    in_db = {(position[cid], index): (turn_id, worker_id, text) for turn_id, cid, index, worker_id, text, _ in stored}
    lost = [key for key, r in confirmed.items()
            if key not in in_db or in_db[key][0] != r.turn_id or in_db[key][2] != r.text
            or names.get(in_db[key][1]) != r.writer]
    unexpected = [key for key in in_db if key not in confirmed and key not in outcome.agent_turns]
    planned = sum(script.turns(outcome.max_turns) for script in outcome.scripts)
    return {
        "planned": planned,
        "confirmed": len(confirmed),
        "stored": len(in_db),
        "by_agents": len(outcome.agent_turns),
        "lost": len(lost),
        "unexpected": len(unexpected),
        "repeated_submits": sum(1 for r in confirmed.values() if not r.created),
        "history_mismatches": outcome.history_mismatches,
        "by_behaviour": dict(sorted(Counter(_worker(outcome, r.writer).behaviour.value
                                            for r in confirmed.values()).items())),
    }


def _conversations(session: Session, outcome: Outcome) -> dict[str, Any]:
    rows = session.exec(
        select(Conversation.status, Conversation.end_reason).where(Conversation.batch_id == outcome.batch_id)
    ).all()
    return {
        "launched": len(rows),
        "completed": sum(1 for status, _ in rows if status == "completed"),
        "by_end_reason": dict(sorted(Counter(reason or status for status, reason in rows).items())),
    }


def _live_blocks(session: Session, outcome: Outcome, names: dict[int, str], ratings) -> dict[str, tuple[int, int]]:  # noqa: ANN001
    """Workers the live monitor blocked: (rated turns when blocked, turns they had written by then)."""
    ids = list(outcome.worker_ids.values())
    blocked = session.exec(
        select(Worker.id).where(col(Worker.id).in_(ids), Worker.status != WorkerStatus.active)
    ).all()
    found = {}
    for worker_id in blocked:
        event = session.exec(
            select(Event.id, Event.at).where(Event.worker_id == worker_id, Event.kind == "worker_blocked")
            .order_by(Event.id).limit(1)
        ).first()
        first_block = session.exec(
            select(QualityDecision.rating_id).where(QualityDecision.worker_id == worker_id,
                                                    QualityDecision.outcome == "block")
            .order_by(QualityDecision.id).limit(1)
        ).first()
        own = [rating_id for rating_id, author, *_ in ratings if author == worker_id]
        if first_block is not None and first_block in own:
            rated = own.index(first_block) + 1
        else:  # blocked by something other than the ratings monitor
            rated = sum(1 for rating_id, author, _, _, at in ratings
                        if author == worker_id and event is not None and as_utc(at) <= as_utc(event.at))
        written = len(session.exec(
            select(Turn.id).where(Turn.worker_id == worker_id, Turn.status == TurnStatus.submitted,
                                  *([col(Turn.submitted_at) <= event.at] if event is not None else []))
        ).all())
        found[names[worker_id]] = (rated, written)
    return found


def _rewarded(session: Session, batch_id: int, stored, names) -> list[int]:  # noqa: ANN001
    """The worker of each reward the batch pays: one a stored turn, or, where Prolific's places last a session,
    one a place (however many turns were written in it; none in one left on Prolific before writing any)."""
    in_places = dict(session.exec(
        select(Hit.turn_id, Assignment.place_id).join(Assignment, Assignment.hit_id == Hit.id)
        .join(Turn, Turn.id == Hit.turn_id)
        .where(col(Hit.turn_id).in_([row.id for row in stored]), col(Assignment.place_id).is_not(None),
               Assignment.worker_id == Turn.worker_id, Assignment.status != AssignmentStatus.abandoned)).all())
    places = session.exec(select(ProlificPlace.id, ProlificPlace.worker_id, ProlificPlace.status)
                          .where(ProlificPlace.batch_id == batch_id)).all()
    written = set(in_places.values())
    return ([row.worker_id for row in stored if row.id not in in_places]
            + [worker_id for place_id, worker_id, status in places
               if worker_id in names and (status != PlaceStatus.left or place_id in written)])


def _crowd_table(outcome: Outcome, stored, rewarded, names, live_blocked, bonus_by_name,  # noqa: ANN001
                 reward_cents) -> dict[str, Any]:  # noqa: ANN001
    turns_by_name = Counter(names[worker_id] for _, _, _, worker_id, _, _ in stored)
    rewards_by_name = Counter(names[worker_id] for worker_id in rewarded)
    table = {}
    for behaviour in Behaviour:
        members = [w for w in outcome.crowd if w.behaviour == behaviour]
        if not members:
            continue
        table[behaviour.value] = {
            "workers": len(members),
            "turns": sum(turns_by_name[w.name] for w in members),
            "blocked": sum(1 for w in members if w.name in live_blocked),
            "earned_cents": sum(rewards_by_name[w.name] * reward_cents + bonus_by_name[w.name] for w in members),
        }
    return table


def _money(outcome: Outcome, rewarded, names, bonus_rows, reward_cents: int,  # noqa: ANN001
           fee_percent: float) -> dict[str, Any]:
    """Rewards (``rewarded``: the worker of each) and bonuses, with Prolific's service fee on each."""
    rewards = len(rewarded) * reward_cents
    bonuses = sum(amount for _, amount in bonus_rows)
    fees = (len(rewarded) * fee_cents("prolific", reward_cents, fee_percent=fee_percent)
            + sum(fee_cents("prolific", a, fee_percent=fee_percent) for _, a in bonus_rows))
    bad = {w.name for w in outcome.crowd if w.behaviour != Behaviour.honest}
    bad_writers = {w.name for w in outcome.crowd if w.bad_writer}
    spammers_and_pasters = {w.name for w in outcome.crowd if w.behaviour in (Behaviour.spammer, Behaviour.paster)}
    paid: Counter[str] = Counter()
    for worker_id in rewarded:
        paid[names[worker_id]] += reward_cents
    for worker_id, amount in bonus_rows:
        paid[names[worker_id]] += amount
    total_paid = sum(paid.values())
    rounds: dict[str, list[int]] = {}
    for record in outcome.turns.values():
        rounds.setdefault(record.writer, []).append(record.round)
    present = sum(max(r) - min(r) + 1 for r in rounds.values()) * ROUND_SECONDS / 3600
    return {
        "rewards_cents": rewards,
        "bonuses_cents": bonuses,
        "fee_percent": fee_percent,
        "fees_cents": fees,
        "total_cents": rewards + bonuses + fees,
        "paid_to_bad_workers_cents": sum(paid[n] for n in bad),
        "share_paid_to_bad_workers": _ratio(sum(paid[n] for n in bad), total_paid),
        "paid_to_bad_writers_cents": sum(paid[n] for n in bad_writers),
        "share_paid_to_bad_writers": _ratio(sum(paid[n] for n in bad_writers), total_paid),
        "share_paid_to_spammers_and_pasters": _ratio(sum(paid[n] for n in spammers_and_pasters), total_paid),
        # rewards and bonuses per hour a worker stays, on the simulated clock: from the round of their first turn
        # to the end of the round of their last (the rounds they wait between turns count)
        "paid_per_hour_cents": round(total_paid / present) if present else None,
    }


def _efficacy(efficacy: Efficacy) -> dict[str, Any]:
    return {**asdict(efficacy), "meets_target": efficacy.meets_target(), "misses": efficacy.misses()}


def _measured(session: Session, outcome: Outcome, stored) -> dict[str, Any]:  # noqa: ANN001
    turns = len(outcome.turns)
    return {
        "wall_seconds": round(outcome.wall_seconds, 2),
        "turns_per_second": round(turns / outcome.wall_seconds, 2) if outcome.wall_seconds else None,
        "submit_to_next_hit_open_ms": _next_hit_latency(session, outcome, stored),
        "submit_to_next_turn_taken_ms": _next_turn_taken(session, outcome),
        "http": {
            "requests": sum(len(d) for d in outcome.http.durations.values()),
            "errors": dict(sorted(outcome.http.errors.items())),
            "routes": {route: {"requests": len(d), "p50_ms": _ms(_percentile(d, 50)),
                               "p95_ms": _ms(_percentile(d, 95)), "p99_ms": _ms(_percentile(d, 99))}
                       for route, d in sorted(outcome.http.durations.items())},
        },
    }


def _next_hit_latency(session: Session, outcome: Outcome, stored) -> dict[str, Any]:  # noqa: ANN001
    """From a submission to the moment the conversation's next HIT is open, two ways.

    ``server``: the event log's ``turn_submitted`` to the next turn's ``hit_published``. ``worker``: from
    the moment the submitting worker got the server's answer (a HIT that opened before counts as zero).
    """
    turn_ids = {turn_id for turn_id, *_ in stored}
    submitted, published = {}, {}
    for kind, turn_id, at in session.exec(
        select(Event.kind, Event.turn_id, Event.at)
        .where(Event.batch_id == outcome.batch_id, col(Event.kind).in_(["turn_submitted", "hit_published"]))
    ):
        (submitted if kind == "turn_submitted" else published)[turn_id] = as_utc(at).timestamp()
    key_of = {turn_id: (cid, index) for turn_id, cid, index, *_ in stored}
    opened_turn = {}
    for turn_id, cid, index in session.exec(
        select(Turn.id, Turn.conversation_id, Turn.index).join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == outcome.batch_id)
    ):
        opened_turn[(cid, index)] = turn_id
    confirmed_at = {r.turn_id: r.confirmed_at for r in outcome.turns.values()}
    server, worker = [], []
    for turn_id in turn_ids:
        cid, index = key_of[turn_id]
        following = opened_turn.get((cid, index + 1))
        if following is None or following not in published or turn_id not in submitted:
            continue
        server.append(published[following] - submitted[turn_id])
        if turn_id in confirmed_at:
            worker.append(max(0.0, published[following] - confirmed_at[turn_id]))
    return {"server": _summary(server), "worker": _summary(worker)}


def _writers(session: Session, outcome: Outcome) -> dict[tuple[int, str], Counter[int]]:
    """(conversation, role) -> how many of its submitted turns each worker wrote."""
    writers: dict[tuple[int, str], Counter[int]] = {}
    for conversation_id, role, worker_id in session.exec(
        select(Turn.conversation_id, Turn.role, Turn.worker_id).join(Conversation, Conversation.id == Turn.conversation_id)
        .where(Conversation.batch_id == outcome.batch_id, Turn.status == TurnStatus.submitted)
    ):
        writers.setdefault((conversation_id, role), Counter())[worker_id] += 1
    return writers


def _same_worker(session: Session, outcome: Outcome) -> dict[str, Any]:
    """How much of each conversation's role one person wrote (what ``--keep`` is for): over every
    (conversation, role), the share of its turns written by its most frequent worker, weighted by turns,
    in all and by role; and how many workers wrote each (conversation, role) on average."""
    writers = _writers(session, outcome)
    roles = sorted({role for _, role in writers})

    def share(keys: list[tuple[int, str]]) -> Optional[float]:
        return _ratio(sum(max(writers[k].values()) for k in keys), sum(sum(writers[k].values()) for k in keys))

    return {
        "most_frequent_worker_share": share(list(writers)),
        "by_role": {role: share([k for k in writers if k[1] == role]) for role in roles},
        "workers_per_conversation_role": round(sum(len(c) for c in writers.values()) / len(writers), 2)
        if writers else None,
    }


def _one_writer_per_role(session: Session, outcome: Outcome) -> Optional[float]:
    """The share of conversations (with a turn written) each of whose roles one worker wrote, as STAR, Frames and
    MEEP were collected (one user and one wizard per dialog)."""
    writers = _writers(session, outcome)
    conversations = {cid for cid, _ in writers}
    single = {cid for cid in conversations if all(len(c) == 1 for (other, _), c in writers.items() if other == cid)}
    return _ratio(len(single), len(conversations))


# The simulated clock: a round stands for the minute a person takes to read a dialog and write its turn.
ROUND_SECONDS = 60


def _next_turn_wait_p95(outcome: Outcome) -> Optional[float]:
    """How long a written turn waits for its conversation's next writer (p95), on the simulated clock: the rounds
    between the round a turn is written in and the one its next turn is taken in, times ``ROUND_SECONDS`` (0: taken
    in the next round). Keeping people lengthens it when a kept turn waits for its worker while others could
    take it; reproducible, where the wall clock's (``measured.submit_to_next_turn_taken_ms``) is not."""
    waits = [(following.round - record.round - 1) * ROUND_SECONDS for (conversation, index), record
             in outcome.turns.items() if (following := outcome.turns.get((conversation, index + 1))) is not None]
    return _percentile(waits, 95)


def _next_turn_taken(session: Session, outcome: Outcome) -> dict[str, Any]:
    """From a submission (``turn_submitted``) to the first take of the conversation's next turn (``turn_taken``):
    how long a written turn waits for its next writer, which keeping people lengthens when a kept turn waits for
    the worker it is kept for."""
    submitted, taken = {}, {}
    for kind, conversation_id, turn_id, at in session.exec(
        select(Event.kind, Event.conversation_id, Event.turn_id, Event.at)
        .where(col(Event.conversation_id).in_(outcome.conversation_ids),
               col(Event.kind).in_(["turn_submitted", "turn_taken"]))
    ):
        moment = as_utc(at).timestamp()
        if kind == "turn_submitted":
            submitted[turn_id] = moment
        else:
            taken[turn_id] = min(moment, taken.get(turn_id, moment))
    position = {(cid, index): turn_id for turn_id, cid, index in session.exec(
        select(Turn.id, Turn.conversation_id, Turn.index).where(col(Turn.conversation_id).in_(outcome.conversation_ids)))}
    waits = [taken[following] - submitted[turn_id] for (cid, index), turn_id in position.items()
             if turn_id in submitted and (following := position.get((cid, index + 1))) in taken]
    return _summary(waits)


def _summary(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "p50": _ms(_percentile(values, 50)), "p95": _ms(_percentile(values, 95)),
            "p99": _ms(_percentile(values, 99)), "max": _ms(max(values) if values else None)}


def _percentile(values: list[float], pct: float) -> Optional[float]:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def _ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(seconds * 1000, 1)


def _median(values: list[int]) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _ratio(part: int, whole: int) -> Optional[float]:
    return round(part / whole, 4) if whole else None

