"""A MEEP agent acts by clicks only: templates filled with the user's words or result fields, API calls
whose arguments are clicked, results accumulating in a panel."""

from __future__ import annotations

from pathlib import Path

import pytest

from turkflow.errors import InvalidInput
from turkflow.protocols.meep import clicks
from turkflow.protocols.meep.kb import KnowledgeBase
from turkflow.protocols.meep.log import FieldClick, SessionLog, WordClick
from turkflow.protocols.meep.templates import add_template, load_templates, render

SAMPLE = Path(__file__).resolve().parents[1] / "turkflow" / "samples" / "meep"
FIRST = "I want to go to Bluebird Coffee on Venice Boulevard."  # tokens 5, 6, 8, 9: the place
SECOND = "Is it the one across from Coffee Harbor?"  # tokens 6, 7


@pytest.fixture
def kb():
    return KnowledgeBase.load(SAMPLE)


@pytest.fixture
def templates():
    return load_templates(SAMPLE / "templates.json")


def source(field):
    return {"result": "source", "field": field}


def paper_dialog(kb, templates) -> SessionLog:
    """MEEP's section 5.2 example on the sample: find the place, say how far it is, ask to go; the user
    names a landmark; the agent finds it, measures the distance between the two, and drives."""
    log = clicks.start(kb)
    log.add(clicks.user_says(log, FIRST))
    log.add(clicks.call_api(log, kb, "find_place", {"query": {"tokens": [5, 6, 8, 9]},
                                                    "latitude": source("latitude"),
                                                    "longitude": source("longitude")}))
    log.add(clicks.pick_template(log, templates, "t4", [{"result": "v1", "field": "name"},
                                                        {"result": "v1", "field": "street_name"},
                                                        {"result": "v1", "field": "duration_minutes"}]))
    log.add(clicks.pick_template(log, templates, "t5", []))
    log.add(clicks.send(log))
    log.add(clicks.user_says(log, SECOND))
    log.add(clicks.call_api(log, kb, "find_place", {"query": {"tokens": [6, 7]},
                                                    "latitude": {"result": "v1", "field": "latitude"},
                                                    "longitude": {"result": "v1", "field": "longitude"}}))
    log.add(clicks.pick_template(log, templates, "t7", [{"result": "v1", "field": "name"},
                                                        {"result": "v2", "field": "distance_miles"},
                                                        {"tokens": [6, 7]}]))
    log.add(clicks.pick_template(log, templates, "t5", []))
    log.add(clicks.send(log))
    log.add(clicks.user_says(log, "Great, thanks."))
    log.add(clicks.call_api(log, kb, "start_driving", {"latitude": {"result": "v1", "field": "latitude"},
                                                       "longitude": {"result": "v1", "field": "longitude"}}))
    log.add(clicks.pick_template(log, templates, "t11", [{"result": "v1", "field": "name"}]))
    log.add(clicks.send(log))
    return log


def test_the_agents_message_is_built_from_clicked_templates_and_fields(kb, templates):
    log = paper_dialog(kb, templates)
    sent = [r.text for r in log.records if r.kind == "send"]
    assert sent == ["Bluebird Coffee on Venice Boulevard is 5 minutes away. Shall we go?",
                    "Bluebird Coffee is 0 miles from Coffee Harbor. Shall we go?",
                    "Great, we are going to Bluebird Coffee."]


def test_results_accumulate_in_the_panel_under_stable_ids(kb, templates):
    log = paper_dialog(kb, templates)
    panel = clicks.panel(log)
    assert list(panel) == ["source", "v1", "v2", "v3"]
    assert (panel["v1"].api, panel["v1"].fields["name"]) == ("find_place", "Bluebird Coffee")
    assert (panel["v2"].api, panel["v2"].fields["name"]) == ("find_place", "Coffee Harbor")
    assert panel["v3"].fields == {"latitude": 34.0021, "longitude": -118.4301, "status": "driving"}


def test_each_filler_records_where_it_came_from(kb, templates):
    log = paper_dialog(kb, templates)
    call = log.records[1]
    assert call.arguments["query"].clicks == (WordClick(1, 5, "Bluebird"), WordClick(1, 6, "Coffee"),
                                              WordClick(1, 8, "Venice"), WordClick(1, 9, "Boulevard"))
    assert call.arguments["query"].value == "Bluebird Coffee Venice Boulevard"
    assert call.arguments["latitude"].clicks == (FieldClick("source", "latitude", 33.9803),)
    pick = log.records[7]
    assert pick.fillers[2].clicks == (WordClick(2, 6, "Coffee"), WordClick(2, 7, "Harbor"))
    assert pick.fillers[2].value == "Coffee Harbor"


def test_adjacent_clicked_words_keep_the_users_spelling(kb, templates):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, "Take me to 5th St. please"))
    pick = clicks.pick_template(log, templates, "t6", [{"tokens": [3, 4, 5]}])
    assert pick.text == "Do you mean 5th St.?"


def test_an_api_argument_may_take_words_of_an_earlier_message(kb, templates):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, "I want bubble tea"))
    log.add(clicks.pick_template(log, templates, "t12", [{"tokens": [2]}]))
    log.add(clicks.send(log))
    log.add(clicks.user_says(log, "The one in Culver City"))
    call = clicks.call_api(log, kb, "find_place", {"query": {"message": 1, "tokens": [2, 3]},
                                                   "latitude": source("latitude"),
                                                   "longitude": source("longitude")})
    assert call.arguments["query"].value == "bubble tea"
    assert call.results[0].fields["name"] == "Pearl Tea House"


