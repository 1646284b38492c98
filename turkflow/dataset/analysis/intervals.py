"""Intervals and tests for telling systems apart: what a report comparing agents (``turkflow agents report``), or
any other systems, says with its uncertainty.

The unit is what was drawn at random, never a part of it: a conversation, not its turns (one person judges all
the turns of a dialog and one task shapes them, so its turns are not independent, and resampling turns would
make the intervals too narrow). A ``Sample`` holds one system's units and reads its statistic off any resample
of them:

- ``Ratio``: a ratio of sums over the units, which covers means (a success rate: successes over
  conversations; a mean rating: the ratings' sum over their count; tokens per turn);
- ``Pooled``: a percentile of the values the units hold, pooled (the latency p95 of an agent's calls);
- ``Over``: any function of a list of units, for statistics of a whole fit (a ranking).

``estimate`` gives a statistic with its bootstrap percentile interval (``scipy.stats.bootstrap``: units drawn
with replacement). ``compare`` gives every pair's difference with its bootstrap interval (each system's units
resampled on their own) and a permutation test of the same statistic (``scipy.stats.permutation_test``: the
units of the two shuffled between them, which is what "no difference" means). Several pairs are one family:
the p-values are corrected by Holm's step-down method and the intervals widened by Bonferroni's (confidence
1 - alpha/m), so a pair is *told apart* when its corrected test rejects and its interval excludes 0, and the
chance of telling apart any pair of equal systems stays at most alpha.

Everything is seeded: the same units and seed give the same numbers, whatever order they are asked in.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Protocol, Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 2000  # bootstrap resamples: the 2.5% and 97.5% points move by about 1% of the interval between seeds
PERMUTATIONS = 9999  # the smallest p-value a permutation test can give is 1 / (PERMUTATIONS + 1)


class Sample(Protocol):
    """One system's units and the statistic of any resample of them."""

    @property
    def size(self) -> int: ...

    def at(self, chosen: np.ndarray) -> np.ndarray:
        """The statistic of each resample: ``chosen`` holds unit indices, one resample per last-axis row."""
        ...

    def joined(self, other: Any) -> "Sample":
        """Both samples' units as one (the permutation test shuffles them)."""
        ...


@dataclass(frozen=True)
class Ratio:
    """Per unit a numerator and a positive denominator; the statistic is the sum of one over the sum of the
    other. Units whose denominator is 0 (a conversation with no rating) say nothing and are left out."""

    num: np.ndarray
    den: np.ndarray

    @classmethod
    def of(cls, pairs: Iterable[tuple[float, float]]) -> "Ratio":
        kept = [(float(n), float(d)) for n, d in pairs if d > 0]
        return cls(np.array([n for n, _ in kept], dtype=float), np.array([d for _, d in kept], dtype=float))

    @classmethod
    def mean(cls, values: Iterable[float]) -> "Ratio":
        """The mean of one value per unit (None: the unit has no value, left out)."""
        return cls.of((v, 1.0) for v in values if v is not None)

    @property
    def size(self) -> int:
        return len(self.num)

    def at(self, chosen: np.ndarray) -> np.ndarray:
        return self.num[chosen].sum(axis=-1) / self.den[chosen].sum(axis=-1)

    def joined(self, other: "Ratio") -> "Ratio":
        return Ratio(np.concatenate([self.num, other.num]), np.concatenate([self.den, other.den]))


@dataclass(frozen=True)
class Pooled:
    """Per unit some values; the statistic is their ``percentile`` (0-100) over the units chosen, pooled. Units
    with no value are left out."""

    values: tuple[np.ndarray, ...]
    percentile: float

    @classmethod
    def of(cls, per_unit: Iterable[Sequence[float]], percentile: float) -> "Pooled":
        return cls(tuple(np.asarray(v, dtype=float) for v in per_unit if len(v)), percentile)

    @property
    def size(self) -> int:
        return len(self.values)

    def at(self, chosen: np.ndarray) -> np.ndarray:
        rows = chosen.reshape(-1, chosen.shape[-1])
        found = [np.percentile(np.concatenate([self.values[i] for i in row]), self.percentile) for row in rows]
        return np.asarray(found).reshape(chosen.shape[:-1])

    def joined(self, other: "Pooled") -> "Pooled":
        return Pooled(self.values + other.values, self.percentile)


@dataclass(frozen=True)
class Over:
    """Any statistic of a list of units (a model fitted to them): general, and as slow as the function."""

    units: tuple[Any, ...]
    statistic: Callable[[Sequence[Any]], float]

    @property
    def size(self) -> int:
        return len(self.units)

    def at(self, chosen: np.ndarray) -> np.ndarray:
        rows = chosen.reshape(-1, chosen.shape[-1])
        return np.asarray([self.statistic([self.units[i] for i in row]) for row in rows],
                          dtype=float).reshape(chosen.shape[:-1])

    def joined(self, other: "Over") -> "Over":
        return Over(self.units + other.units, self.statistic)


@dataclass(frozen=True)
class Estimate:
    """A statistic over ``units`` with its interval (None below two units: one unit shows no spread)."""

    value: Optional[float]
    low: Optional[float]
    high: Optional[float]
    units: int
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict[str, Any]:
        return {"value": _rounded(self.value), "low": _rounded(self.low), "high": _rounded(self.high),
                "units": self.units}


