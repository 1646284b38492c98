"""Quality policies compared on the same ratings: the collected ratings replayed through the monitor's rule.

One simulation collects the ratings every author received, in order. Replaying them through
``turkflow.quality.monitor.decide`` under another policy says which workers that policy would have
blocked and after how many rated turns, so one run compares many.

A policy is the monitor's (``turkflow.quality.monitor.Policy``), written ``k=5,p=0.5`` (window k,
threshold p), ``k=5,p=0.4 for 6, then k=20,p=0.4`` (a strict short window while a worker has at most 6
rated turns, a long one afterwards) or ``pooled k=6,p=0.5`` (the mean of relevance and usefulness together
against p); ``none`` never blocks (run a simulation live with it to collect every worker's full stream of
ratings).

The replay runs the monitor's trust model too (``turkflow.quality.reliability``), rating by rating in the
order they were given, as the live monitor does: so a ``weighted`` policy replays exactly, and the report
says for every policy which careless and harsh raters the model identified, and after how many ratings.
Turns carry whether they count as machine-written, so a policy's ``not typed m of n`` rule replays too.
Raters start with the record their gold answers at onboarding gave them (``gold_records``, from the answers
the live crowd sent), as they start live.

The replay is exact up to the last rating an author actually received. A worker the live policy blocked
wrote nothing afterwards, so a policy that would have blocked them only later cannot be seen doing so:
the report counts such workers as *undetermined* for that policy.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, Optional

from turkflow.quality import gold, reliability
from turkflow.quality.monitor import LEARN_FROM, Policy, decide, judge_typing
from turkflow.simulator.crowd import Behaviour, SimWorker

# The targets' horizons: a spammer should be blocked within this many rated turns, a paster within this many
# written turns, and a careless or harsh rater identified within IDENTIFIED_RATINGS of their ratings.
EARLY_RATED_TURNS = 6
EARLY_WRITTEN_TURNS = 6
IDENTIFIED_RATINGS = 20

# The targets (issue 25).
TARGETS = {"honest_blocked_share": 0.01, "spammers_blocked_early_share": 0.95, "careless_detected_share": 0.90,
           "pasters_caught_early_share": 0.95, "share_paid_to_spammers_and_pasters": 0.03}


@dataclass(frozen=True)
class RatingRecord:
    """One rating as the monitor sees it: the author (by simulated name), in the order it was given."""

    author: str
    relevant: bool
    useful: bool
    rater: str = ""


@dataclass(frozen=True)
class TurnRecord:
    """One submitted turn as the monitor sees it: its writer, whether it counts as machine-written
    (``monitor.machine_written``), and the rating it gave the turn before it, if any."""

    writer: str
    machine_written: bool = False
    rating: Optional[RatingRecord] = None


@dataclass(frozen=True)
class Replay:
    """What one policy does to every worker: after how many rated (and written) turns it blocks them, the
    bonuses it pays, and after how many ratings the trust model identifies a rater."""

    policy: Policy
    blocked_after: dict[str, int]  # author -> number of rated turns when first blocked
    bonus_turns: dict[str, int]  # author -> rated turns that earn a bonus
    blocked_written: dict[str, int] = field(default_factory=dict)  # worker -> turns written when first blocked
    identified_after: dict[str, int] = field(default_factory=dict)  # rater -> ratings given when identified
    written: dict[str, int] = field(default_factory=dict)  # worker -> turns written until blocked (or in all)
    # author -> each rating received as (answer pair, its rater's trust when it was judged): what any rule
    # could have known (bench.quality counts the trusted no/no answers a spammer's first ratings hold)
    received: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


def gold_records(crowd: Iterable[SimWorker], answers: Mapping[str, Mapping[str, tuple[bool, bool]]],
                 model: reliability.Model = reliability.Model()) -> dict[str, reliability.RaterRecord]:
    """Each worker's record as a rater when the batch starts: what their gold answers at onboarding taught
    (``turkflow.quality.gold.teach``, as the onboarding page runs it)."""
    return {w.name: gold.teach(model, reliability.RaterRecord(), w.role, answers[w.name])
            for w in crowd if w.name in answers}


def replay(policy: Policy, stream: Iterable[TurnRecord | RatingRecord],
           model: reliability.Model = reliability.Model(),
           start: Mapping[str, reliability.RaterRecord] = MappingProxyType({})) -> Replay:
    """Run the monitor over the submitted turns in order, as the pipeline does live: the machine-written rule
    on each turn's writer (``judge_writing``), then the rating it carries teaches about its rater and judges
    the rated author (``evaluate_rating``). A bare ``RatingRecord`` is a turn of an unknown writer. ``start``:
    the raters' records when the batch starts (``gold_records``)."""
    received: dict[str, list[RatingRecord]] = {}
    raters: dict[str, reliability.RaterRecord] = dict(start)
    machine: dict[str, list[bool]] = {}
    blocked_after: dict[str, int] = {}
    blocked_written: dict[str, int] = {}
    identified_after: dict[str, int] = {name: 0 for name, record in start.items() if record.verdict}
    bonus_turns: dict[str, int] = {}
    written: dict[str, int] = {}
    seen: dict[str, list[tuple[int, float]]] = {}

    def block(worker: str) -> None:
        if worker not in blocked_after:
            blocked_after[worker] = len(received.get(worker, []))
            blocked_written[worker] = len(machine.get(worker, []))

    for item in stream:
        turn = item if isinstance(item, TurnRecord) else TurnRecord(writer=item.rater, rating=item)
        if turn.writer:
            mine = machine.setdefault(turn.writer, [])
            mine.append(turn.machine_written)
            if turn.writer not in blocked_after:
                written[turn.writer] = len(mine)
                if judge_typing(policy, mine):
                    block(turn.writer)
        rating = turn.rating
        if rating is None:
            continue
        earlier = received.setdefault(rating.author, [])
        quality = reliability.author_quality(model, [
            (reliability.answer_of(r.relevant, r.useful), raters.get(r.rater, _NEW).trust(model))
            for r in earlier[-LEARN_FROM:]])
        before = raters.get(rating.rater, _NEW)
        after = reliability.learn(model, before, reliability.answer_of(rating.relevant, rating.useful), quality)
        raters[rating.rater] = after
        if after.verdict and not before.verdict:
            identified_after[rating.rater] = after.ratings
        earlier.append(rating)
        seen.setdefault(rating.author, []).append((reliability.answer_of(rating.relevant, rating.useful),
                                                   after.trust(model)))
        now = policy.stage(len(earlier))
        judged = earlier[-now.reads:]
        outcome, _, _ = decide(now, [r.relevant for r in judged], [r.useful for r in judged],
                               [raters.get(r.rater, _NEW).trust(model) for r in judged], model)
        if outcome == "bonus" and policy.weighted and raters.get(rating.author, _NEW).verdict:
            outcome = "none"
        if outcome == "block":
            block(rating.author)
        elif outcome == "bonus" and rating.author not in blocked_after:
            bonus_turns[rating.author] = bonus_turns.get(rating.author, 0) + 1
    return Replay(policy=policy, blocked_after=blocked_after, bonus_turns=bonus_turns,
                  blocked_written=blocked_written, identified_after=identified_after, written=written,
                  received=seen)


