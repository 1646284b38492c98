"""The knowledge-base form STAR's wizards had (issue 24, item 3): every condition STAR's logged queries use
is written by the form as STAR wrote it, optional fields stay empty, required ones must be given, a query
asks each thing once; the wizard browses a query's matches and selects a primary and a secondary item,
logged and exported as STAR logs them, and every query and selection replays exactly."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from collections import Counter

import pytest
from sqlmodel import select

from tests.conftest import SHARED_DATA
from tests.test_star_dialog import launch_star
from tests.test_star_pages import act, send, star_worker, stored, take
from tests.test_worker_pages import JSON
from turkflow.dataset.export import ExportFilters
from turkflow.db import session_scope
from turkflow.errors import InvalidInput
from turkflow.models import Conversation, DialogEvent
from turkflow.protocols.star.dialog import form_constraints, knowledge_base, replay, star_documents
from turkflow.protocols.star.kb import FREE_TEXT, _check_value, check_repeats, constraints_from, parse_constraint

STAR_DATA = SHARED_DATA / "star"
TRAIN = STAR_DATA / "train.tar.gz"
TASKS = ("apartment_search", "restaurant_search", "ride_book")


@pytest.fixture(scope="module")
def kb():
    return knowledge_base(str(STAR_DATA / "apis"))


def _logged_queries():
    """Every query of STAR's training split: (API, its constraints)."""
    with tarfile.open(TRAIN) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".json"):
                for event in json.load(tar.extractfile(member))["Events"]:
                    if event["Action"] == "query":
                        yield event["APIName"], event["Constraints"]


def _squeezed(expression):
    return re.sub(r"\s", "", expression)


# ---- the form writes what STAR's form wrote ---------------------------------------------------------------


@pytest.mark.skipif(not TRAIN.is_file(), reason="STAR's training split is not in ../shared/data/star")
def test_every_condition_star_logged_is_written_by_the_form_as_star_wrote_it(kb):
    """Each logged condition our knowledge base accepts, given to the form as its condition and value, comes
    back as the same expression (STAR's own refusals aside: digits typed in free text, logged as numbers).
    Plain values are checked for the first 3,000; every other condition for all of them."""
    written, plain = Counter(), 0
    for api_name, constraints in _logged_queries():
        api = kb.apis.get(api_name)
        if api is None:
            continue
        for entry in constraints:
            for field, logged in entry.items():
                try:
                    constraint = parse_constraint(field, logged)
                    _check_value(api, constraint)
                except InvalidInput:
                    continue
                op = "is_not" if constraint.negated else constraint.op
                value = constraint.value
                if op == "equals":
                    if plain >= 3000 or (api.inputs[field].type in FREE_TEXT and not isinstance(value, str)):
                        continue
                    plain += 1
                if isinstance(value, str) and (value.strip() != value or not any(c.isalnum() for c in value)):
                    continue  # what was typed, without its edges ('"Angela "' is '"Angela"'), and some words
                made = form_constraints(api, {field: {"op": op, "value": value}})
                assert len(made) == 1 and _squeezed(made[0][field]) == _squeezed(logged), (api_name, logged)
                assert parse_constraint(field, made[0][field]) == constraint
                written[op] += 1
    assert set(written) == {"equals", "is_equal_to", "is_one_of", "is_at_least", "is_at_most",
                            "is_greater_than", "is_less_than", "contains", "contains_not", "is_not"}
    assert written["is_one_of"] > 700 and written["is_at_least"] + written["is_at_most"] > 150


