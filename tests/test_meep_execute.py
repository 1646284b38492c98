"""Executable MEEP logs: executing a log rebuilds every utterance and re-runs every API call, and each
difference names the click."""

from __future__ import annotations

import json

import pytest

from turkflow.errors import InvalidDocument
from turkflow.protocols.meep.execute import execute
from turkflow.protocols.meep.log import SessionLog

from tests.test_meep_clicks import kb, paper_dialog, templates  # noqa: F401  (fixtures)


@pytest.fixture
def log(kb, templates):
    return paper_dialog(kb, templates)


def row(kb, place_id):
    return next(r for r in kb.tables["places"] if r["place_id"] == place_id)


def test_an_untouched_log_executes_without_a_difference(log, kb, templates):
    assert execute(log, templates, kb) == []


def test_the_json_form_reads_back_to_the_same_log_and_executes_the_same(log, kb, templates):
    text = json.dumps(log.to_json())
    again = SessionLog.from_json(json.loads(text))
    assert again == log and json.dumps(again.to_json()) == text
    assert execute(again, templates, kb) == []


def test_a_changed_database_row_names_the_call_that_returned_it_and_the_clicks_that_used_it(
        log, kb, templates):
    row(kb, "p03")["name"] = "Harbor Roasters"  # the place the second find_place returned
    differences = execute(log, templates, kb)
    first = differences[0]
    assert (first.click, first.kind, first.name, first.what) == (6, "api_call", "find_place", "results")
    assert first.logged[0]["name"] == "Coffee Harbor" and first.now[0]["name"] == "Harbor Roasters"
    assert "click 6 (api_call find_place): results was" in first.describe()
    # v2's name was never clicked, so nothing later differs
    assert len(differences) == 1


def test_a_changed_row_carries_into_every_later_click_that_read_it(log, kb, templates):
    row(kb, "p01")["street_name"] = "Venice Way"
    found = [(d.click, d.kind, d.what, d.logged, d.now) for d in execute(log, templates, kb)]
    assert found[0][:3] == (1, "api_call", "results")
    assert found[1:] == [
        (2, "template", "fillers[1]", "Venice Boulevard", "Venice Way"),
        (2, "template", "utterance", "Bluebird Coffee on Venice Boulevard is 5 minutes away.",
         "Bluebird Coffee on Venice Way is 5 minutes away."),
        (4, "send", "message", "Bluebird Coffee on Venice Boulevard is 5 minutes away. Shall we go?",
         "Bluebird Coffee on Venice Way is 5 minutes away. Shall we go?"),
    ]


def test_a_moved_place_changes_the_arguments_of_later_calls(log, kb, templates):
    row(kb, "p01")["latitude"] = 34.0031
    found = {(d.click, d.what) for d in execute(log, templates, kb)}
    assert {(1, "results"), (6, "arguments.latitude"), (6, "results"), (11, "arguments.latitude"),
            (11, "results")} <= found


def test_a_changed_template_names_each_click_that_picked_it(log, kb, templates):
    templates["t5"] = "Shall we head there now?"
    differences = execute(log, templates, kb)
    assert [(d.click, d.kind, d.name, d.what) for d in differences] == [
        (3, "template", "t5", "template"), (3, "template", "t5", "utterance"), (4, "send", "", "message"),
        (8, "template", "t5", "template"), (8, "template", "t5", "utterance"), (9, "send", "", "message")]
    assert (differences[1].logged, differences[1].now) == ("Shall we go?", "Shall we head there now?")
    assert differences[2].describe() == (
        'click 4 (send): message was "Bluebird Coffee on Venice Boulevard is 5 minutes away. Shall we go?", '
        'executing gives "Bluebird Coffee on Venice Boulevard is 5 minutes away. Shall we head there now?"')


def test_a_removed_template_or_api_is_named(log, kb, templates):
    del templates["t11"]
    del kb.apis["start_driving"]
    found = [(d.click, d.what, d.now) for d in execute(log, templates, kb)]
    assert (11, "api", {"error": "choose one of: find_place, places_nearby, place_details, "
                                 "distance_matrix"}) in found
    assert (12, "template", None) in found


def test_a_result_that_is_no_longer_found_leaves_its_later_clicks_without_a_value(
        log, kb, templates):
    kb.tables["places"] = [r for r in kb.tables["places"] if r["place_id"] != "p03"]
    found = [(d.click, d.what, d.now) for d in execute(log, templates, kb)]
    assert found[0][:2] == (6, "results") and found[0][2][0]["name"] == "Bluebird Coffee"
    kb.tables["places"] = []
    found = [(d.click, d.what, d.now) for d in execute(log, templates, kb)]
    assert (1, "results", []) in found
    assert (2, "fillers[0]", {"error": "there is no result 'v1' in the panel"}) in found


def test_a_log_from_another_tokenizer_is_reported(log, kb, templates):
    log.tokenizer = "spacy-blank-en-3.8"
    assert [(d.click, d.what) for d in execute(log, templates, kb)] == [(-1, "tokenizer")]


def test_an_edited_user_message_names_the_clicks_on_its_words(log, kb, templates):
    document = log.to_json()
    document["records"][5]["text"] = "Is it the one across from Harbor Books?"
    edited = SessionLog.from_json(document)
    found = [(d.click, d.what, d.logged, d.now) for d in execute(edited, templates, kb)]
    assert found[0] == (6, "arguments.query", "Coffee Harbor", "Harbor Books")
    assert (7, "fillers[2]", "Coffee Harbor", "Harbor Books") in found


@pytest.mark.parametrize("change, where", [
    (lambda d: d.pop("records"), "log: records is missing"),
    (lambda d: d["records"][1].update(kind="telepathy"), "records[1].kind"),
    (lambda d: d["records"][1]["arguments"]["query"]["clicks"][0].update(token="5"),
     "records[1].arguments.query.clicks[0].token: expected int"),
    (lambda d: d["records"][2]["fillers"][0]["clicks"][0].pop("value"), "records[2].fillers[0].clicks[0]"),
])
def test_a_malformed_log_names_where(log, change, where):
    document = log.to_json()
    change(document)
    with pytest.raises(InvalidDocument) as caught:
        SessionLog.from_json(document)
    assert where in caught.value.message