_NEW = reliability.RaterRecord()


@dataclass(frozen=True)
class Efficacy:
    """A block policy judged against the hidden truth about who writes badly, rates badly or pastes."""

    policy: str
    bad_workers: int
    blocked: int
    true_blocks: int
    precision: Optional[float]
    recall: Optional[float]
    honest_workers: int
    honest_blocked: int
    honest_blocked_share: Optional[float]
    spammers: int
    spammers_blocked_early: int  # within EARLY_RATED_TURNS rated turns
    spammers_blocked_early_share: Optional[float]
    median_rated_turns_before_block: Optional[float]  # over blocked bad workers
    blocked_by_behaviour: dict[str, int]
    bonus_cents: int
    bonus_cents_to_bad: int
    undetermined: int  # workers the live policy stopped before this one decided about them
    careless_raters: int = 0  # careless and harsh raters
    careless_detected: int = 0  # identified within IDENTIFIED_RATINGS of their ratings
    careless_detected_share: Optional[float] = None
    honest_raters_identified: int = 0  # honest workers the trust model wrongly identified
    pasters: int = 0
    pasters_caught_early: int = 0  # blocked or sent to review within EARLY_WRITTEN_TURNS written turns
    pasters_caught_early_share: Optional[float] = None
    share_paid_to_spammers_and_pasters: Optional[float] = None  # rewards and bonuses (replays: estimated)

    def misses(self) -> list[str]:
        """The targets of issue 25 this policy misses (a share with nobody to measure it on is not missed)."""
        missed = []
        for name, bound in TARGETS.items():
            value = getattr(self, name)
            at_most = name in ("honest_blocked_share", "share_paid_to_spammers_and_pasters")
            if value is not None and (value > bound if at_most else value < bound):
                missed.append(name)
        return missed

    def meets_target(self) -> bool:
        return not self.misses()