def test_the_forms_fields_make_every_condition(kb):
    api = kb.api("apartment_search")
    assert form_constraints(api, {
        "Price.op": "between", "Price": "500", "Price.to": "900",
        "NumRooms.op": "is_at_least", "NumRooms": "2", "Level.op": "is_not", "Level": "3",
        "MaxLevel.op": "is_less_than", "MaxLevel": "9", "FloorSquareMeters.op": "is_greater_than",
        "FloorSquareMeters": "40", "BalconySide.op": "is_one_of", "BalconySide": ["east", "south"],
        "NearbyPOIs.op": "contains", "NearbyPOIs": ["Park", "School"], "HasElevator": "yes", "HasBalcony": "",
        "Name.op": "is_equal_to", "Name": ["Shadyside Apartments"],
    }) == [
        {"Level": "api.is_not(3)"}, {"MaxLevel": "api.is_less_than(9)"},
        {"BalconySide": 'api.is_one_of(["east","south"])'}, {"HasElevator": "True"},
        {"NumRooms": "api.is_at_least(2)"},
        {"FloorSquareMeters": "api.is_greater_than(40)"},
        {"NearbyPOIs": 'api.contains("Park")'}, {"NearbyPOIs": 'api.contains("School")'},
        {"Name": 'api.is_equal_to("Shadyside Apartments")'},
        {"Price": "api.is_at_least(500)"}, {"Price": "api.is_at_most(900)"},
    ]
    # empty fields ask nothing, whatever condition is chosen; an open range has one end
    assert form_constraints(api, {"Price.op": "between", "Price": "", "Price.to": "900", "Level.op": "is_not",
                                  "Level": "", "NearbyPOIs.op": "contains_not", "NearbyPOIs": []}) == [
        {"Price": "api.is_at_most(900)"}]
    # JSON clients may send the conditions as objects; several on one field as a list
    assert form_constraints(api, {"Price": [{"op": "is_at_least", "value": 500}, {"op": "is_less_than",
                                                                                  "value": 900}],
                                  "NearbyPOIs": {"op": "contains_not", "value": "Club"}}) == [
        {"NearbyPOIs": 'api.contains_not("Club")'},
        {"Price": "api.is_at_least(500)"}, {"Price": "api.is_less_than(900)"}]


@pytest.mark.parametrize("fields, field", [
    ({"HasElevator.op": "is_at_least", "HasElevator": "yes"}, "HasElevator.op"),
    ({"BalconySide.op": "is_at_least", "BalconySide": "east"}, "BalconySide.op"),
    ({"NearbyPOIs.op": "equals", "NearbyPOIs": "Park"}, "NearbyPOIs.op"),
    ({"Price.op": "between", "Price": "900", "Price.to": "500"}, "Price.to"),
    ({"Price.op": "is_at_least", "Price": "500", "Price.to": "900"}, "Price.to"),
    ({"Price.op": "is_at_least", "Price": "five hundred"}, "Price"),
    ({"BalconySide": ["east", "south"]}, "BalconySide"),
    ({"BalconySide.op": "is_one_of", "BalconySide": ["east", "up"]}, "BalconySide"),
    ({"NearbyPOIs.op": "contains", "NearbyPOIs": "Casino"}, "NearbyPOIs"),
    ({"Price.max": "900"}, "Price.max"),
    ({"Price": {"op": "between", "value": 500}}, "Price"),
    ({"Price": {"op": "is_at_least", "value": 500, "unit": "EUR"}}, "Price"),
    ({"Price": {"op": "is_at_least", "value": 500}, "Price.op": "is_at_most"}, "Price"),
    ({"BalconySide.op": "is_one_of", "BalconySide": ["east"] * 101}, "BalconySide"),
])
def test_a_condition_the_field_cannot_take_is_refused_naming_it(kb, fields, field):
    with pytest.raises(InvalidInput) as refused:
        form_constraints(kb.api("apartment_search"), fields)
    assert refused.value.field == field


