"""Reply suggestions: the flow chart's next reply first, nothing that contradicts the knowledge base, no
non-replies, templates filled as STAR's wizards sent them, and a task STAR never had still guided by its
chart. How often the picked reply comes first is measured by ``python -m bench star_suggestions``
(cross-validated); these tests check behaviour."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.conftest import SHARED_DATA
from turkflow.protocols.star.log import load_dialogues, picks
from turkflow.protocols.star.schemas import load_schemas, parse_schema
from turkflow.protocols.star.suggestions import (
    EMPTY,
    FAILED,
    DialogState,
    Ranker,
    fill,
    labels,
    outcome_of,
    polarities,
    rank,
)

STAR = SHARED_DATA / "star"
NON_REPLIES = {"yes", "no", "available", "unavailable", "query_success", "query_failure", "done", "correct",
               "incorrect", "noanswer", "info_missing", "info_missing2"}


@pytest.fixture(scope="module")
def schemas():
    return load_schemas(STAR / "tasks")


@pytest.fixture(scope="module")
def logged(schemas):
    """Every pick in the sample logs with the selected task and the page's state before it."""
    return [pick for dialogue in load_dialogues(STAR / "dialogues") for pick in picks(dialogue, schemas)]


def test_a_new_dialog_starts_with_hello_and_then_follows_the_chart(schemas):
    weather = schemas["weather"]
    chart = Ranker.for_schema(weather, learned=False)  # the schema prior alone, as for a new task
    assert labels(chart.rank(DialogState(), 1)) == ["hello"]
    assert labels(chart.rank(DialogState(last_label="hello", used=("hello",)), 1)) == ["weather_ask_day"]
    after_day = DialogState(last_label="weather_ask_day", used=("hello", "weather_ask_day"))
    assert labels(chart.rank(after_day, 1)) == ["weather_ask_location"]
    assert "query" not in labels(chart.rank(after_day))
    # STAR's weather wizards asked either question first; the model learned that, the chart keeps both up
    assert labels(rank(weather, DialogState(), 1)) == ["hello"]
    assert set(labels(rank(weather, DialogState(last_label="hello", used=("hello",)), 2))) == {
        "weather_ask_day", "weather_ask_location"}
    assert labels(rank(weather, after_day, 1)) == ["weather_ask_location"]


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
    goodbye = replace(plain, user_text="No thanks, that's all. Goodbye!")
    before = labels(rank(schemas["weather"], plain))
    after = labels(rank(schemas["weather"], goodbye))
    assert after.index("weather_bye") < before.index("weather_bye")
    assert after.index("weather_bye") < 2


def test_the_drafts_words_pick_the_reply(schemas):
    state = DialogState(last_label="hello", used=("hello",))
    assert labels(rank(schemas["weather"], replace(state, draft="In which city?"), 1)) == ["weather_ask_location"]
    assert labels(rank(schemas["weather"], replace(state, draft="ok, goodbye!"), 1)) == ["weather_bye"]


@pytest.mark.parametrize("answer", [{"Message": "Unavailable", "HotelName": "Old Town Inn"},
                                    {"Message": "Reservation Failed", "HotelName": "Old Town Inn"}])
def test_after_the_hotel_says_no_no_suggestion_says_yes(schemas, answer):
    state = DialogState(last_label="hotel_ask_customer_request", queried=True, item=answer,
                        used=("hello", "ask_name", "hotel_ask_hotel", "hotel_ask_customer_request"))
    assert outcome_of(state) == FAILED
    suggested = labels(rank(schemas["hotel_book"], state))
    assert not {"hotel_ask_confirm_booking", "hotel_reservation_succeeded"} & set(suggested)
    assert suggested[0] in ("hotel_unavailable", "hotel_reservation_failed")


