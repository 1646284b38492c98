"""What votes between systems add up to, as plain functions of the votes (no database): a Bradley-Terry fit with
ties, bootstrap intervals, the win-rate grid with a test per pair, the judges' position bias and each judge's
agreement with the others, and how uncertain the order of each pair of systems still is (``uncertainty``, which
the adaptive pair choice reads).

The model is Davidson's (1970) extension of Bradley-Terry to ties: system i of strength ``exp(s_i)`` beats j
with probability ``exp(s_i) / D``, ties with ``nu * exp((s_i + s_j) / 2) / D`` (D the sum of the three terms).
It is fitted by maximum likelihood with scipy's optimisers on the counts of each pair's outcomes, with the
gradient and the Hessian written out, and a weak Gaussian prior on the strengths and on log nu (``RIDGE``), so that a system
that won every vote, or votes with no tie, keep finite values. The bootstrap fits all its resamples in one call (their likelihoods add up and
share no parameter), so a thousand resamples of a few hundred votes take a fraction of a second.
``docs/protocols/compare.md`` says why this and not choix (no ties) or Elo updates (order-dependent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Callable, Hashable, Iterable, Optional, Sequence

import numpy as np
from scipy import stats
from scipy.optimize import minimize

from turkflow.dataset.analysis import intervals

LEFT, RIGHT, TIE = "left", "right", "tie"
RIDGE = 0.01  # the prior's weight on the squared parameters (a standard deviation of 7 logits)
LEVEL = 0.95


@dataclass(frozen=True)
class Vote:
    """One judgement: the systems shown on the left and on the right, and the judge's choice."""

    left: str
    right: str
    choice: str  # left, right or tie
    judge: Hashable = None

    @property
    def winner(self) -> Optional[str]:
        return self.left if self.choice == LEFT else self.right if self.choice == RIGHT else None


@dataclass(frozen=True)
class Counts:
    """The votes of each pair of systems (``pairs[k] = (i, j)``, i < j): wins of i, wins of j, ties."""

    systems: tuple[str, ...]
    pairs: tuple[tuple[int, int], ...]
    first: np.ndarray  # wins of the pair's first system
    second: np.ndarray
    ties: np.ndarray

    @property
    def votes(self) -> np.ndarray:
        return self.first + self.second + self.ties


def count(systems: Sequence[str], votes: Iterable[Vote]) -> Counts:
    """The votes between ``systems`` as counts per pair; a vote naming another system is an error."""
    index = {s: n for n, s in enumerate(systems)}
    pairs = tuple(combinations(range(len(systems)), 2))
    place = {pair: k for k, pair in enumerate(pairs)}
    first, second, ties = (np.zeros(len(pairs)) for _ in range(3))
    for vote in votes:
        a, b = index[vote.left], index[vote.right]
        k = place[(min(a, b), max(a, b))]
        if vote.choice == TIE:
            ties[k] += 1
        elif (vote.winner == vote.left) == (a < b):
            first[k] += 1
        else:
            second[k] += 1
    return Counts(tuple(systems), pairs, first, second, ties)


@dataclass(frozen=True)
class Fit:
    systems: tuple[str, ...]
    strength: np.ndarray  # log-strengths, mean 0
    tie: float  # Davidson's nu: how readily judges call a pair even


def fit(counts: Counts, ridge: float = RIDGE) -> Fit:
    """The maximum-likelihood fit of one set of votes, by Newton's method (scipy's trust-exact, with the
    Hessian the likelihood's information gives: a handful of steps)."""
    objective = _objective(counts, counts.first[None], counts.second[None], counts.ties[None], ridge)
    found = minimize(objective, _start(len(counts.systems), 1), jac=True, method="trust-exact",
                     hess=lambda x: _information(counts, x, ridge), options={"gtol": 1e-8})
    strength, nu = _parameters(found.x, len(counts.systems), 1)
    return Fit(counts.systems, strength[0], float(nu[0]))


