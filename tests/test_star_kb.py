"""The STAR knowledge base: STAR's constraint semantics, deterministic rows, and agreement with the logs."""

from __future__ import annotations

import collections
import json

import pytest

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.star.kb import KnowledgeBase, load_database, parse_constraint
from turkflow.protocols.star.log import AGREES, DISAGREES, FOUND_NOTHING, check_dialogues, load_dialogues

from tests.conftest import SHARED_DATA

STAR = SHARED_DATA / "star"


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.load(STAR / "apis")


@pytest.fixture(scope="module")
def checks(kb):
    return check_dialogues(kb, load_dialogues(STAR / "dialogues"))


def test_databases_are_drawn_the_same_every_time_within_their_domains(kb):
    again = load_database(STAR / "apis" / "dbs" / "weather.json")
    assert again.rows == kb.databases["weather"].rows and len(again.rows) == 1000
    for row in kb.databases["weather"].rows:
        assert -5 <= row["TemperatureCelsius"] <= 30 and row["Day"] in {"Monday", "Tuesday", "Wednesday",
                                                                         "Thursday", "Friday", "Saturday",
                                                                         "Sunday"}
    for row in kb.databases["schedule"].rows:  # EndTimeHour's bounds are functions of the row drawn so far
        assert row["EndTimeHour"] == row["StartTimeHour"] + 2
        assert ("SizeLimit" in row) == ("Venue" in row["Name"] or "Conference" in row["Name"])


def test_query_applies_every_constraint_and_returns_rows_in_id_order(kb):
    result = kb.query("weather", [{"Day": '"Monday"'}, {"City": 'api.is_one_of(["Chicago","Detroit"])'},
                                  {"TemperatureCelsius": "api.is_at_least(10)"},
                                  {"TemperatureCelsius": "api.is_less_than(20)"}])
    expected = [r for r in kb.databases["weather"].rows if r["Day"] == "Monday"
                and r["City"] in ("Chicago", "Detroit") and 10 <= r["TemperatureCelsius"] < 20]
    assert expected and list(result.items) == expected
    assert [r["id"] for r in result.items] == sorted(r["id"] for r in result.items)


def test_is_not_wraps_a_condition_or_a_plain_value(kb):
    assert parse_constraint("Price", "api.is_not(3)").holds({"Price": 4})
    assert not parse_constraint("Price", "api.is_not(3)").holds({"Price": 3})
    assert parse_constraint("Cost", 'api.is_not(api.is_one_of(["Cheap"]))').holds({"Cost": "Expensive"})


@pytest.mark.parametrize("constraints, field, words", [
    ([{"Day": '"Monday"'}, {"Humidity": "40"}], "Humidity", "no such field"),
    ([{"Day": '"Monday"'}, {"TemperatureCelsius": '"warm"'}], "TemperatureCelsius", "whole number"),
    ([{"Day": 'api.is_equal_to(["Sunday"])'}], "Day", "expected text"),
    ([{"Day": "api.is_one_of()"}], "Day", "not a plain value"),
    ([{"Day": '__import__("os").system("true")'}], "Day", "not a plain value"),
    ([{"City": '"Chicago"'}], "Day", "required"),
    ([{"Day": "{[1]: 2}"}], "Day", "not a plain value"),
    ([{"Day": "[" * 5000 + "]" * 5000}], "Day", "cannot read"),
    ([{"Day": "Monday\x00"}], "Day", "cannot read"),
    ([{"Day": "-" * 100_000 + "1"}], "Day", "cannot read constraint '-----"),
    ([{"Day": 'api.is_greater_than("Monday")'}], "Day", "compares numbers"),
    ([{"Day": '"Funday"'}], "Day", "not one of the choices (Sunday, Monday"),
    ([{"Day": '"Monday"'}, {"City": 'api.is_one_of(["Chicago","Atlantis"])'}], "City",
     "'Atlantis' is not one"),
])
def test_bad_constraints_are_a_domain_error_naming_the_field(kb, constraints, field, words):
    with pytest.raises(InvalidInput) as raised:
        kb.query("weather", constraints)
    assert raised.value.field == field and words in raised.value.reason
    assert len(raised.value.message) < 200  # a page shows it next to the field


def test_an_outcome_api_is_refused_for_search_and_an_unknown_api_names_the_api(kb):
    with pytest.raises(InvalidInput) as raised:
        kb.query("trivia", [{"QuestionNum": "3"}])
    assert raised.value.field == "api"
    with pytest.raises(InvalidInput, match="no such API"):
        kb.query("teleport", {})


def test_a_database_file_with_code_outside_the_whitelist_is_refused(tmp_path):
    path = tmp_path / "evil.json"
    path.write_text(json.dumps([{"Name": "X", "Type": "Integer", "Min": '!__import__("os").getpid()'}]))
    with pytest.raises(InvalidDocument, match="evil.json: field 'X'"):
        load_database(path)


def test_every_logged_search_result_meets_its_logged_constraints(kb, checks):
    """STAR's rows were random, so the check is that a logged item satisfies the logged constraints."""
    outcomes = collections.Counter(c.outcome for c in checks if kb.api(c.api).searchable)
    assert outcomes[AGREES] >= 150
    assert outcomes[DISAGREES] == 0, [c for c in checks if c.outcome == DISAGREES][:3]
    share = outcomes[AGREES] / (outcomes[AGREES] + outcomes[DISAGREES])
    assert share >= 0.95 and outcomes[FOUND_NOTHING] > 0
