"""Quality policies compared on the same ratings: the collected ratings replayed through the monitor's rule.

One simulation collects the ratings every author received, in order. Replaying them through
``turkflow.quality.monitor.decide`` under another policy says which workers that policy would have
blocked and after how many rated turns, so one run compares many.

A policy is the monitor's (``turkflow.quality.monitor.Policy``), written ``k=5,p=0.5`` (window k,
threshold p), ``k=5,p=0.4 for 6, then k=20,p=0.4`` (a strict short window while a worker has at most 6
rated turns, a long one afterwards) or ``pooled k=6,p=0.5`` (the mean of relevance and usefulness together
against p); ``none`` never blocks (run a simulation live with it to collect every worker's full stream of
ratings).

The replay is exact up to the last rating an author actually received. A worker the live policy blocked
wrote nothing afterwards, so a policy that would have blocked them only later cannot be seen doing so:
the report counts such workers as *undetermined* for that policy.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Optional

from turkflow.quality.monitor import Policy, decide
from turkflow.simulator.crowd import Behaviour, SimWorker

# The policy the simulations found to meet the target with a quarter of the raters answering at random
# (bench/RESULTS.md): pooled means, a short strict window on probation, a long lenient one after it.
RECOMMENDED = "pooled k=6,p=0.5 for 6, then k=20,p=0.4"

# The paper's policy first, then the alternatives a lab would consider.
DEFAULT_POLICIES = ("k=5,p=0.5", "k=5,p=0.4", "k=6,p=0.4", "k=10,p=0.4", "k=5,p=0.5 for 6, then k=20,p=0.5",
                    "k=5,p=0.4 for 6, then k=20,p=0.4", "pooled k=5,p=0.5", RECOMMENDED)

# The target's horizon: a spammer should be blocked within this many rated turns.
EARLY_RATED_TURNS = 6


@dataclass(frozen=True)
class RatingRecord:
    """One rating as the monitor sees it: the author (by simulated name), in the order it was given."""

    author: str
    relevant: bool
    useful: bool


@dataclass(frozen=True)
class Replay:
    """What one policy does to every author: after how many rated turns it blocks them, and bonuses paid."""

    policy: Policy
    blocked_after: dict[str, int]  # author -> number of rated turns when first blocked
    bonus_turns: dict[str, int]  # author -> rated turns that earn a bonus


def replay(policy: Policy, ratings: Iterable[RatingRecord]) -> Replay:
    """Run the monitor's rule over each author's ratings in order, as ``evaluate_rating`` does live."""
    relevance: dict[str, list[bool]] = {}
    usefulness: dict[str, list[bool]] = {}
    blocked_after: dict[str, int] = {}
    bonus_turns: dict[str, int] = {}
    for rating in ratings:
        rel = relevance.setdefault(rating.author, [])
        use = usefulness.setdefault(rating.author, [])
        rel.append(rating.relevant)
        use.append(rating.useful)
        now = policy.stage(len(rel))
        outcome, _, _ = decide(now, rel[-now.reads:], use[-now.reads:])
        if outcome == "block":
            blocked_after.setdefault(rating.author, len(rel))
        elif outcome == "bonus":
            bonus_turns[rating.author] = bonus_turns.get(rating.author, 0) + 1
    return Replay(policy=policy, blocked_after=blocked_after, bonus_turns=bonus_turns)


@dataclass(frozen=True)
class Efficacy:
    """A block policy judged against the hidden truth about who writes badly."""

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

    def meets_target(self, early_share: float = 0.9, honest_share: float = 0.03) -> bool:
        """The issue's target: at least 90% of spammers blocked early, at most 3% of honest workers blocked."""
        return ((self.spammers_blocked_early_share or 0.0) >= early_share
                and (self.honest_blocked_share or 0.0) <= honest_share)


def judge(crowd: Iterable[SimWorker], blocked_after: dict[str, int], bonus_turns: dict[str, int],
          policy: Policy, stopped: frozenset[str] = frozenset()) -> Efficacy:
    """Compare who a policy blocked with who really writes badly. ``stopped``: workers whose ratings end
    early because the live policy blocked them."""
    workers = list(crowd)
    bad = [w for w in workers if w.bad_writer]
    honest = [w for w in workers if w.behaviour == Behaviour.honest]
    spammers = [w for w in workers if w.behaviour == Behaviour.spammer]
    blocked = [w for w in workers if w.name in blocked_after]
    true_blocks = [w for w in blocked if w.bad_writer]
    honest_blocked = [w for w in honest if w.name in blocked_after]
    early = [w for w in spammers if blocked_after.get(w.name, EARLY_RATED_TURNS + 1) <= EARLY_RATED_TURNS]
    bad_names = {w.name for w in bad}
    bonus_cents = policy.bonus_cents
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
    )


def compare(crowd: list[SimWorker], ratings: list[RatingRecord], policies: Iterable[Policy],
            stopped: frozenset[str] = frozenset()) -> list[Efficacy]:
    results = []
    for policy in policies:
        outcome = replay(policy, ratings)
        results.append(judge(crowd, outcome.blocked_after, outcome.bonus_turns, policy, stopped))
    return results


def _share(part: int, whole: int) -> Optional[float]:
    return round(part / whole, 4) if whole else None