def test_a_query_asks_each_thing_once(kb):
    def check(*entries):
        check_repeats(constraints_from(list(entries)))

    check({"Price": "api.is_at_least(500)"}, {"Price": "api.is_at_most(900)"},
          {"NearbyPOIs": 'api.contains("Park")'}, {"NearbyPOIs": 'api.contains("School")'})
    for repeated in ([{"Name": '"Old Town Inn"'}, {"Name": '"Hyatt Hotel"'}],
                     [{"Name": '"Shadyside Inn"'}, {"Name": 'api.is_equal_to("Shadyside Inn")'}],
                     [{"Day": '"Monday"'}, {"Day": 'api.is_one_of(["Monday","Friday"])'}],
                     [{"Level": "api.is_greater_than(2)"}, {"Level": "api.is_at_least(4)"}],
                     [{"NearbyPOIs": 'api.contains("Park")'}, {"NearbyPOIs": 'api.contains("Park")'}]):
        with pytest.raises(InvalidInput) as refused:
            check({"City": '"Pittsburgh"'}, *repeated)
        assert refused.value.field == list(repeated[1])[0]


# ---- through the pages ----------------------------------------------------------------------------------


@pytest.fixture
def star_kb(app, settings, providers, tmp_path):
    """A dialog over three of STAR's own tasks (searches with ranges, lists and one booking API); its user
    opened it and a wizard holds the second turn, the apartment search open."""
    copy = tmp_path / "star"
    shutil.copytree(STAR_DATA / "apis", copy / "apis")
    for name in TASKS:
        shutil.copytree(STAR_DATA / "tasks" / name, copy / "tasks" / name)
    launch_star(settings, providers, tasks_per_dialog=3, tasks_dir=copy / "tasks")
    user, wizard = star_worker(app, settings, "user", stage=2), star_worker(app, settings, "wizard", stage=2)
    send(user, take(user), settings, providers, action="utter", text="I need a flat with a balcony.")
    page = take(wizard)
    assert act(wizard, page, "select_task", task="apartment_search").status_code == 200
    return user, wizard, page


RANGE_AND_ONE_OF = {"Price.op": "is_at_most", "Price": "3000", "BalconySide.op": "is_one_of",
                    "BalconySide": ["east", "south"], "HasBalcony": "yes"}


def _matches(kb, constraints):
    return [{"APIName": "apartment_search", **row}
            for row in kb.query("apartment_search", constraints).items]


def _replayed(settings):
    with session_scope(settings.database_url) as s:
        return replay(s, [c.id for c in s.exec(select(Conversation))])


def test_the_form_shows_each_fields_conditions_and_what_is_required(star_kb, settings):
    _, wizard, page = star_kb
    html = wizard.get(page).get_data(as_text=True)
    assert 'name="kb-Price.op"' in html and '<option value="is_at_least">at least</option>' in html
    assert '<option value="between">between</option>' in html and 'name="kb-Price.to"' in html
    assert '<option value="is_one_of">is one of</option>' in html
    assert re.search(r'<select name="kb-BalconySide" multiple', html)
    assert '<option value="contains_not">does not contain</option>' in html
    assert "(choose one)" not in html  # the apartment search asks nothing of anyone
    form = {f["name"]: f for f in wizard.get(page, headers=JSON).get_json()["star"]["wizard"]["form"]}
    assert [o["name"] for o in form["NearbyPOIs"]["ops"]] == ["contains", "contains_not"]
    assert not any(f["required"] for f in form.values())

    act(wizard, page, "select_task", task="ride_book")
    html = wizard.get(page).get_data(as_text=True)
    required = re.search(r'<select name="kb-RequestType"[^>]*>\s*<option value="">([^<]*)<', html)
    assert required and required.group(1) == "(choose one)" and "(any)" not in required.group(0)
    assert re.search(r'name="kb-CustomerName"[^>]* required', html)
    before = stored(settings)
    refused = act(wizard, page, "query", api="ride_book", form={
        "CustomerName": "Mark", "DepartureLocation": "University", "ArrivalLocation": "Park"})
    assert refused.status_code == 400 and refused.get_json()["field"] == "RequestType"
    assert stored(settings) == before