def test_after_an_empty_query_no_reply_claims_a_find_or_a_booking(schemas):
    for name, schema in schemas.items():
        claims = polarities(schema)
        state = DialogState(last_label=schema.graph.start, queried=True, nothing_found=True,
                            used=(schema.graph.start,))
        assert outcome_of(state) == EMPTY
        for suggestion in rank(schema, state):
            assert claims.get(suggestion.label, 0) <= 0, (name, suggestion.label)


def test_the_chart_tells_which_replies_claim_success_and_which_refusal(schemas):
    doctor = polarities(schemas["doctor_schedule"])
    assert doctor["doctor_inform_booking_available"] == 1 and doctor["doctor_inform_booking_successful"] == 1
    assert doctor["doctor_inform_booking_unavailable"] == -1 and doctor["ask_name"] == 0
    hotel = polarities(schemas["hotel_book"])
    assert hotel["hotel_ask_confirm_booking"] == 1  # a question, but the chart puts it after "Available"
    assert hotel["hotel_reservation_failed"] == -1 and hotel["hotel_inform_nothing_found"] == -1
    assert hotel["out_of_scope"] == 0 and hotel["hotel_ask_hotel"] == 0  # "No" -> ask again: no outcome


def test_no_logged_state_gets_a_contradiction_or_a_non_reply(logged, schemas):
    rankers = {name: Ranker.for_schema(schema) for name, schema in schemas.items()}
    claims = {name: polarities(schema) for name, schema in schemas.items()}
    refused = 0
    for pick in logged:
        suggested = labels(rankers[pick.task].rank(pick.state, 6))
        assert not NON_REPLIES & set(suggested), (pick.dialogue, suggested)
        if outcome_of(pick.state) in (EMPTY, FAILED):
            refused += 1
            assert all(claims[pick.task].get(label, 0) <= 0 for label in suggested), (pick.dialogue, suggested)
    assert refused > 50


def test_yes_no_fields_and_lists_read_as_star_wrote_them(schemas):
    template = schemas["apartment_search"].templates["apartment_inform_search_result"]
    item = {"Name": "North Hill Apartments", "NearbyPOIs": ["School", "Park", "Museum"], "Level": 4,
            "FloorSquareMeters": 15, "NumRooms": 1, "HasBalcony": False, "HasElevator": True, "Price": 767}
    text, missing = fill(template, item)
    assert missing == ()
    assert "located near a School, a Park and a Museum," in text
    assert "It does not have a balcony and has an elevator," in text
    text, _ = fill(template, {**item, "HasBalcony": True, "BalconySide": "west", "HasElevator": False})
    assert "It has a west facing balcony and does not have an elevator," in text
    assert " yes" not in text and "True" not in text


def test_filled_templates_match_what_the_wizards_sent(logged, schemas):
    """Every logged pick of a template with slots, refilled from the item the pick shows. Trip directions
    are left out: STAR sent one step of the instructions at a time, the template takes the whole list."""
    agree = total = 0
    for pick in logged:
        template = schemas[pick.task].templates.get(pick.event["ActionLabel"])
        if pick.task == "trip_directions" or not template or not template.slots or not pick.event.get("PrimaryItem"):
            continue
        item = {k: v for k, v in pick.event["PrimaryItem"].items() if k != "APIName"}
        total += 1
        agree += fill(template, item)[0].strip() == pick.event["Text"].strip()
    assert total > 400 and agree / total >= 0.97


