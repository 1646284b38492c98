"""Frames' log events for a search and its end-of-dialog surveys, with the success analysis."""

from __future__ import annotations

import json
import random

import pytest

from turkflow.errors import InvalidAnswer
from turkflow.protocols.frames.database import Database
from turkflow.protocols.frames.domain import load_domain
from turkflow.protocols.frames.events import replay, search_events
from turkflow.protocols.frames.goals import generate
from turkflow.protocols.frames.search import parse_search, run_search
from turkflow.protocols.frames.survey import (
    FRAMES_USER_SURVEY,
    FRAMES_WIZARD_SURVEY,
    binomial_interval,
    read_answers,
    success_report,
)

from tests.test_frames_goals import binomial_interval as reference_interval


@pytest.fixture(scope="module")
def domain():
    return load_domain()


def nothing_found(db):
    return parse_search(db, {"origin": "Boston", "destination": "Kyoto", "price": {"at_most": 1500}}, "price")


def test_a_search_is_logged_as_the_wizards_search_then_its_results_in_json(domain):
    search = parse_search(domain.db, {"destination": "Lisbon", "departure": {"at_least": "2025-08-01"}},
                          "price", True)
    result = run_search(domain.db, search)
    events = search_events(search, result)
    assert [(e.agent, e.action) for e in events] == [("Wizard", "search"),
                                                     ("KnowledgeBase", "search_results")]
    assert events[0].data == {"constraints": [
        {"field": "destination", "op": "is", "value": "Lisbon"},
        {"field": "departure", "op": "at_least", "value": "2025-08-01"}],
        "sort": {"field": "price", "descending": True}}
    assert events[1].data == {"ids": list(result.ids), "total": result.total}
    json.dumps([e.data for e in events])  # what a DialogEvent's JSON column takes


def test_suggestions_shown_are_logged_with_what_was_relaxed_and_what_it_finds(domain):
    search = nothing_found(domain.db)
    result = run_search(domain.db, search, random.Random(1), 1.0)
    events = search_events(search, result)
    assert [e.action for e in events] == ["search", "search_results", "suggestions"]
    shown = events[2].data["suggestions"]
    assert [s["relaxed"]["field"] for s in shown] == ["origin", "destination", "price"]
    price = shown[2]
    assert price["relaxed"] == {"field": "price", "op": "at_most", "value": 1500}
    assert price["instead"]["value"] > 1500 and price["total"] >= len(price["ids"]) >= 1
    assert shown[1]["instead"] is None  # any destination


def test_a_draw_without_suggestions_leaves_no_suggestions_event(domain):
    search = nothing_found(domain.db)
    events = search_events(search, run_search(domain.db, search, random.Random(1), 0.0))
    assert [e.action for e in events] == ["search", "search_results"]


def test_replay_finds_no_difference_on_the_same_database_and_names_the_search_that_changed(domain):
    log = []
    for raw in ({"destination": "Lisbon"}, {"origin": "Dallas", "price": {"at_most": 1200}}):
        search = parse_search(domain.db, raw)
        log += search_events(search, run_search(domain.db, search))
    search = nothing_found(domain.db)
    log += search_events(search, run_search(domain.db, search, random.Random(1), 1.0))
    stored = [{"agent": e.agent, "action": e.action, "data": json.loads(json.dumps(e.data))} for e in log]
    assert replay(domain.db, stored) == []
    cheaper = [dict(i) for i in domain.db.items]
    dallas = next(i for i in cheaper if i["origin"] == "Dallas" and i["price"] > 1200)
    dallas["price"] = 900
    changed = Database(domain.db.name, domain.db.columns, cheaper)
    differences = replay(changed, stored)
    assert len(differences) == 1 and differences[0].startswith("search 2: logged")


def test_the_survey_questions_are_frames_own():
    (rating,) = FRAMES_USER_SURVEY
    (reached,) = FRAMES_WIZARD_SURVEY
    assert rating.kind == "rating" and [v for v, _ in rating.options] == ["1", "2", "3", "4", "5"]
    assert "cooperative" in rating.label
    assert reached.kind == "yes_no" and reached.shows_goal and "reached the goal" in reached.label


@pytest.mark.parametrize("role, raw, expected", [
    ("user", {"cooperativity": "4"}, {"cooperativity": 4}),
    ("user", {"cooperativity": 5}, {"cooperativity": 5}),
    ("wizard", {"goal_reached": "no"}, {"goal_reached": False}),
    ("wizard", {"goal_reached": True}, {"goal_reached": True}),
])
def test_survey_answers_are_read_from_a_form_or_json(role, raw, expected):
    assert read_answers(role, raw) == expected


@pytest.mark.parametrize("role, raw, field", [
    ("user", {"cooperativity": "6"}, "cooperativity"),
    ("user", {"cooperativity": "4.5"}, "cooperativity"),
    ("user", {"cooperativity": True}, "cooperativity"),
    ("user", {}, "cooperativity"),
    ("user", {"cooperativity": "3", "mood": "ok"}, "mood"),
    ("wizard", {"goal_reached": "maybe"}, "goal_reached"),
    ("teacher", {}, "role"),
])
def test_bad_survey_answers_name_the_question(role, raw, field):
    with pytest.raises(InvalidAnswer) as raised:
        read_answers(role, raw)
    assert raised.value.field == field


def test_the_binomial_interval_is_the_one_the_goal_tests_compute():
    for n, p in ((200, 0.5), (50, 0.3), (120, 0.9)):
        assert binomial_interval(n, p) == reference_interval(n, p)
    assert binomial_interval(20, 0.0) == (0, 0) and binomial_interval(20, 1.0) == (20, 20)


def test_success_is_reported_per_template_against_its_probability(domain):
    goals = generate(domain.templates, domain.db, 300, None, random.Random(21))
    rng = random.Random(22)
    dialogs = []
    for goal in goals:  # a simulated crowd: feasible goals are mostly reached, the others rarely
        reached = rng.random() < (0.9 if goal.matches else 0.2)
        answers = {"goal_reached": reached, "cooperativity": 5 if reached else rng.choice((2, 3, 4))}
        dialogs.append((goal, answers))
    dialogs.append((goals[0], {}))  # a dialog nobody answered the survey of
    report = success_report(dialogs)
    rows = {r.template: r for r in report}
    assert list(rows)[:-1] == sorted(t.name for t in domain.templates) and report[-1].template == "all"
    for template in domain.templates:
        row = rows[template.name]
        mine = [(g, a) for g, a in dialogs if g.template == template.name]
        assert row.probability == template.probability and row.dialogs == len(mine)
        assert row.feasible == sum(g.matches > 0 for g, _ in mine)
        assert row.feasible_as_expected, (row.template, row.feasible, row.expected)
        assert row.reached_feasible[1] + row.reached_alternate[1] + row.reached_ending[1] == row.judged
    overall = rows["all"]
    assert overall.dialogs == 301 and overall.judged == 300 and sum(overall.ratings.values()) == 300
    assert overall.reached_feasible[0] / overall.reached_feasible[1] > 0.8
    assert 4.0 < overall.mean_rating < 5.0 and overall.feasible_as_expected