def test_a_wizard_queries_a_range_and_a_one_of_browses_and_selects_primary_and_secondary(
        star_kb, settings, providers, kb):
    _, wizard, page = star_kb
    answered = act(wizard, page, "query", api="apartment_search", form=RANGE_AND_ONE_OF)
    assert answered.status_code == 200, answered.get_data(as_text=True)
    query, returned = answered.get_json()["logged"]
    assert query["Constraints"] == [{"HasBalcony": "True"}, {"BalconySide": 'api.is_one_of(["east","south"])'},
                                    {"Price": "api.is_at_most(3000)"}]
    matches = _matches(kb, query["Constraints"])
    assert len(matches) > 2 and returned["Item"] == matches[0] and returned["TotalItems"] == len(matches)
    query_id = answered.get_json()["wizard"]["kb_log"][0]["event_id"]
    shown = answered.get_json()["wizard"]
    assert shown["selected"]["primary"]["item"]["id"] == matches[0]["id"]  # the answer is the primary item
    assert shown["selected"]["secondary"] is None

    browsed = wizard.get(f"{page}?query={query_id}&position=1", headers=JSON).get_json()["star"]["wizard"]
    entry = browsed["kb_log"][0]
    assert (entry["position"], entry["total"], entry["browsable"]) == (1, len(matches), True)
    assert entry["item"] == {k: v for k, v in matches[1].items() if k != "APIName"}

    primary = act(wizard, page, "select_primary", query=query_id, position=1)
    assert primary.status_code == 200
    assert primary.get_json()["logged"][0]["Selected"] == matches[1]
    assert primary.get_json()["wizard"]["kb_log"][0]["position"] == 1  # the selected item stays in view
    secondary = act(wizard, page, "select_secondary", query=query_id, position=0).get_json()["wizard"]
    assert secondary["selected"]["primary"]["item"]["id"] == matches[1]["id"]
    assert secondary["selected"]["secondary"]["item"]["id"] == matches[0]["id"]
    html = wizard.get(page).get_data(as_text=True)
    primary_box = html[html.index('id="kb-primary"'):html.index('id="kb-secondary"')]
    assert f"<dd>{matches[1]['Price']}</dd>" in primary_box
    # the replies describe the primary item
    send(wizard, page, settings, providers, action="utter", text="I found two flats; the first has a south balcony.")

    assert _replayed(settings) == (3, [])  # the query and both selections
    with session_scope(settings.database_url) as s:
        doc = next(star_documents(s, settings.worker_hash_key, ExportFilters()))
    wizard_events = [e for e in doc["Events"] if e["Agent"] == "Wizard"]
    assert [e["Action"] for e in wizard_events] == ["select_task", "query", "select_primary", "select_secondary",
                                                    "utter"]
    select_task, query_event, select_primary, select_secondary, utter = wizard_events
    assert "PrimaryItem" not in select_task and "PrimaryItem" not in query_event  # nothing selected yet
    # each wizard event carries the items selected as it happened, as STAR's do (a selection's own event the
    # ones before it)
    assert select_primary["PrimaryItem"] == matches[0] and "SecondaryItem" not in select_primary
    assert select_secondary["PrimaryItem"] == matches[1] and "SecondaryItem" not in select_secondary
    assert (utter["PrimaryItem"], utter["SecondaryItem"]) == (matches[1], matches[0])
    assert not any("Selected" in e or "Query" in e or "Position" in e for e in doc["Events"])