def test_picks_are_ranked_with_the_task_the_wizard_selected(schemas):
    """A multi-task dialogue: each pick belongs to the task whose tab was open, and each task keeps its own
    place in its chart."""
    def event(agent, action, **fields):
        return {"Agent": agent, "Action": action, **fields}

    dialogue = {"DialogueID": 1, "Scenario": {"WizardCapabilities": [{"Task": "weather"}, {"Task": "ride_status"}]},
                "Events": [
                    event("User", "utter", Text="Hi, what's the weather tomorrow? And where is my taxi?"),
                    event("Wizard", "pick_suggestion", ActionLabel="hello", Text="Hello, how can I help?"),
                    event("Wizard", "select_task", Task="ride_status"),
                    event("Wizard", "pick_suggestion", ActionLabel="ask_name",
                          Text="May I have your name, please?"),
                    event("User", "utter", Text="Mark"),
                    event("Wizard", "select_task", Task="weather"),
                    event("Wizard", "pick_suggestion", ActionLabel="goodbye_1", Text="Thank you and goodbye."),
                    event("Wizard", "pick_suggestion", ActionLabel="custom", Text="One moment"),
                ]}
    found = list(picks(dialogue, schemas))
    assert [p.task for p in found] == ["weather", "ride_status", "weather", "weather"]
    assert [p.label for p in found] == ["hello", "ask_name", "weather_bye", None]  # old label read by its text
    assert found[1].state.used == ("hello",) and found[2].state.last_label == "hello"
    assert found[2].state.user_text == "Mark"


def test_a_task_star_never_had_is_still_guided_by_its_chart(tmp_path):
    document = {
        "task": "library_loan",
        "replies": {
            "hello": "Hello, how can I help?", "ask_name": "May I have your name, please?",
            "library_ask_title": "Which book would you like to borrow?",
            "library_ask_branch": "At which branch would you like to pick it up?",
            "library_inform_on_shelf": "Good news, {title:s} is available at the {branch:s} branch. "
                                       "Shall I reserve it?",
            "library_inform_lent_out": "Sorry, {title:s} is not available at the {branch:s} branch.",
            "library_reserved": "Done, your copy of {title:s} is reserved.",
            "library_bye": "Thank you and goodbye.", "anything_else": "Is there anything else I can do?",
            "available": "Available", "unavailable": "Unavailable", "yes": "Yes", "no": "No",
            "query_check": "Query Check", "query_book": "Query Book",
        },
        "graph": {"hello": "ask_name", "ask_name": "library_ask_title", "library_ask_title": "library_ask_branch",
                  "library_ask_branch": "query_check", "available": "library_inform_on_shelf",
                  "unavailable": "library_inform_lent_out", "yes": "query_book", "no": "library_ask_title",
                  "query_book": "library_reserved", "library_reserved": "anything_else"},
    }
    path = tmp_path / "library_loan" / "library_loan.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document))
    schema = parse_schema(path, document)
    ranker = Ranker.for_schema(schema)
    assert ranker.learned is None  # nothing learned for it: the chart and the words guide
    assert labels(ranker.rank(DialogState(), 1)) == ["hello"]
    state = DialogState(last_label="ask_name", used=("hello", "ask_name"))
    assert labels(ranker.rank(state, 1)) == ["library_ask_title"]
    everything = set(labels(ranker.rank(state)))
    assert not {"yes", "no", "available", "unavailable"} & everything
    lent = DialogState(last_label="library_ask_branch", queried=True, used=("hello", "library_ask_branch"),
                       item={"Message": "Unavailable", "Title": "Dune", "Branch": "Central"})
    suggested = ranker.rank(lent)
    assert suggested[0].label == "library_inform_lent_out"
    assert suggested[0].text == "Sorry, Dune is not available at the Central branch."
    assert not {"library_inform_on_shelf", "library_reserved"} & set(labels(suggested))
    on_shelf = replace(lent, item={"Message": "Available", "Title": "Dune", "Branch": "Central"})
    assert labels(ranker.rank(on_shelf, 1)) == ["library_inform_on_shelf"]


def test_the_picked_reply_is_usually_in_the_top_three(logged, schemas):
    """A smoke check on the sample logs, which are part of the training split the shipped model learned
    from: the cross-validated numbers are ``python -m bench star_suggestions``'s, not this test's."""
    rankers = {name: Ranker.for_schema(schema) for name, schema in schemas.items()}
    top3 = total = 0
    for pick in logged:
        if pick.label is None:
            continue
        total += 1
        top3 += pick.label in labels(rankers[pick.task].rank(replace(pick.state, draft=""), 3))
    assert total > 1900 and top3 / total >= 0.8