def test_a_clicked_word_can_be_a_number_argument(kb):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, "Drive to 34.0021 and -118.4301"))
    call = clicks.call_api(log, kb, "start_driving", {"latitude": {"tokens": [2]},
                                                      "longitude": {"tokens": [4, 5]}})
    assert call.results[0].fields == {"latitude": 34.0021, "longitude": -118.4301, "status": "driving"}
    with pytest.raises(InvalidInput) as caught:
        clicks.call_api(log, kb, "start_driving", {"latitude": {"tokens": [0]}, "longitude": {"tokens": [2]}})
    assert caught.value.field == "arguments.latitude" and "'Drive'" in caught.value.reason


def test_a_call_that_finds_nothing_adds_nothing_to_the_panel(kb):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, "the lake please"))
    log.add(clicks.call_api(log, kb, "places_nearby", {"query": {"tokens": [1]},
                                                       "latitude": source("latitude"),
                                                       "longitude": source("longitude")}))
    assert log.records[-1].results == () and list(clicks.panel(log)) == ["source"]


@pytest.mark.parametrize("filler, field, words", [
    ("Bluebird Coffee", "fillers[0]", "no free text"),
    ({"tokens": [42]}, "fillers[0]", "no token 42"),
    ({"tokens": []}, "fillers[0]", "token numbers"),
    ({"tokens": [5, 5]}, "fillers[0]", "token numbers"),
    ({"tokens": [True]}, "fillers[0]", "token numbers"),
    ({"message": 1, "tokens": [3]}, "fillers[0]", "the user's last message (2)"),
    ({"message": 7, "tokens": [3]}, "fillers[0]", "no user message"),
    ({"result": "v9", "field": "name"}, "fillers[0]", "not a result in the panel"),
    ({"result": "v1", "field": "owner"}, "fillers[0]", "has no field 'owner'"),
    ({"result": "v1", "field": "name", "text": "x"}, "fillers[0]", "nothing else"),
    (3, "fillers[0]", "expected"),
])
def test_a_template_filler_must_be_a_word_of_the_last_message_or_a_result_field(kb, templates, filler,
                                                                                  field, words):
    log = paper_dialog(kb, templates)
    log.records[5:] = log.records[5:7]  # the second user message and the call it led to
    with pytest.raises(InvalidInput) as caught:
        clicks.pick_template(log, templates, "t6", [filler])
    assert caught.value.field == field and words in caught.value.reason


def test_a_template_takes_one_filler_per_blank_and_must_exist(kb, templates):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, FIRST))
    with pytest.raises(InvalidInput) as caught:
        clicks.pick_template(log, templates, "t6", [])
    assert caught.value.field == "fillers" and "1 blank" in caught.value.reason
    with pytest.raises(InvalidInput) as caught:
        clicks.pick_template(log, templates, "t99", [])
    assert caught.value.field == "template"
    with pytest.raises(InvalidInput) as caught:
        clicks.pick_template(log, templates, "t6", {"tokens": [5]})
    assert caught.value.field == "fillers"


def test_an_api_call_names_a_missing_unknown_or_free_text_argument(kb):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, FIRST))
    cases = [({"query": {"tokens": [5]}, "latitude": source("latitude")}, "arguments.longitude"),
             ({"query": "coffee", "latitude": source("latitude"), "longitude": source("longitude")},
              "arguments.query"),
             ({"query": {"tokens": [5]}, "latitude": source("latitude"), "longitude": source("longitude"),
               "radius": {"tokens": [0]}}, "arguments.radius"),
             ({"query": {"tokens": [5]}, "latitude": source("address"), "longitude": source("longitude")},
              "arguments.latitude")]
    for arguments, field in cases:
        with pytest.raises(InvalidInput) as caught:
            clicks.call_api(log, kb, "find_place", arguments)
        assert caught.value.field == field
    with pytest.raises(InvalidInput) as caught:
        clicks.call_api(log, kb, "teleport", {})
    assert caught.value.field == "api"


def test_the_agent_sends_only_picked_templates_and_the_user_waits_for_the_message(kb, templates):
    log = clicks.start(kb)
    with pytest.raises(InvalidInput) as caught:
        clicks.send(log)
    assert caught.value.field == "template"
    log.add(clicks.pick_template(log, templates, "t1", []))
    with pytest.raises(InvalidInput) as caught:
        clicks.user_says(log, "hello?")
    assert caught.value.field == "turn"
    with pytest.raises(InvalidInput) as caught:
        clicks.pick_template(log, templates, "t6", [{"tokens": [0]}])
    assert "said nothing yet" in caught.value.reason
    log.add(clicks.send(log))
    assert log.add(clicks.user_says(log, "  to the airport  ")).text == "to the airport"
    for text in ("", "   ", None, "x" * 1001):
        with pytest.raises(InvalidInput) as caught:
            clicks.user_says(log, text)
        assert caught.value.field == "text"


def test_templates_have_only_empty_blanks_and_are_filled_by_substitution():
    assert render("{} is {{near}} {}", ["A", 2.0]) == "A is {near} 2"
    assert render("Open now: {}", [True]) == "Open now: yes"
    for bad in ("{0}", "{name}", "{0.__class__}", "{:>10}", "lone { brace", "lone } brace"):
        with pytest.raises(InvalidInput) as caught:
            render(bad, ["x"])
        assert caught.value.field == "template"
    assert render("{}", ["{0.__class__}"]) == "{0.__class__}"  # a filler is never formatted


def test_adding_a_template_gives_it_the_next_id_and_the_same_text_keeps_its_id(templates):
    new_id, grown = add_template(templates, "  It is   {} minutes away. ")
    assert new_id == "t13" and grown["t13"] == "It is {} minutes away." and "t13" not in templates
    assert add_template(grown, "It is {} minutes away.") == ("t13", grown)
    with pytest.raises(InvalidInput) as caught:
        add_template(templates, "It is {minutes} away")
    assert caught.value.field == "template"