def test_the_no_script_form_queries_browses_and_selects(star_kb, settings, kb):
    _, wizard, page = star_kb
    posted = wizard.post(f"{page}/action", data={
        "action": "query", "api": "apartment_search", "kb-Price.op": "between", "kb-Price": "1000",
        "kb-Price.to": "4000", "kb-NearbyPOIs.op": "contains", "kb-NearbyPOIs": "Park",
        "kb-BalconySide.op": "is_one_of", "kb-BalconySide": ["north", "west"], "kb-Level.op": "equals",
        "kb-Level": "", "kb-HasElevator": ""})
    assert posted.status_code == 303, posted.get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        query = s.exec(select(DialogEvent).where(DialogEvent.action == "query")).one()
        query_id, constraints = query.id, query.data["Constraints"]
    assert constraints == [{"BalconySide": 'api.is_one_of(["north","west"])'},
                           {"NearbyPOIs": 'api.contains("Park")'},
                           {"Price": "api.is_at_least(1000)"}, {"Price": "api.is_at_most(4000)"}]
    matches = _matches(kb, constraints)
    assert len(matches) >= 2
    html = wizard.get(page).get_data(as_text=True)
    assert f"Item 1 of {len(matches)}" in html
    next_link = re.search(r'<a class="button" rel="next" data-browse="1" href="([^"]+)"', html)
    assert next_link and "Previous" not in html[html.index('id="kb-results"'):]
    second = wizard.get(next_link.group(1).replace("&amp;", "&")).get_data(as_text=True)
    assert f"Item 2 of {len(matches)}" in second and 'rel="prev"' in second
    assert '<input type="hidden" name="position" value="1">' in second

    selected = wizard.post(f"{page}/action", data={"action": "select_primary", "query": str(query_id),
                                                   "position": "1"})
    assert selected.status_code == 303
    assert f"query={query_id}" in selected.headers["Location"] and "position=1" in selected.headers["Location"]
    html = wizard.get(selected.headers["Location"]).get_data(as_text=True)
    primary_box = html[html.index('id="kb-primary"'):html.index('id="kb-secondary"')]
    assert f"<dd>{matches[1]['FloorSquareMeters']}</dd>" in primary_box and f"Item 2 of {len(matches)}" in html
    assert _replayed(settings) == (2, [])


@pytest.mark.parametrize("form, written", [
    ({"Price.op": "is_at_least", "Price": "1000"}, "api.is_at_least(1000)"),
    ({"Price.op": "is_at_most", "Price": "2000"}, "api.is_at_most(2000)"),
    ({"Price.op": "is_greater_than", "Price": "1000"}, "api.is_greater_than(1000)"),
    ({"Price.op": "is_less_than", "Price": "2000"}, "api.is_less_than(2000)"),
    ({"NumRooms.op": "is_not", "NumRooms": "3"}, "api.is_not(3)"),
    ({"NumRooms.op": "is_equal_to", "NumRooms": "3"}, "api.is_equal_to(3)"),
    ({"NumRooms": "3"}, "3"),
    ({"BalconySide.op": "is_one_of", "BalconySide": ["east", "west"]}, 'api.is_one_of(["east","west"])'),
    ({"Name.op": "is_equal_to", "Name": "North Hill Apartments"}, 'api.is_equal_to("North Hill Apartments")'),
    ({"Name.op": "is_not", "Name": "North Hill Apartments"}, 'api.is_not("North Hill Apartments")'),
    ({"Name": "North Hill Apartments"}, '"North Hill Apartments"'),
    ({"NearbyPOIs.op": "contains", "NearbyPOIs": "Museum"}, 'api.contains("Museum")'),
    ({"NearbyPOIs.op": "contains_not", "NearbyPOIs": "Museum"}, 'api.contains_not("Museum")'),
    ({"HasElevator": "no"}, "False"),
])
def test_every_condition_made_by_the_form_replays_exactly(star_kb, settings, kb, form, written):
    _, wizard, page = star_kb
    posted = wizard.post(f"{page}/action", data={"action": "query", "api": "apartment_search",
                                                 **{f"kb-{k}": v for k, v in form.items()}})
    assert posted.status_code == 303, posted.get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        query = s.exec(select(DialogEvent).where(DialogEvent.action == "query")).one()
        answer = s.exec(select(DialogEvent).where(DialogEvent.action == "return_item")).one().data
    assert query.data["Constraints"] == [{next(iter(form)).split(".")[0]: written}]
    assert answer["TotalItems"] == len(_matches(kb, query.data["Constraints"]))
    assert _replayed(settings) == (1, [])