def fit_many(counts: Counts, first: np.ndarray, second: np.ndarray, ties: np.ndarray,
             ridge: float = RIDGE) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood strengths (rows of ``(B, K)``, mean 0) and nu (``B``) of B sets of counts of the
    pairs of ``counts`` at once (arrays ``(B, pairs)``), by L-BFGS on the sum of their likelihoods."""
    found = minimize(_objective(counts, first, second, ties, ridge), _start(len(counts.systems), first.shape[0]),
                     jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-7, "ftol": 1e-14})
    return _parameters(found.x, len(counts.systems), first.shape[0])


def _start(size: int, rows: int) -> np.ndarray:
    start = np.zeros((rows, size + 1))
    start[:, size] = math.log(0.5)
    return start.ravel()


def _parameters(x: np.ndarray, size: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    x = x.reshape(rows, size + 1)
    return x[:, :size] - x[:, :size].mean(axis=1, keepdims=True), np.exp(x[:, size])


def _objective(counts: Counts, first: np.ndarray, second: np.ndarray, ties: np.ndarray,
               ridge: float) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The negative log-likelihood (with the prior) of B sets of counts and its gradient, of the parameters
    of all B flattened (each row: the K strengths, then log nu)."""
    size, rows = len(counts.systems), first.shape[0]
    i, j = (np.array([p[n] for p in counts.pairs], dtype=int) for n in (0, 1))
    total = first + second + ties
    # each pair's share of a system's gradient: +1 where the system is the pair's first (second) member
    as_first = np.zeros((len(counts.pairs), size))
    as_second = np.zeros((len(counts.pairs), size))
    as_first[np.arange(len(i)), i] = 1
    as_second[np.arange(len(j)), j] = 1

    def negative_log_likelihood(x: np.ndarray) -> tuple[float, np.ndarray]:
        x = x.reshape(rows, size + 1)
        s, log_nu = x[:, :size], x[:, size:]
        si, sj = s[:, i], s[:, j]
        even = (si + sj) / 2 + log_nu
        norm = np.logaddexp(np.logaddexp(si, sj), even)
        ll = first * (si - norm) + second * (sj - norm) + ties * (even - norm)
        tied = ties - total * np.exp(even - norm)
        grad_first = first - total * np.exp(si - norm) + tied / 2
        grad_second = second - total * np.exp(sj - norm) + tied / 2
        grad = np.empty((rows, size + 1))
        grad[:, :size] = grad_first @ as_first + grad_second @ as_second - 2 * ridge * s
        grad[:, size] = tied.sum(axis=1) - 2 * ridge * log_nu[:, 0]
        return float(-ll.sum() + ridge * np.sum(x ** 2)), -grad.ravel()

    return negative_log_likelihood


