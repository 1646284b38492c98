"""Frames goals: templates with a probability of success, drawn from the requester's database."""

from __future__ import annotations

import math
import random

import pytest

from turkflow.errors import InvalidInput
from turkflow.protocols.frames.domain import load_domain
from turkflow.protocols.frames.goals import Template, Slot, draw_goal, generate, goal_from_dict


@pytest.fixture(scope="module")
def domain():
    return load_domain()


def binomial_interval(n: int, p: float, confidence: float = 0.99) -> tuple[int, int]:
    """The central interval holding ``confidence`` of Binomial(n, p): counts below lo or above hi are each
    at most (1 - confidence) / 2 likely."""
    tail = (1 - confidence) / 2
    pmf = [math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)]
    below = 0.0
    lo = 0
    while below + pmf[lo] <= tail:
        below += pmf[lo]
        lo += 1
    above = 0.0
    hi = n
    while above + pmf[hi] <= tail:
        above += pmf[hi]
        hi -= 1
    return lo, hi


def first_constraints_match(goal, db) -> bool:
    return bool(db.matching(goal.constraints))


def test_with_p_zero_no_goals_first_constraints_match_the_database(domain):
    goals = generate(domain.templates, domain.db, 200, 0.0, random.Random(7))
    assert len(goals) == 200 and not any(first_constraints_match(g, domain.db) for g in goals)
    assert all(not g.feasible and g.matches == 0 for g in goals)


def test_with_p_one_every_goals_first_constraints_match(domain):
    goals = generate(domain.templates, domain.db, 200, 1.0, random.Random(7))
    assert all(first_constraints_match(g, domain.db) and g.feasible and g.matches > 0 for g in goals)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_at_one_half_the_matching_share_of_200_goals_is_within_the_binomial_99_percent_interval(domain, seed):
    lo, hi = binomial_interval(200, 0.5)
    assert (lo, hi) == (82, 118)
    goals = generate(domain.templates, domain.db, 200, 0.5, random.Random(seed))
    matching = sum(first_constraints_match(g, domain.db) for g in goals)
    assert lo <= matching <= hi


def test_without_p_each_template_uses_its_own_probability(domain):
    goals = generate(domain.templates, domain.db, 400, None, random.Random(5))
    by_template = {t.name: t.probability for t in domain.templates}
    assert all(g.probability == by_template[g.template] for g in goals)
    expected = sum(g.probability for g in goals)
    matching = sum(first_constraints_match(g, domain.db) for g in goals)
    assert abs(matching - expected) < 3 * math.sqrt(sum(g.probability * (1 - g.probability) for g in goals))


def test_the_same_seed_draws_the_same_goals(domain):
    first = [g.as_dict() for g in generate(domain.templates, domain.db, 30, 0.5, random.Random(11))]
    again = [g.as_dict() for g in generate(domain.templates, domain.db, 30, 0.5, random.Random(11))]
    assert first == again


def test_role_play_and_generic_goals_mix_and_role_play_ones_carry_a_character(domain):
    goals = generate(domain.templates, domain.db, 100, 0.5, random.Random(3))
    kinds = {g.kind for g in goals}
    assert kinds == {"generic", "role_play"}
    for goal in goals:
        assert (goal.kind == "role_play") == bool(goal.character)
        assert goal.character in goal.instructions and goal.text in goal.instructions
        assert "{" not in goal.instructions


def test_an_unsuccessful_goal_either_ends_the_dialog_or_carries_the_templates_alternate(domain):
    goals = generate(domain.templates, domain.db, 120, 0.0, random.Random(4))
    templates = {t.name: t for t in domain.templates}
    seen = set()
    for goal in goals:
        template = templates[goal.template]
        if template.alternate is None:
            assert goal.on_failure == "end" and "end the conversation" in goal.instructions
        else:
            assert goal.on_failure == "alternate" and goal.alternate.text in goal.instructions
            assert goal.alternate.matches == len(domain.db.matching(goal.alternate.constraints))
        seen.add(goal.on_failure)
    assert seen == {"end", "alternate"}


def test_the_budget_alternate_raises_the_budget_by_its_amount(domain):
    template = next(t for t in domain.templates if t.name == "budget_trip")
    goal = draw_goal(template, domain.db, False, random.Random(9))
    budget = next(c for c in goal.constraints if c.field == "price")
    raised = next(c for c in goal.alternate.constraints if c.field == "price")
    assert raised.value == budget.value + 200 and raised.op == "at_most"
    assert "$" + f"{goal.values['budget']:,}" in goal.text


def test_a_failing_goal_stays_within_what_the_database_spans(domain):
    """A budget just under what the other slots allow, not a 5.5-star hotel or a $0 budget."""
    goals = generate(domain.templates, domain.db, 300, 0.0, random.Random(8))
    for goal in goals:
        for constraint in goal.constraints:
            column = domain.db.columns[constraint.field]
            if column.ordered:
                values = [i[constraint.field] for i in domain.db.items]
                if constraint.op == "at_least":  # asking more than any item has is not believable
                    assert constraint.value <= max(values), (goal.template, constraint)
                else:
                    assert constraint.value >= min(values), (goal.template, constraint)
            else:
                assert constraint.value in domain.db.values(constraint.field)


def test_a_goal_reads_back_from_its_stored_form(domain):
    for goal in generate(domain.templates, domain.db, 20, 0.5, random.Random(12)):
        assert goal_from_dict(goal.as_dict(), domain.db) == goal


def test_a_template_that_cannot_fail_is_refused_naming_the_template(domain):
    everywhere = Template("anything", "Fly economy or business ({seat}).",
                          (Slot("seat", "seat", "is"),), 0.0)
    # every seat value exists somewhere, so no value for the one slot finds nothing
    with pytest.raises(InvalidInput) as raised:
        generate([everywhere], domain.db, 1, 0.0, random.Random(1))
    assert raised.value.field == "template" and "cannot make a goal that fails" in raised.value.reason


@pytest.mark.parametrize("kwargs, field", [({"n": -1}, "n"), ({"p": 1.5}, "p"),
                                           ({"templates": []}, "templates")])
def test_bad_generation_arguments_name_the_argument(domain, kwargs, field):
    arguments = {"templates": domain.templates, "db": domain.db, "n": 3, "p": 0.5, "rng": random.Random(1)}
    arguments.update(kwargs)
    with pytest.raises(InvalidInput) as raised:
        generate(**arguments)
    assert raised.value.field == field