@pytest.mark.parametrize("body, field", [
    ({"api": "apartment_search", "constraints": [{"Price": "api.is_at_least(500)"},
                                                 {"Price": "api.is_at_least(700)"}]}, "Price"),
    ({"api": "apartment_search", "constraints": [{"Name": '"Shadyside Apartments"'},
                                                 {"Name": '"North Hill Apartments"'}]}, "Name"),
    ({"api": "apartment_search", "form": {"Price": [{"op": "is_at_most", "value": 900},
                                                    {"op": "is_less_than", "value": 700}]}}, "Price"),
    ({"api": "apartment_search", "constraints": [{"NearbyPOIs": 'api.contains("Park")'},
                                                 {"NearbyPOIs": 'api.contains("Park")'}]}, "NearbyPOIs"),
])
def test_a_query_carrying_a_constraint_twice_is_a_400_naming_the_field(star_kb, settings, body, field):
    _, wizard, page = star_kb
    before = stored(settings)
    refused = act(wizard, page, "query", **body)
    assert refused.status_code == 400 and refused.get_json()["field"] == field
    assert stored(settings) == before


def test_selecting_or_browsing_what_is_not_there_is_refused_naming_it(star_kb, settings, kb):
    _, wizard, page = star_kb
    answered = act(wizard, page, "query", api="apartment_search", form={"Price": "1234"}).get_json()
    nothing = answered["wizard"]["kb_log"][0]
    assert nothing["item"] is None
    found = act(wizard, page, "query", api="apartment_search", form={"NumRooms": "3", "Level": "2"}).get_json()
    entry = found["wizard"]["kb_log"][0]
    before = stored(settings)
    for fields, field in (({"query": nothing["event_id"], "position": 0}, "position"),
                          ({"query": entry["event_id"], "position": entry["total"]}, "position"),
                          ({"query": 999999, "position": 0}, "query"), ({"query": "x1"}, "query"),
                          ({"query": entry["event_id"], "position": -1}, "position"),
                          ({"query": entry["event_id"], "position": 0, "item": 3}, "item")):
        for action in ("select_primary", "select_secondary"):
            refused = act(wizard, page, action, **fields)
            assert refused.status_code == 400 and refused.get_json()["field"] == field, fields
    assert stored(settings) == before
    refused = wizard.get(f"{page}?query={entry['event_id']}&position={entry['total']}", headers=JSON)
    assert refused.status_code == 400 and refused.get_json()["field"] == "position"
    page_again = wizard.get(f"{page}?query=abc")
    assert page_again.status_code == 400 and "query: expected a whole number" in page_again.get_data(as_text=True)
    assert 'id="kb-form"' in page_again.get_data(as_text=True)


def test_a_booking_answer_is_one_item_to_select_and_no_browsing(star_kb, settings):
    _, wizard, page = star_kb
    act(wizard, page, "select_task", task="ride_book")
    booked = act(wizard, page, "query", api="ride_book", form={
        "CustomerName": "Mark", "DepartureLocation": "University", "ArrivalLocation": "Park",
        "RequestType": "Check", "ServiceProvider.op": "is_one_of", "ServiceProvider": ["Uber", "Lyft"],
        "MinutesTillPickup.op": "is_less_than", "MinutesTillPickup": "15"})
    assert booked.status_code == 200, booked.get_data(as_text=True)
    query, returned = booked.get_json()["logged"]
    assert {"ServiceProvider": 'api.is_one_of(["Uber","Lyft"])'} in query["Constraints"]
    entry = booked.get_json()["wizard"]["kb_log"][0]
    assert not entry["browsable"]
    selected = act(wizard, page, "select_secondary", query=entry["event_id"], position=0).get_json()
    assert selected["wizard"]["selected"]["secondary"]["item"] == {
        k: v for k, v in returned["Item"].items() if k != "APIName"}
    assert act(wizard, page, "select_primary", query=entry["event_id"], position=1).status_code == 400
    assert _replayed(settings) == (2, [])