def _information(counts: Counts, x: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """The Fisher information of the parameters ``x`` (strengths, then log nu), ``(K+1, K+1)``, which is the
    Hessian of the negative log-likelihood: each pair's votes are a multinomial of three outcomes whose
    log-odds are linear in the parameters."""
    size = len(counts.systems)
    info = 2 * ridge * np.eye(size + 1)
    for k, (i, j) in enumerate(counts.pairs):
        n = counts.votes[k]
        if not n:
            continue
        design = np.zeros((3, size + 1))
        design[0, i], design[1, j] = 1, 1
        design[2, i] = design[2, j] = 0.5
        design[2, size] = 1
        eta = design @ x
        p = np.exp(eta - np.logaddexp.reduce(eta))
        info += n * design.T @ (np.diag(p) - np.outer(p, p)) @ design
    return info


def information(counts: Counts, found: Fit, ridge: float = RIDGE) -> np.ndarray:
    """The Fisher information at a fit."""
    return _information(counts, np.append(found.strength, math.log(found.tie)), ridge)


def uncertainty(counts: Counts, found: Fit) -> np.ndarray:
    """For each pair of systems, the chance that the fit orders them wrongly: ``P(N(0,1) > |d| / sd(d))`` with d
    the difference of their strengths and sd from the fit's information (so what other pairs say of them
    counts too). 0.5 for a pair nothing is known of."""
    covariance = np.linalg.pinv(information(counts, found))
    chances = []
    for i, j in counts.pairs:
        difference = found.strength[i] - found.strength[j]
        variance = covariance[i, i] + covariance[j, j] - 2 * covariance[i, j]
        chances.append(float(stats.norm.sf(abs(difference) / math.sqrt(max(variance, 1e-12)))))
    return np.array(chances)


def bootstrap(counts: Counts, rounds: int = 1000, seed: int = 0, level: float = LEVEL
              ) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals (low, high) of each system's strength from ``rounds`` resamples of the votes
    (each vote drawn with replacement, as many as there were)."""
    cells = np.concatenate([counts.first, counts.second, counts.ties])
    n = int(cells.sum())
    if n == 0:  # nothing to resample: no interval (nan)
        size = len(counts.systems)
        return np.full(size, np.nan), np.full(size, np.nan)
    drawn = np.random.default_rng(seed).multinomial(n, cells / n, size=rounds)
    pairs = len(counts.pairs)
    strength, _ = fit_many(counts, drawn[:, :pairs], drawn[:, pairs:2 * pairs], drawn[:, 2 * pairs:])
    tail = (1 - level) / 2 * 100
    return np.percentile(strength, tail, axis=0), np.percentile(strength, 100 - tail, axis=0)


@dataclass(frozen=True)
class PairResult:
    """Two systems' votes against each other: a's wins, b's wins, ties; a's win rate (a tie half a win); the
    exact binomial test of a's share of the decisive votes against one half, and its p-value after Holm's
    correction for the number of pairs tested."""

    a: str
    b: str
    wins: int
    losses: int
    ties: int
    win_rate: Optional[float]
    p_value: Optional[float]
    p_holm: Optional[float] = None

    def significant(self, alpha: float = 1 - LEVEL) -> bool:
        return self.p_holm is not None and bool(self.p_holm < alpha)


def win_grid(counts: Counts) -> list[PairResult]:
    rows = []
    for k, (i, j) in enumerate(counts.pairs):
        wins, losses, ties = int(counts.first[k]), int(counts.second[k]), int(counts.ties[k])
        n = wins + losses + ties
        decisive = wins + losses
        rows.append(PairResult(counts.systems[i], counts.systems[j], wins, losses, ties,
                               (wins + ties / 2) / n if n else None,
                               stats.binomtest(wins, decisive).pvalue if decisive else None))
    adjusted = intervals.holm([r.p_value for r in rows])
    return [PairResult(**{**vars(r), "p_holm": p}) for r, p in zip(rows, adjusted)]


@dataclass(frozen=True)
class Share:
    """A share of ``n`` votes with its interval (Wilson's) and the exact test against one half."""

    share: Optional[float]
    low: Optional[float]
    high: Optional[float]
    n: int
    p_value: Optional[float]


def left_share(votes: Sequence[Vote], level: float = LEVEL) -> Share:
    """Position bias: the share of decisive votes that picked the dialog shown on the left."""
    decisive = [v for v in votes if v.choice != TIE]
    left = sum(1 for v in decisive if v.choice == LEFT)
    if not decisive:
        return Share(None, None, None, 0, None)
    test = stats.binomtest(left, len(decisive))
    interval = test.proportion_ci(confidence_level=level, method="wilson")
    return Share(left / len(decisive), interval.low, interval.high, len(decisive), test.pvalue)


def agreement(votes: Sequence[Vote]) -> dict[Hashable, tuple[int, int]]:
    """Each judge's (agreed, compared): of their decisive votes, those that pick the winner most of the other
    judges' decisive votes on the same two systems pick (a pair the others split evenly, or never judged,
    compares nothing)."""
    tally: dict[tuple[str, str], dict[str, int]] = {}
    mine: dict[tuple[Hashable, tuple[str, str]], dict[str, int]] = {}
    for v in votes:
        if v.winner is None:
            continue
        pair = tuple(sorted((v.left, v.right)))
        tally.setdefault(pair, {}).setdefault(v.winner, 0)
        tally[pair][v.winner] += 1
        mine.setdefault((v.judge, pair), {}).setdefault(v.winner, 0)
        mine[(v.judge, pair)][v.winner] += 1
    found: dict[Hashable, tuple[int, int]] = {}
    for (judge, pair), given in mine.items():
        others = {s: tally[pair].get(s, 0) - given.get(s, 0) for s in pair}
        agreed, compared = found.get(judge, (0, 0))
        if others[pair[0]] != others[pair[1]]:
            majority = max(pair, key=lambda s: others[s])
            agreed += given.get(majority, 0)
            compared += sum(given.values())
        found[judge] = (agreed, compared)
    return found


def kendall_tau(strength: Sequence[float], truth: Sequence[float]) -> float:
    """Kendall's tau between a fitted order and the true one (1: the same order)."""
    return float(stats.kendalltau(strength, truth).statistic)
