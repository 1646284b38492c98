"""Reply suggestions: the flow chart's next reply first, templates filled from the selected item, and
agreement with what STAR's wizards picked and said in the sample logs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import SHARED_DATA
from turkflow.protocols.star.log import load_dialogues, states_before_picks
from turkflow.protocols.star.schemas import load_schemas
from turkflow.protocols.star.suggestions import DialogState, Ranker, fill, labels, rank

STAR = SHARED_DATA / "star"


@pytest.fixture(scope="module")
def schemas():
    return load_schemas(STAR / "tasks")


@pytest.fixture(scope="module")
def picks(schemas):
    """(task, state before the pick, pick event) for every pick in the sample logs."""
    found = []
    for dialogue in load_dialogues(STAR / "dialogues"):
        task = dialogue["Scenario"]["WizardCapabilities"][0]["Task"]
        found += [(task, state, pick) for state, pick in states_before_picks(dialogue)]
    return found


def test_a_new_dialog_starts_with_hello_and_then_follows_the_chart(schemas):
    weather = schemas["weather"]
    assert labels(rank(weather, DialogState(), 1)) == ["hello"]
    assert labels(rank(weather, DialogState(last_label="hello", used=("hello",)), 1)) == ["weather_ask_day"]
    after_day = DialogState(last_label="weather_ask_day", used=("hello", "weather_ask_day"))
    assert labels(rank(weather, after_day, 1)) == ["weather_ask_location"]
    assert "query" not in labels(rank(weather, after_day))


def test_after_a_query_the_forecast_comes_first_filled_with_the_selected_item(schemas):
    item = {"City": "Pittsburgh", "Day": "Monday", "TemperatureCelsius": 12, "Weather": "Sunny", "id": 3}
    state = DialogState(last_label="weather_ask_location", queried=True, item=item)
    best = rank(schemas["weather"], state, 1)[0]
    assert best.label == "weather_inform_forecast" and best.missing == ()
    assert best.text == ("It will be Sunny all day on Monday in Pittsburgh, with temperatures of around 12 "
                         "degrees celsius.")
    nothing = rank(schemas["weather"], replace(state, nothing_found=True, item=None), 1)[0]
    assert nothing.label == "weather_inform_nothing_found"


def test_a_slot_the_item_cannot_fill_stays_visible_and_is_reported(schemas):
    text, missing = fill(schemas["weather"].templates["weather_inform_forecast"], {"City": "Chicago"})
    assert "in Chicago" in text and "{day}" in text and missing == ("weather", "day", "temperature")


def test_what_the_user_says_moves_a_matching_template_up(schemas):
    plain = DialogState(last_label="weather_inform_forecast", used=("weather_inform_forecast",))
    goodbye = replace(plain, user_text="No thanks, goodbye!")
    before = {s.label: s.score for s in rank(schemas["weather"], plain)}
    after = {s.label: s.score for s in rank(schemas["weather"], goodbye)}
    assert before["weather_bye"] == before["out_of_scope"]  # both closing replies, off the chart's path
    assert after["weather_bye"] > before["weather_bye"] and after["out_of_scope"] == before["out_of_scope"]
    assert labels(rank(schemas["weather"], goodbye, 2)) == ["anything_else", "weather_bye"]


def test_filled_templates_match_what_the_wizards_sent(picks, schemas):
    """Every logged pick of a template with slots, refilled from the item the pick shows. Trip directions
    are left out: STAR sent one step of the instructions at a time, the template takes the whole list."""
    agree = total = 0
    for task, _, pick in picks:
        template = schemas[task].templates.get(pick["ActionLabel"])
        if task == "trip_directions" or not template or not template.slots or not pick.get("PrimaryItem"):
            continue
        item = {k: v for k, v in pick["PrimaryItem"].items() if k != "APIName"}
        total += 1
        agree += fill(template, item)[0].strip() == pick["Text"].strip()
    assert total > 400 and agree / total >= 0.95


def test_the_picked_reply_is_usually_in_the_top_three(picks, schemas):
    """How fast a ranking is, is measured by ``python -m bench star_suggestions``, not here: a timed
    assertion fails whenever the machine is busy."""
    rankers = {name: Ranker.for_schema(schema) for name, schema in schemas.items()}
    top3 = total = 0
    for task, state, pick in picks:
        if pick["ActionLabel"] not in schemas[task].templates:
            continue
        total += 1
        top3 += pick["ActionLabel"] in labels(rankers[task].rank(state, 3))
    assert total > 1500 and top3 / total >= 0.8
