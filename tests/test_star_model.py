"""The next-action model behind STAR's reply suggestions: shipped with turkflow and read with no network,
trained by ``turkflow star train`` reproducibly from a seed, learning from STAR's logs which labels were
replies and how values were rendered."""

from __future__ import annotations

import shutil
import socket

import numpy as np
import pytest
from click.testing import CliRunner

from tests.conftest import SHARED_DATA
from turkflow.cli.main import main
from turkflow.protocols.star.log import load_dialogues
from turkflow.protocols.star.model import fit, gather, learn_renderings
from turkflow.protocols.star.schemas import load_schemas
from turkflow.protocols.star.suggestions import (
    MODEL_PATH,
    DialogState,
    NextActionModel,
    Ranker,
    labels,
    shipped_model,
)

STAR = SHARED_DATA / "star"


@pytest.fixture(scope="module")
def schemas():
    return load_schemas(STAR / "tasks")


@pytest.fixture(scope="module")
def slice_corpus(schemas):
    """The picks of the first 60 sample dialogues (a small slice of the training split)."""
    return gather(load_dialogues(STAR / "dialogues")[:60], schemas)


def test_the_shipped_model_loads_from_the_package_without_the_network(monkeypatch, schemas):
    def no_network(*args, **kwargs):
        raise AssertionError("the model tried to reach the network")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    model = NextActionModel.load(MODEL_PATH)
    assert MODEL_PATH.stat().st_size < 5_000_000
    assert set(model.tasks) == set(schemas)  # every STAR task has its classifier
    assert model.meta["seed"] == 0
    ranker = Ranker.for_schema(schemas["party_plan"], model)
    assert ranker.learned is not None and labels(ranker.rank(DialogState(), 1)) == ["hello"]


def test_training_on_a_slice_is_reproducible_from_the_seed(slice_corpus, schemas):
    first, again = fit(slice_corpus, schemas, seed=7), fit(slice_corpus, schemas, seed=7)
    assert np.array_equal(first.prior, again.prior)
    assert first.tasks.keys() == again.tasks.keys() and first.tasks
    for name, part in first.tasks.items():
        assert part.labels == again.tasks[name].labels and part.features == again.tasks[name].features
        assert np.array_equal(part.weights, again.tasks[name].weights)


def test_a_model_saved_and_loaded_ranks_the_same(tmp_path, slice_corpus, schemas):
    model = fit(slice_corpus, schemas, seed=1)
    model.save(tmp_path / "m.npz")
    loaded = NextActionModel.load(tmp_path / "m.npz")
    state = DialogState(last_label="hello", used=("hello",), user_text="I want the weather in Chicago")
    for name in model.tasks:
        assert labels(Ranker.for_schema(schemas[name], model).rank(state)) == labels(
            Ranker.for_schema(schemas[name], loaded).rank(state))


def test_the_labels_star_never_offered_as_replies_are_learned(slice_corpus, schemas):
    model = fit(slice_corpus, schemas, seed=0)
    for name, excluded in model.non_replies.items():
        assert not excluded & {"hello", "anything_else", "out_of_scope"}
    shipped = shipped_model()
    assert {"yes", "no", "available", "unavailable"} <= shipped.non_replies["doctor_schedule"]
    assert {"info_missing", "info_missing2"} <= shipped.non_replies["bank_fraud_report"]
    assert {"yes", "available"} <= shipped.common_non_replies


def test_renderings_are_learned_from_the_replies_star_sent(schemas):
    template = schemas["apartment_search"].templates["apartment_inform_search_result"]
    sent = ("OK, I found a free flat in {name}, located near {pois}, that is matching your search criteria.\n"
            "It is on level 3, has 40 square meters and 2 bedrooms.\nIt {balcony} and {elevator}, and comes at "
            "the price of 900 per month.")
    renders = []
    for n, (balcony, side, elevator) in enumerate([(True, "east", True), (False, None, False),
                                                   (True, "south", False), (False, None, True)]):
        item = {"Name": f"Flat {n}", "NearbyPOIs": ["Park", "School"], "Level": 3, "FloorSquareMeters": 40,
                "NumRooms": 2, "HasBalcony": balcony, "HasElevator": elevator, "Price": 900,
                **({"BalconySide": side} if side else {})}
        text = sent.format(name=f"Flat {n}", pois="a Park and a School",
                           balcony=f"has a {side} facing balcony" if balcony else "lacks a balcony",
                           elevator="has a lift" if elevator else "has no lift")
        renders.append((n, template, text, item))
    learned = learn_renderings(renders)
    assert learned.booleans["has_balcony"] == ("has a {BalconySide} facing balcony", "lacks a balcony")
    assert learned.booleans["has_elevator"] == ("has a lift", "has no lift")
    assert learned.lists["pois"] == ("a {}", ", ", " and ")
    assert learn_renderings(renders[:1]).booleans == {}  # one example is not enough to learn from
    shipped = shipped_model().renderings  # learned from STAR's training split
    assert shipped.booleans["has_elevator"] == ("has an elevator", "does not have an elevator")
    assert shipped.lists["pois"][0] == "a {}"


def test_the_training_command_works_on_a_small_extracted_subset(tmp_path, schemas):
    data = tmp_path / "star"
    (data / "dialogues").mkdir(parents=True)
    for number in range(1, 41):
        shutil.copy(STAR / "dialogues" / f"{number}.json", data / "dialogues")
    shutil.copytree(STAR / "tasks", data / "tasks")
    out = tmp_path / "model.npz"
    result = CliRunner().invoke(main, ["star", "train", "--data", str(data), "--out", str(out), "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "wizard picks" in result.output and out.is_file()
    model = NextActionModel.load(out)
    assert model.meta["seed"] == 3 and model.tasks
    name = next(iter(model.tasks))
    assert Ranker.for_schema(schemas[name], model).rank(DialogState(), 1)


def test_the_training_command_names_what_is_missing(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["star", "train", "--data", str(tmp_path / "empty"),
                                       "--out", str(tmp_path / "m.npz")])
    assert result.exit_code == 1 and "tasks/" in result.output
