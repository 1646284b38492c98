"""MEEP's sample knowledge base: APIs defined over a table, the same answer for the same call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.meep.kb import KnowledgeBase

SAMPLE = Path(__file__).resolve().parents[1] / "turkflow" / "samples" / "meep"


@pytest.fixture
def kb():
    return KnowledgeBase.load(SAMPLE)


def here(kb, query):
    return {"query": query, "latitude": kb.start["latitude"], "longitude": kb.start["longitude"]}


def test_the_sample_defines_meeps_trip_destination_apis(kb):
    assert set(kb.apis) == {"find_place", "places_nearby", "place_details", "distance_matrix",
                            "start_driving"}
    assert dict(kb.apis["find_place"].arguments) == {"query": "text", "latitude": "number",
                                                     "longitude": "number"}


def test_find_place_prefers_the_place_holding_most_of_the_words(kb):
    [place] = kb.call("find_place", here(kb, "Bluebird Coffee on Venice Blvd"))
    assert (place["place_id"], place["name"], place["street_name"]) == ("p01", "Bluebird Coffee",
                                                                        "Venice Boulevard")
    assert list(place) == list(kb.apis["find_place"].returns)


def test_among_places_holding_the_same_words_the_nearest_comes_first(kb):
    [place] = kb.call("find_place", here(kb, "Bluebird"))
    assert place["place_id"] == "p01"  # Mar Vista, not the one in Santa Monica
    far = {"query": "Bluebird", "latitude": 34.0016, "longitude": -118.4825}
    assert kb.call("find_place", far)[0]["place_id"] == "p02"


def test_places_nearby_gives_up_to_three_within_three_miles_best_first(kb):
    found = kb.call("places_nearby", here(kb, "mexican tacos"))
    assert [p["name"] for p in found] == ["Taqueria Tres Hermanos", "La Palmera", "Casa Marisol"]
    assert all(p["distance_miles"] <= 3 * 1.3 + 0.1 for p in found)
    assert kb.call("places_nearby", here(kb, "lake")) == []  # Big Bear is a hundred miles away


def test_the_same_call_gives_the_same_answer(kb):
    again = KnowledgeBase.load(SAMPLE)
    trip = {"origin_latitude": 33.98, "origin_longitude": -118.44, "destination_latitude": 34.0021,
            "destination_longitude": -118.4301}
    for api, arguments in [("find_place", here(kb, "LAX terminal")), ("place_details", {"place_id": "p04"}),
                           ("distance_matrix", trip)]:
        assert kb.call(api, arguments) == again.call(api, arguments) != []


def test_details_distance_and_driving(kb):
    assert kb.call("place_details", {"place_id": "p04"}) == [
        {"name": "La Palmera", "rating": 4.6, "price": "$$", "open_now": True, "phone": "310-555-0104"}]
    assert kb.call("place_details", {"place_id": "p99"}) == []
    [trip] = kb.call("distance_matrix", {"origin_latitude": 33.9803, "origin_longitude": -118.4417,
                                         "destination_latitude": 34.0021, "destination_longitude": -118.4301})
    assert trip == {"distance_miles": 2.1, "duration_minutes": 5}
    assert kb.call("start_driving", {"latitude": 1.5, "longitude": 2}) == [
        {"latitude": 1.5, "longitude": 2, "status": "driving"}]


@pytest.mark.parametrize("api, arguments, field", [
    ("find_place", {"query": "coffee", "latitude": "north", "longitude": 1.0}, "arguments.latitude"),
    ("find_place", {"query": "coffee", "latitude": True, "longitude": 1.0}, "arguments.latitude"),
    ("find_place", {"query": "coffee", "latitude": 1.0}, "arguments.longitude"),
    ("find_place", {"query": "coffee", "latitude": 1.0, "longitude": 1.0, "radius": 3}, "arguments.radius"),
    ("find_place", {"query": "to the", "latitude": 1.0, "longitude": 1.0}, "arguments.query"),
    ("place_details", {"place_id": 4}, "arguments.place_id"),
    ("book_table", {}, "api"),
])
def test_a_bad_call_names_the_argument(kb, api, arguments, field):
    with pytest.raises(InvalidInput) as caught:
        kb.call(api, arguments)
    assert caught.value.field == field


@pytest.mark.parametrize("change, words", [
    (lambda d: d["apis"]["find_place"].update(function="teleport"), "function must be one of"),
    (lambda d: d["apis"]["find_place"].update(table="hotels"), "table must be one of"),
    (lambda d: d["apis"]["find_place"]["returns"].append("stars"), "returns names 'stars'"),
    (lambda d: d["apis"]["find_place"]["arguments"].pop("query"), "arguments must describe exactly"),
    (lambda d: d["apis"]["place_details"].update(key="id"), "key must be a column"),
    (lambda d: d["apis"]["places_nearby"].update(limit=0), "limit must be"),
])
def test_a_bad_definition_names_the_file_and_the_api(tmp_path, change, words):
    shutil.copytree(SAMPLE, tmp_path / "kb")
    path = tmp_path / "kb" / "apis.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    with pytest.raises(InvalidDocument) as caught:
        KnowledgeBase.load(tmp_path / "kb")
    assert str(path) in caught.value.message and "API '" in caught.value.message
    assert words in caught.value.message


def test_a_broken_table_line_is_named(tmp_path):
    shutil.copytree(SAMPLE, tmp_path / "kb")
    with (tmp_path / "kb" / "places.jsonl").open("a") as table:
        table.write("{not json\n")
    with pytest.raises(InvalidDocument, match=r"places.jsonl: line 19"):
        KnowledgeBase.load(tmp_path / "kb")
