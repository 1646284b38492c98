"""STAR task schemas load from the shared data folder, and a bad file says which file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turkflow.errors import InvalidDocument
from turkflow.protocols.star.schemas import load_schema, load_schemas

from tests.conftest import SHARED_DATA

TASKS = SHARED_DATA / "star" / "tasks"
APIS = SHARED_DATA / "star" / "apis" / "apis"


@pytest.fixture(scope="module")
def schemas():
    return load_schemas(TASKS)


def test_every_shared_task_loads_and_names_an_existing_api_and_image(schemas):
    assert len(schemas) == 24
    for name, schema in schemas.items():
        assert (APIS / f"{schema.api}.json").exists(), name
        assert schema.image is not None and schema.image.name == f"{name}.jpg"


def test_weather_graph_runs_from_hello_through_the_query_to_the_forecast(schemas):
    graph = schemas["weather"].graph
    assert graph.start == "hello"
    path, node = [], graph.start
    while node is not None and node not in path:
        path.append(node)
        node = graph.successor(node)
    assert path == ["hello", "weather_ask_day", "weather_ask_location", "query", "weather_inform_forecast",
                    "anything_else"]
    assert graph.predecessors("query") == ("weather_ask_location",)


def test_templates_expose_their_slots_and_query_nodes_are_not_replies(schemas):
    weather = schemas["weather"]
    forecast = weather.templates["weather_inform_forecast"]
    assert [(s.name, s.spec) for s in forecast.slots] == [("weather", "s"), ("day", "s"), ("city", "s"),
                                                          ("temperature", "d")]
    labels = {t.label for t in weather.replies()}
    assert "query" not in labels and "weather_ask_day" in labels
    hotel = schemas["hotel_book"]
    assert hotel.declared_name == "hotel_reserve" and hotel.api == "hotel_book"
    assert hotel.templates["query_book"].is_query


def write(tmp_path: Path, document) -> Path:
    folder = tmp_path / "broken_task"
    folder.mkdir()
    (folder / "broken_task.json").write_text(document if isinstance(document, str) else json.dumps(document))
    return folder


def test_a_graph_node_without_a_reply_is_one_error_naming_file_and_node(tmp_path):
    folder = write(tmp_path, {"task": "t", "replies": {"hello": "Hi"}, "graph": {"hello": "ask_nothing"}})
    with pytest.raises(InvalidDocument) as raised:
        load_schema(folder)
    assert "broken_task.json" in raised.value.message and "'ask_nothing'" in raised.value.message


@pytest.mark.parametrize("document, words", [
    ("{not json", "not valid JSON"),
    ({"task": "t", "graph": {}}, "'replies'"),
    ({"task": "t", "replies": {"hello": 3}, "graph": {}}, "reply 'hello' is not text"),
    ({"task": "t", "replies": {"hello": "Hi {name"}, "graph": {}}, "not a valid template"),
])
def test_malformed_schema_files_are_refused_with_the_reason(tmp_path, document, words):
    with pytest.raises(InvalidDocument) as raised:
        load_schema(write(tmp_path, document))
    assert words in raised.value.message and "broken_task.json" in raised.value.message