def judge(crowd: Iterable[SimWorker], blocked_after: dict[str, int], bonus_turns: dict[str, int],
          policy: Policy, stopped: frozenset[str] = frozenset(), *, blocked_written: Optional[dict[str, int]] = None,
          identified_after: Optional[dict[str, int]] = None, written: Optional[dict[str, int]] = None,
          reward_cents: Optional[int] = None, paid_share: Optional[float] = None) -> Efficacy:
    """Compare who a policy blocked with who really writes badly. ``stopped``: workers whose ratings end
    early because the live policy blocked them. ``written`` (turns each worker wrote until blocked) and
    ``reward_cents`` estimate the share of pay to spammers and pasters, unless ``paid_share`` (live) is given."""
    workers = list(crowd)
    bad = [w for w in workers if w.bad_writer]
    honest = [w for w in workers if w.behaviour == Behaviour.honest]
    spammers = [w for w in workers if w.behaviour == Behaviour.spammer]
    raters = [w for w in workers if w.behaviour in (Behaviour.careless, Behaviour.harsh)]
    pasters = [w for w in workers if w.behaviour == Behaviour.paster]
    blocked = [w for w in workers if w.name in blocked_after]
    true_blocks = [w for w in blocked if w.bad_writer]
    honest_blocked = [w for w in honest if w.name in blocked_after]
    early = [w for w in spammers if blocked_after.get(w.name, EARLY_RATED_TURNS + 1) <= EARLY_RATED_TURNS]
    identified_after = identified_after or {}
    detected = [w for w in raters if identified_after.get(w.name, IDENTIFIED_RATINGS + 1) <= IDENTIFIED_RATINGS]
    blocked_written = blocked_written or {}
    caught = [w for w in pasters if blocked_written.get(w.name, EARLY_WRITTEN_TURNS + 1) <= EARLY_WRITTEN_TURNS]
    bad_names = {w.name for w in bad}
    bonus_cents = policy.bonus_cents
    if paid_share is None and written is not None and reward_cents is not None:
        pay = {w.name: written.get(w.name, 0) * reward_cents + bonus_turns.get(w.name, 0) * bonus_cents
               for w in workers}
        paid_share = _share(sum(pay[w.name] for w in spammers + pasters), sum(pay.values()))
    return Efficacy(
        policy=policy.text,
        bad_workers=len(bad),
        blocked=len(blocked),
        true_blocks=len(true_blocks),
        precision=_share(len(true_blocks), len(blocked)),
        recall=_share(len(true_blocks), len(bad)),
        honest_workers=len(honest),
        honest_blocked=len(honest_blocked),
        honest_blocked_share=_share(len(honest_blocked), len(honest)),
        spammers=len(spammers),
        spammers_blocked_early=len(early),
        spammers_blocked_early_share=_share(len(early), len(spammers)),
        median_rated_turns_before_block=(
            statistics.median(blocked_after[w.name] for w in true_blocks) if true_blocks else None),
        blocked_by_behaviour={b.value: sum(1 for w in blocked if w.behaviour == b) for b in Behaviour},
        bonus_cents=sum(bonus_turns.values()) * bonus_cents,
        bonus_cents_to_bad=sum(n for name, n in bonus_turns.items() if name in bad_names) * bonus_cents,
        undetermined=len(stopped - set(blocked_after)),
        careless_raters=len(raters),
        careless_detected=len(detected),
        careless_detected_share=_share(len(detected), len(raters)),
        honest_raters_identified=sum(1 for w in honest if w.name in identified_after),
        pasters=len(pasters),
        pasters_caught_early=len(caught),
        pasters_caught_early_share=_share(len(caught), len(pasters)),
        share_paid_to_spammers_and_pasters=paid_share,
    )


def compare(crowd: list[SimWorker], stream: list[TurnRecord | RatingRecord], policies: Iterable[Policy],
            stopped: frozenset[str] = frozenset(), reward_cents: Optional[int] = None,
            model: reliability.Model = reliability.Model(),
            start: Mapping[str, reliability.RaterRecord] = MappingProxyType({})) -> list[Efficacy]:
    results = []
    for policy in policies:
        outcome = replay(policy, stream, model, start)
        results.append(judge(crowd, outcome.blocked_after, outcome.bonus_turns, policy, stopped,
                             blocked_written=outcome.blocked_written, identified_after=outcome.identified_after,
                             written=outcome.written, reward_cents=reward_cents))
    return results


def _share(part: int, whole: int) -> Optional[float]:
    return round(part / whole, 4) if whole else None
