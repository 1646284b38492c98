"""The statistics of side-by-side comparisons (issue 38, item 4), on votes alone: the Bradley-Terry fit with
ties against cases worked by hand, the bootstrap interval's coverage on simulated votes, the pairs' tests with
Holm's correction, position bias, each judge's agreement with the others, how uncertain each pair's order
still is (what the adaptive draw reads), and when a judge's next unit is a known-answer pair."""

from __future__ import annotations

import math

import numpy as np
import pytest

from turkflow.protocols.compare import ranking
from turkflow.protocols.compare.pairs import FLOOR, gold_due, pair_weights
from turkflow.protocols.compare.ranking import Vote, count


def votes_of(left: str, right: str, choice: str, n: int, judge: object = None) -> list[Vote]:
    return [Vote(left, right, choice, judge)] * n


def test_two_systems_fit_their_closed_form_six_wins_two_losses_four_ties():
    """With two systems Davidson's model is saturated: P(win) = 6/12, P(loss) = 2/12, P(tie) = 4/12, so
    exp(s_a - s_b) = 6/2 and nu = 4 / sqrt(6 * 2)."""
    votes = votes_of("a", "b", "left", 6) + votes_of("b", "a", "left", 2) + votes_of("a", "b", "tie", 4)
    fitted = ranking.fit(count(["a", "b"], votes), ridge=0)
    assert fitted.strength[0] - fitted.strength[1] == pytest.approx(math.log(3), abs=1e-6)
    assert fitted.tie == pytest.approx(4 / math.sqrt(12), abs=1e-6)
    assert fitted.strength.sum() == pytest.approx(0, abs=1e-9)


def test_a_cycle_of_three_with_a_tie_each_fits_equal_strengths_and_a_tie_of_two_thirds():
    """a beats b, b beats c and c beats a twice to once, with one tie each: by symmetry the strengths are
    equal, so a tie has probability nu / (2 + nu), which the likelihood sets to the share of ties, 1/4."""
    votes = []
    for winner, loser in (("a", "b"), ("b", "c"), ("c", "a")):
        votes += votes_of(winner, loser, "left", 2) + votes_of(loser, winner, "left", 1)
        votes += votes_of(winner, loser, "tie", 1)
    fitted = ranking.fit(count(["a", "b", "c"], votes), ridge=0)
    assert np.allclose(fitted.strength, 0, atol=1e-6)
    assert fitted.tie == pytest.approx(2 / 3, abs=1e-6)


def test_the_fit_meets_its_likelihood_equations_each_systems_wins_as_expected():
    """At the maximum each system's wins plus half its ties equal what the fit expects of them (the score
    equations of the strengths), and the ties number as many as expected (that of log nu)."""
    systems = ["a", "b", "c", "d"]
    votes = (votes_of("a", "b", "left", 7) + votes_of("b", "a", "left", 3) + votes_of("a", "c", "tie", 2)
             + votes_of("c", "a", "left", 5) + votes_of("b", "c", "left", 4) + votes_of("c", "d", "right", 6)
             + votes_of("d", "a", "left", 2) + votes_of("b", "d", "tie", 3) + votes_of("d", "b", "right", 1))
    counts = count(systems, votes)
    fitted = ranking.fit(counts, ridge=0)
    s, nu = fitted.strength, fitted.tie
    scored = np.zeros(4)
    expected = np.zeros(4)
    ties_expected = 0.0
    for k, (i, j) in enumerate(counts.pairs):
        terms = np.array([math.exp(s[i]), math.exp(s[j]), nu * math.exp((s[i] + s[j]) / 2)])
        p = terms / terms.sum()
        n = counts.votes[k]
        scored[i] += counts.first[k] + counts.ties[k] / 2
        scored[j] += counts.second[k] + counts.ties[k] / 2
        expected[i] += n * (p[0] + p[2] / 2)
        expected[j] += n * (p[1] + p[2] / 2)
        ties_expected += n * p[2]
    assert np.allclose(scored, expected, atol=1e-5)
    assert counts.ties.sum() == pytest.approx(ties_expected, abs=1e-5)


def simulated_votes(rng: np.random.Generator, truth: dict[str, float], n: int, nu: float) -> list[Vote]:
    systems = list(truth)
    votes = []
    for _ in range(n):
        a, b = rng.choice(len(systems), 2, replace=False)
        left, right = systems[a], systems[b]
        terms = np.array([math.exp(truth[left]), math.exp(truth[right]),
                          nu * math.exp((truth[left] + truth[right]) / 2)])
        votes.append(Vote(left, right, rng.choice(["left", "right", "tie"], p=terms / terms.sum())))
    return votes


