"""The statistics of comparisons (turkflow.dataset.analysis.intervals): hand-computed cases, and the intervals'
coverage and the tests' error rate on simulated systems of known quality."""

from __future__ import annotations

import numpy as np
import pytest

from turkflow.dataset.analysis.intervals import (Difference, Over, Pooled, Ratio, compare, difference, estimate,
                                                 holm, permutation_p)


def test_a_ratio_is_the_sum_over_the_sum_and_leaves_out_units_without_a_denominator():
    ratings = Ratio.of([(9, 2), (5, 1), (0, 0), (2, 1)])  # a conversation rated 4.5 twice, one 5, one unrated, one 2
    assert ratings.size == 3
    assert estimate(ratings).value == pytest.approx(16 / 4)
    assert estimate(Ratio.mean([1, 0, None, 1, 1])).value == pytest.approx(0.75)


def test_an_estimate_has_no_interval_below_two_units_and_nothing_without_units():
    assert estimate(Ratio.mean([])).value is None
    one = estimate(Ratio.mean([1]))
    assert (one.value, one.low, one.high, one.units) == (1.0, None, None, 1)


def test_an_interval_brackets_its_estimate_and_is_the_same_for_the_same_seed():
    sample = Ratio.mean([1, 0, 1, 1, 0, 1, 1, 1, 0, 1])
    first, again = (estimate(sample, seed=s) for s in (3, 3))
    assert first == again
    assert first.low <= first.value <= first.high and 0 <= first.low < first.high <= 1


def test_a_pooled_percentile_reads_the_values_of_the_chosen_units_together():
    latencies = Pooled.of([[100, 300], [200], [], [400, 500, 600]], 50)
    assert latencies.size == 3
    assert estimate(latencies).value == pytest.approx(np.percentile([100, 300, 200, 400, 500, 600], 50))
    p95 = estimate(Pooled.of([[100, 300], [200], [400, 500, 600]], 95), seed=1)
    assert 200 <= p95.low < p95.value <= p95.high <= 600  # a resample may hold the one unit of 200 ms only


def test_any_statistic_of_the_units_gives_what_the_ratio_gives_for_a_mean():
    values = [3, 5, 4, 4, 1, 5, 2]
    general = estimate(Over(tuple(values), lambda chosen: float(np.mean(chosen))), seed=2, label="m")
    fast = estimate(Ratio.mean(values), seed=2, label="m")
    assert general == fast


def test_the_exact_permutation_test_of_three_successes_against_three_failures():
    """C(6, 3) = 20 splits of the six conversations, of which two are as far apart as the one seen: p = 2/20."""
    assert permutation_p(Ratio.mean([1, 1, 1]), Ratio.mean([0, 0, 0])) == pytest.approx(0.1)
    assert permutation_p(Ratio.mean([1, 0, 1]), Ratio.mean([1, 0, 1])) == pytest.approx(1.0)


def test_holm_multiplies_the_kth_smallest_by_m_minus_k_plus_1_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2, None, 0.9]) == [pytest.approx(0.4), None, pytest.approx(0.9)]
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_a_difference_is_the_first_minus_the_second_with_its_interval():
    value, low, high = difference(Ratio.mean([1] * 8 + [0] * 2), Ratio.mean([1] * 3 + [0] * 7), seed=5)
    assert value == pytest.approx(0.5)
    assert 0 < low < value < high <= 1


def test_told_apart_needs_the_corrected_test_and_an_interval_without_zero():
    kept = dict(a="a", b="b", value=0.2, confidence=0.95, alpha=0.05)
    assert Difference(low=0.05, high=0.35, p=0.01, p_adjusted=0.01, **kept).told_apart
    assert Difference(low=0.05, high=0.35, p=0.01, p_adjusted=0.01, **kept).better == "a"
    assert not Difference(low=-0.01, high=0.35, p=0.01, p_adjusted=0.01, **kept).told_apart
    assert not Difference(low=0.05, high=0.35, p=0.01, p_adjusted=0.06, **kept).told_apart


def test_several_pairs_are_one_family_their_intervals_widened_by_bonferroni():
    samples = {name: Ratio.mean(np.random.default_rng(n).binomial(1, 0.5, 30)) for n, name in enumerate("abc")}
    found = compare(samples, seed=1, permutations=999)
    assert [(d.a, d.b) for d in found] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert all(d.confidence == pytest.approx(1 - 0.05 / 3) for d in found)
    assert holm([d.p for d in found]) == [d.p_adjusted for d in found]
    two = compare({"a": samples["a"], "b": samples["b"]}, seed=1, permutations=999)
    assert two[0].confidence == pytest.approx(0.95)
    assert (two[0].high - two[0].low) < (found[0].high - found[0].low)


def test_the_95_percent_interval_covers_the_true_success_rate_in_about_95_of_100_simulated_batches():
    draws = np.random.default_rng(20).binomial(1, 0.6, size=(200, 60))
    covered = sum(e.low <= 0.6 <= e.high for e in (estimate(Ratio.mean(row), seed=i) for i, row in enumerate(draws)))
    assert 0.90 <= covered / 200 <= 0.99


def test_equal_systems_are_told_apart_in_about_5_percent_of_simulated_batches_and_different_ones_mostly():
    rng = np.random.default_rng(21)
    equal = [compare({"a": Ratio.mean(rng.binomial(1, 0.6, 60)), "b": Ratio.mean(rng.binomial(1, 0.6, 60))},
                     seed=i, permutations=499, resamples=500)[0].told_apart for i in range(200)]
    assert sum(equal) / 200 <= 0.08
    apart = [compare({"a": Ratio.mean(rng.binomial(1, 0.9, 60)), "b": Ratio.mean(rng.binomial(1, 0.5, 60))},
                     seed=i, permutations=499, resamples=500)[0] for i in range(50)]
    assert sum(d.better == "a" for d in apart) >= 48