@dataclass(frozen=True)
class Difference:
    """``a``'s statistic minus ``b``'s, with its interval at ``confidence`` (Bonferroni's, for the family), the
    permutation test's two-sided p-value and the same corrected by Holm's method over the family."""

    a: str
    b: str
    value: Optional[float]
    low: Optional[float]
    high: Optional[float]
    p: Optional[float]
    p_adjusted: Optional[float]
    confidence: float
    alpha: float

    @property
    def told_apart(self) -> bool:
        """The corrected test rejects "no difference" and the interval excludes 0."""
        return (self.p_adjusted is not None and self.p_adjusted < self.alpha and self.low is not None
                and (self.low > 0 or self.high < 0))

    @property
    def better(self) -> Optional[str]:
        """The system told better (the larger statistic), or None when the two are not told apart."""
        return (self.a if self.value > 0 else self.b) if self.told_apart else None

    def as_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "difference": _rounded(self.value), "low": _rounded(self.low),
                "high": _rounded(self.high), "confidence": round(self.confidence, 6), "p": _rounded(self.p, 6),
                "p_adjusted": _rounded(self.p_adjusted, 6), "told_apart": self.told_apart}


def _rounded(value: Optional[float], digits: int = 4) -> Optional[float]:
    return None if value is None else round(float(value), digits)


def rng(seed: int, *labels: str) -> np.random.Generator:
    """A generator for one question (its ``labels``: the measure, the systems): the same seed gives each
    question the same draws in any order of asking."""
    return np.random.default_rng([seed, *(zlib.crc32(label.encode()) for label in labels)])


def _indices(sample: Sample) -> np.ndarray:
    return np.arange(sample.size)


def estimate(sample: Sample, *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0,
             label: str = "") -> Estimate:
    """The statistic over all the units, and its bootstrap percentile interval."""
    if sample.size == 0:
        return Estimate(None, None, None, 0, confidence)
    value = float(sample.at(_indices(sample)))
    if sample.size < 2:
        return Estimate(value, None, None, 1, confidence)
    found = stats.bootstrap((_indices(sample),), lambda chosen, axis: sample.at(chosen.astype(int)),
                            vectorized=True, n_resamples=resamples, confidence_level=confidence,
                            method="percentile", rng=rng(seed, "estimate", label))
    low, high = found.confidence_interval
    return Estimate(value, float(low), float(high), sample.size, confidence)


def difference(a: Sample, b: Sample, *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0,
               label: str = "") -> tuple[Optional[float], Optional[float], Optional[float]]:
    """``a``'s statistic minus ``b``'s and its bootstrap percentile interval, each sample's units resampled on
    their own (None where a sample has fewer than two units)."""
    if a.size == 0 or b.size == 0:
        return None, None, None
    value = float(a.at(_indices(a)) - b.at(_indices(b)))
    if a.size < 2 or b.size < 2:
        return value, None, None
    found = stats.bootstrap((_indices(a), _indices(b)),
                            lambda x, y, axis: a.at(x.astype(int)) - b.at(y.astype(int)),
                            vectorized=True, paired=False, n_resamples=resamples, confidence_level=confidence,
                            method="percentile", rng=rng(seed, "difference", label))
    low, high = found.confidence_interval
    return value, float(low), float(high)


def permutation_p(a: Sample, b: Sample, *, permutations: int = PERMUTATIONS, seed: int = 0,
                  label: str = "") -> Optional[float]:
    """The two-sided p-value of "a and b's units come from one population", by the difference of the
    statistic over random splits of their units (None where a sample is empty)."""
    if a.size == 0 or b.size == 0:
        return None
    both = a.joined(b)
    found = stats.permutation_test(
        (np.arange(a.size), np.arange(a.size, a.size + b.size)),
        lambda x, y, axis: both.at(x.astype(int)) - both.at(y.astype(int)),
        permutation_type="independent", vectorized=True, n_resamples=permutations, alternative="two-sided",
        rng=rng(seed, "permutation", label))
    return float(found.pvalue)


def holm(p_values: Sequence[Optional[float]]) -> list[Optional[float]]:
    """Holm's step-down correction of a family of p-values (None: a comparison that could not be made, not
    counted): the k-th smallest of m is multiplied by m - k + 1, and none is below the one before it."""
    given = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for k, (p, i) in enumerate(given):
        running = max(running, min(1.0, (len(given) - k) * p))
        adjusted[i] = running
    return adjusted


def compare(samples: dict[str, Sample], *, alpha: float = 1 - CONFIDENCE, resamples: int = RESAMPLES,
            permutations: int = PERMUTATIONS, seed: int = 0, label: str = "") -> list[Difference]:
    """Every pair of systems (in the order given: the first of a pair minus the second) as one family."""
    pairs = list(itertools.combinations(samples, 2))
    counted = sum(1 for a, b in pairs if samples[a].size and samples[b].size)
    confidence = 1 - alpha / max(counted, 1)
    found = []
    for a, b in pairs:
        pair_label = f"{label}:{a}:{b}"
        value, low, high = difference(samples[a], samples[b], confidence=confidence, resamples=resamples,
                                      seed=seed, label=pair_label)
        found.append((a, b, value, low, high, permutation_p(samples[a], samples[b], permutations=permutations,
                                                              seed=seed, label=pair_label)))
    adjusted = holm([p for *_, p in found])
    return [Difference(a, b, value, low, high, p, p_adj, confidence, alpha)
            for (a, b, value, low, high, p), p_adj in zip(found, adjusted)]