def test_the_bootstrap_95_percent_interval_covers_the_true_strength_about_95_percent_of_the_time():
    truth = {"a": -0.6, "b": -0.2, "c": 0.2, "d": 0.6}  # mean 0, as the fit reports strengths
    rng = np.random.default_rng(38)
    covered = checked = 0
    for rep in range(80):
        counts = count(list(truth), simulated_votes(rng, truth, 300, nu=0.4))
        low, high = ranking.bootstrap(counts, rounds=200, seed=rep)
        for n, system in enumerate(truth):
            covered += low[n] <= truth[system] <= high[n]
            checked += 1
    assert 0.90 <= covered / checked <= 0.99, covered / checked


def test_each_pair_is_tested_on_its_decisive_votes_and_a_clear_winner_stays_significant_after_correction():
    votes = (votes_of("a", "b", "left", 20) + votes_of("b", "a", "left", 2) + votes_of("a", "b", "tie", 6)
             + votes_of("b", "c", "left", 6) + votes_of("c", "b", "left", 5) + votes_of("a", "c", "left", 1))
    grid = {(p.a, p.b): p for p in ranking.win_grid(count(["a", "b", "c"], votes))}
    ab = grid[("a", "b")]
    assert (ab.wins, ab.losses, ab.ties) == (20, 2, 6) and ab.win_rate == pytest.approx(23 / 28)
    assert ab.p_value == pytest.approx(2 * sum(math.comb(22, k) for k in range(3)) / 2 ** 22)
    assert ab.significant() and not grid[("b", "c")].significant()
    assert grid[("a", "c")].p_holm >= grid[("a", "c")].p_value


def test_position_bias_is_the_share_of_decisive_votes_for_the_left_with_its_interval():
    votes = votes_of("a", "b", "left", 70) + votes_of("b", "a", "right", 30) + votes_of("a", "b", "tie", 9)
    share = ranking.left_share(votes)
    assert (share.share, share.n) == (0.7, 100)
    assert share.low < 0.7 < share.high and share.low > 0.5 and share.p_value < 0.001


def test_a_judge_agrees_when_they_pick_what_most_other_judges_pick_on_the_same_two_systems():
    votes = (votes_of("a", "b", "left", 3, judge="one") + votes_of("b", "a", "right", 3, judge="two")
             + votes_of("a", "b", "right", 2, judge="contrary") + votes_of("a", "b", "tie", 4, judge="undecided"))
    agreement = ranking.agreement(votes)
    assert agreement["one"] == (3, 3) and agreement["two"] == (3, 3) and agreement["contrary"] == (0, 2)
    assert "undecided" not in agreement  # no decisive vote compares nothing


def test_a_pair_whose_votes_split_is_less_sure_than_one_with_a_clear_winner():
    systems = ["a", "b", "c"]
    votes = (votes_of("a", "b", "left", 30) + votes_of("b", "a", "left", 2)
             + votes_of("b", "c", "left", 9) + votes_of("c", "b", "left", 8))
    counts = count(systems, votes)
    chance = dict(zip(counts.pairs, ranking.uncertainty(counts, ranking.fit(counts))))
    assert chance[(1, 2)] > 0.2 > 0.01 > chance[(0, 1)]
    assert chance[(0, 2)] < 0.01  # never compared directly, but a beat b by far and b is about c
    weights = pair_weights(systems, [("a", "b"), ("b", "c"), ("a", "c")], votes, "adaptive")
    assert weights[("b", "c")] > 0.2 and weights[("a", "c")] == weights[("a", "b")] == FLOOR
    assert pair_weights(systems, [("a", "b"), ("b", "c"), ("a", "c")], votes, "uniform") == {
        ("a", "b"): 0.0, ("b", "c"): 0.0, ("a", "c"): 1.0}


def test_known_answer_pairs_come_before_each_probation_vote_then_once_in_every_few_units():
    due, earlier = [], []
    for _ in range(30):
        gold = gold_due(earlier, probation=3, gold_every=4)
        due.append(gold)
        earlier.append(gold)
    shown = "".join("G" if g else "v" for g in due)
    assert shown.startswith("GvGvGv") and shown[6:] == "vvGvvvGvvvGvvvGvvvGvvvGv"
    assert not any(gold_due([False] * 5, probation=0, gold_every=0) for _ in range(3))
