"""The requester's Frames database: CSV or JSONL, typed columns, and one clear error for a bad file."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json

import pytest

from turkflow.errors import InvalidDocument
from turkflow.protocols.frames.database import load_database
from turkflow.protocols.frames.domain import SAMPLE, load_domain

SAMPLES = SAMPLE.parent


def make_trips_module():
    spec = importlib.util.spec_from_file_location("make_trips", SAMPLES / "make_trips.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sample_database_is_what_its_script_writes(tmp_path):
    make_trips = make_trips_module()
    make_trips.write(tmp_path / "trips.csv", make_trips.trips(240))
    assert (tmp_path / "trips.csv").read_bytes() == (SAMPLES / "trips.csv").read_bytes()


def test_the_sample_domain_loads_with_typed_columns_and_its_search_fields():
    domain = load_domain()
    db = domain.db
    assert 100 <= len(db.items) <= 300 and len(domain.templates) >= 6
    kinds = {name: column.type for name, column in db.columns.items()}
    assert kinds["departure"] == "date" and kinds["price"] == "integer" and kinds["category"] == "number"
    assert kinds["breakfast"] == "boolean" and kinds["destination"] == "text"
    assert not db.columns["hotel"].searchable and not db.columns["id"].searchable
    assert db.columns["price"].searchable and domain.sort.field == "price" and not domain.sort.descending
    assert {t.kind for t in domain.templates} == {"generic", "role_play"}
    assert any(t.alternate for t in domain.templates) and any(not t.alternate for t in domain.templates)
    first = db.items[0]
    assert isinstance(first["departure"], dt.date) and first["return"] > first["departure"]


def test_types_are_inferred_from_csv_text_and_jsonl_values_alike(tmp_path):
    (tmp_path / "flats.csv").write_text("rooms,rent,since,pets,area\n2,1200,2024-01-05,yes,Plateau\n"
                                        "3,1500.5,2024-02-01,no,Verdun\n")
    lines = [{"rooms": 2, "rent": 1200, "since": "2024-01-05", "pets": True, "area": "Plateau"},
             {"rooms": 3, "rent": 1500.5, "since": "2024-02-01", "pets": False, "area": "Verdun"}]
    (tmp_path / "flats.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    from_csv = load_database(tmp_path / "flats.csv")
    from_jsonl = load_database(tmp_path / "flats.jsonl")
    for db in (from_csv, from_jsonl):
        assert {n: c.type for n, c in db.columns.items()} == {
            "id": "integer", "rooms": "integer", "rent": "number", "since": "date", "pets": "boolean",
            "area": "text"}
        assert [i["id"] for i in db.items] == [1, 2]  # no id column: the item's position
    assert from_csv.items == from_jsonl.items


def test_a_declared_type_wins_over_inference(tmp_path):
    (tmp_path / "codes.csv").write_text("id,code\na,0012\nb,0450\n")
    db = load_database(tmp_path / "codes.csv", types={"code": "text"})
    assert [i["code"] for i in db.items] == ["0012", "0450"] and db.columns["id"].type == "text"


@pytest.mark.parametrize("name, content, types, where, field", [
    ("trips.csv", "id,price\n1,100\n2,cheap\n", {"price": "integer"}, ":3: field 'price'", "price"),
    ("trips.csv", "id,when\n1,2025-02-30\n", {"when": "date"}, ":2: field 'when'", "when"),
    ("trips.csv", "id,price\n1,100\n1,200\n", None, ":3: field 'id'", "id"),
    ("trips.csv", "id,price\n1,100,7\n", None, ":2: 3 values for 2 columns", None),
    ("trips.csv", "id,price,price\n1,2,3\n", None, ":1: field 'price': named twice", "price"),
    ("trips.csv", "id,price\n1,100\n", {"cost": "integer"}, ":1: field 'cost'", "cost"),
    ("trips.csv", "id,price\n1,100\n", {"price": "money"}, ":1: field 'price': unknown type", "price"),
    ("trips.jsonl", '{"id": 1}\n{"id": 2, "price": }\n', None, ":2: not valid JSON", None),
    ("trips.jsonl", '{"id": 1}\n[1, 2]\n', None, ":2: expected one JSON object", None),
    ("trips.jsonl", '{"id": 1, "tags": ["a"]}\n', None, ":1: field 'tags'", "tags"),
    ("trips.jsonl", '{"id": 1, "n": 2}\n{"id": 2, "n": true}\n', {"n": "integer"}, ":2: field 'n'", "n"),
])
def test_a_bad_file_is_one_error_naming_the_file_the_line_and_the_field(tmp_path, name, content, types,
                                                                         where, field):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InvalidDocument) as raised:
        load_database(path, types=types)
    assert raised.value.message.startswith(f"{path}{where}") and raised.value.field == field
    assert len(raised.value.message) < 250


@pytest.mark.parametrize("name, content, words", [
    ("trips.xlsx", "x", "unknown format"),
    ("trips.csv", "", "empty"),
    ("trips.csv", "id,price\n", "no items"),
    ("missing.csv", None, "no such file"),
])
def test_files_that_are_not_databases_are_refused(tmp_path, name, content, words):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidDocument, match=words):
        load_database(path)


def test_a_bad_domain_file_names_the_template_and_the_slot(tmp_path):
    (tmp_path / "trips.csv").write_text((SAMPLES / "trips.csv").read_text())
    base = {"database": {"file": "trips.csv"}, "templates": [
        {"name": "t", "probability": 0.5, "text": "Go to {where}.",
         "slots": {"where": {"field": "destination"}}}]}
    (tmp_path / "ok.yaml").write_text(json.dumps(base))
    assert load_domain(tmp_path / "ok.yaml").templates[0].slots[0].op == "is"
    bad_cases = [
        ({"slots": {"where": {"field": "planet"}}}, "template 1 (t): slot 'where': field 'planet'"),
        ({"slots": {"where": {"field": "destination", "op": "at_most"}}}, "op 'at_most' does not fit"),
        ({"text": "Go to {where} with {whom}."}, "{whom} is not a slot"),
        ({"text": "Go to {where.__class__}."}, "write a slot as {name}"),
        ({"text": "Go somewhere."}, "slot 'where' does not appear"),
        ({"probability": 1.5}, "probability: must be between 0 and 1"),
        ({"alternate": {"text": "Try {where}.", "drop": ["where"]}}, "not a slot the alternate keeps"),
        ({"alternate": {"text": "More.", "change": {"where": 2}}}, "not a slot with a range"),
    ]
    for change, words in bad_cases:
        doc = json.loads(json.dumps(base))
        doc["templates"][0].update(change)
        (tmp_path / "bad.yaml").write_text(json.dumps(doc))
        with pytest.raises(InvalidDocument) as raised:
            load_domain(tmp_path / "bad.yaml")
        assert words in raised.value.message and str(tmp_path / "bad.yaml") in raised.value.message
