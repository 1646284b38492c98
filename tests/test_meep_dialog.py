"""MEEP dialogs on the pipeline: the requester's folder loaded as tasks, a goal and a start per conversation,
every click an event written all or none by ``record_action``, and replay of the log against the files as
they are on disk now."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlmodel import func, select

from tests.test_star_dialog import hold
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.protocols.registry import load_tasks
from turkflow.errors import Forbidden, InvalidDocument, InvalidInput
from turkflow.hits import lifecycle
from turkflow.dataset.export import ExportFilters
from turkflow.protocols.meep.dialog import (
    make_scenarios, read_tasks, record_action, replay, sgd_dialogues, sgd_services, submit_turn,
)
from turkflow.models import Conversation, DialogEvent, Task, Turn, Worker

SAMPLE = Path(__file__).resolve().parents[1] / "turkflow" / "samples" / "meep"
ASK = "Hi! I'd like to go to Bluebird Coffee on Main Street, please."  # tokens 7-11 name the place
QUERY = {"query": {"tokens": [7, 8, 9, 10, 11]}, "latitude": {"result": "source", "field": "latitude"},
         "longitude": {"result": "source", "field": "longitude"}}
FOUND = {"template": "t8", "fillers": [{"result": "v1", "field": "name"}, {"result": "v1", "field": "street_name"},
                                       {"result": "v1", "field": "duration_minutes"},
                                       {"result": "v1", "field": "distance_miles"}]}


def launch_meep(settings, providers, conversations: int = 1, folder: Path = SAMPLE) -> int:
    """Load the folder and launch a batch whose first conversation heads for Bluebird Coffee, Main Street."""
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(folder))
        tasks = list(s.exec(select(Task).where(Task.protocol == "meep").order_by(Task.id)))  # file order
        scenarios = make_scenarios(tasks, conversations, seed=1)
        batch, hits = lifecycle.launch_batch(s, tasks, conversations, name="meep pilot", max_turns=20,
                                             protocol="meep", scenarios=scenarios)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def first_conversation(settings) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation.id).order_by(Conversation.id)).first()


def paid_turn(settings, providers, conversation_id: int, who: str, role: str, clicks: list[tuple[str, dict]],
              body: dict) -> str:
    """Take the open turn, click, submit it with ``body`` and open the next one; returns the turn's text."""
    with session_scope(settings.database_url) as s:
        held, author, assignment = hold(s, conversation_id, who, role)
        for action, fields in clicks:
            record_action(s, held, author, action, fields)
        text = submit_turn(s, assignment, author, body).turn.text
    pipeline.open_next_turn(settings, providers, conversation_id)
    return text


def coffee_dialog(settings, providers, conversation_id: int) -> None:
    """The user asks for the café, the agent finds it by one clicked API call and says so in two clicked
    templates, the user agrees, the agent drives there, the user approves the destination on the map."""
    paid_turn(settings, providers, conversation_id, "U1-meep", "user", [], {"text": ASK})
    said = paid_turn(settings, providers, conversation_id, "A1-meep", "wizard",
                     [("call_api", {"api": "find_place", "arguments": QUERY}), ("pick_template", FOUND),
                      ("pick_template", {"template": "t5", "fillers": []})], {"action": "send"})
    assert said.startswith("I found Bluebird Coffee on Main Street. It is ") and said.endswith("Shall we go?")
    paid_turn(settings, providers, conversation_id, "U2-meep", "user", [], {"text": "Yes, let's go."})
    paid_turn(settings, providers, conversation_id, "A2-meep", "wizard", [
        ("call_api", {"api": "start_driving", "arguments": {"latitude": {"result": "v1", "field": "latitude"},
                                                            "longitude": {"result": "v1", "field": "longitude"}}}),
        ("pick_template", {"template": "t11", "fillers": [{"result": "v1", "field": "name"}]})],
        {"action": "send"})
    paid_turn(settings, providers, conversation_id, "U1-meep", "user", [], {"approved": "yes"})


def event_count(settings) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(func.count()).select_from(DialogEvent)).one()


# ---- loading and launching ------------------------------------------------------------------------------


def test_the_requester_folder_loads_as_a_task_per_goal(settings):
    tasks = read_tasks(SAMPLE)
    assert [t.key for t in tasks][:2] == ["meep:coffee-main-street", "meep:tacos-washington"]
    coffee = tasks[0]
    assert coffee.protocol == "meep" and coffee.star["destination"]["name"] == "Bluebird Coffee"
    assert coffee.star["destination"]["street_name"] == "Main Street"
    assert coffee.star["folder"] == str(SAMPLE.resolve()) and len(coffee.star["starts"]) == 3
    with session_scope(settings.database_url) as s:
        assert load_tasks(s, tasks).created == 6
        assert load_tasks(s, read_tasks(SAMPLE)).updated == 6  # loading again updates in place


@pytest.mark.parametrize(("file", "change", "named"), [
    ("scenarios.json", lambda d: d["goals"][1].update(destination="p99"), "goals[1].destination"),
    ("scenarios.json", lambda d: d["goals"][2].update(id="coffee-main-street"), "goals[2].id"),
    ("apis.json", lambda d: d["apis"]["find_place"].update(function="teleport"), "'find_place'"),
    ("templates.json", lambda d: d.update(t2="There is a {0.__class__}."), "'t2'"),
])
def test_one_bad_file_loads_nothing_and_names_what_is_wrong(tmp_path, file, change, named):
    folder = shutil.copytree(SAMPLE, tmp_path / "trips")
    document = json.loads((folder / file).read_text())
    change(document)
    (folder / file).write_text(json.dumps(document))
    with pytest.raises(InvalidDocument) as refused:
        read_tasks(folder)
    assert named in str(refused.value) and file in str(refused.value)


def test_a_launch_gives_each_conversation_a_goal_and_a_start(settings, providers):
    launch_meep(settings, providers, conversations=8)
    with session_scope(settings.database_url) as s:
        scenarios = [c.scenario for c in s.exec(select(Conversation).order_by(Conversation.id))]
    goals = [sc["goal_id"] for sc in scenarios]
    written = json.loads((SAMPLE / "scenarios.json").read_text())
    assert goals[:6] == [g["id"] for g in written["goals"]] and goals[6:] == goals[:2]  # round-robin
    starts = {sc["start"]["address"] for sc in scenarios}
    assert starts <= {start["address"] for start in written["starts"]}
    assert len(starts) > 1  # drawn per conversation
    assert scenarios[0]["destination"]["place_id"] == "p02" and scenarios[0]["goal"].startswith("You want a coffee")
    tasks = read_tasks(SAMPLE)
    assert make_scenarios(tasks, 5, seed=4) == make_scenarios(tasks, 5, seed=4)  # the seed decides
    with pytest.raises(InvalidInput) as refused:
        make_scenarios(tasks, 2, unhappy=0.5)
    assert refused.value.field == "unhappy"


# ---- clicks as events -----------------------------------------------------------------------------------


def test_every_click_is_an_event_with_its_arguments_and_the_turn_text_is_what_was_sent(settings, providers):
    launch_meep(settings, providers)
    conversation_id = first_conversation(settings)
    coffee_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        events = list(s.exec(select(DialogEvent).order_by(DialogEvent.id)))
        turns = list(s.exec(select(Turn).where(Turn.conversation_id == conversation_id).order_by(Turn.index)))
        conversation = s.get(Conversation, conversation_id)
        assert (conversation.status, conversation.end_reason) == ("completed", "user_complete")
    assert [(e.agent, e.action) for e in events[:8]] == [
        ("Scenario", "start"), ("User", "utter"), ("Agent", "call_api"), ("API", "return_results"),
        ("Agent", "pick_template"), ("Agent", "pick_template"), ("Agent", "send"), ("User", "utter")]
    assert [e.action for e in events[-2:]] == ["judge", "complete"]
    assert events[-2].data == {"Approved": True, "Latitude": 34.0016, "Longitude": -118.4825,
                               "Text": "Approved the destination"}
    call = events[2].data["Arguments"]["query"]
    assert call["value"] == "Bluebird Coffee on Main Street"
    assert [c["token"] for c in call["clicks"]] == [7, 8, 9, 10, 11] and call["clicks"][0]["message"] == 1
    assert events[3].data["Results"][0]["fields"]["place_id"] == "p02"
    assert events[4].data["Fillers"][0]["clicks"] == [{"result": "v1", "field": "name", "value": "Bluebird Coffee"}]
    assert [t.label for t in turns] == ["utter", "send", "utter", "send", "complete"]
    assert turns[1].text == events[6].data["Text"] and turns[3].text == "Great, we are going to Bluebird Coffee."


def test_a_refused_click_writes_nothing_and_names_the_field(settings, providers):
    launch_meep(settings, providers)
    conversation_id = first_conversation(settings)
    paid_turn(settings, providers, conversation_id, "U1-meep", "user", [], {"text": ASK})
    before = event_count(settings)
    bad = [
        ("pick_template", {"template": "t2", "fillers": [{"tokens": [7]}, {"tokens": [99]}]}, "fillers[1]"),
        ("pick_template", {"template": "t6", "fillers": ["Starbucks"]}, "fillers[0]"),  # free text
        ("pick_template", {"template": "t404", "fillers": []}, "template"),
        ("call_api", {"api": "find_place", "arguments": {**QUERY, "latitude": {"tokens": [7]}}}, "arguments.latitude"),
        ("call_api", {"api": "find_place", "arguments": QUERY, "extra": 1}, "extra"),
        ("send", {}, "template"),  # nothing picked yet
        ("utter", {"text": "I type as the agent"}, "action"),
    ]
    for action, fields, field in bad:
        with session_scope(settings.database_url) as s:
            held, author, _ = hold(s, conversation_id, "A1-meep", "wizard")
            with pytest.raises(InvalidInput) as refused:
                record_action(s, held, author, action, fields)
            assert refused.value.field == field, (action, refused.value)
    assert event_count(settings) == before
    with session_scope(settings.database_url) as s:  # someone who does not hold the turn
        held, _, _ = hold(s, conversation_id, "A1-meep", "wizard")
        other = Worker(external_id="A9-meep", role="wizard", onboarded=True)
        s.add(other)
        s.flush()
        with pytest.raises(Forbidden):
            record_action(s, held, other, "call_api", {"api": "find_place", "arguments": QUERY})
    assert event_count(settings) == before


# ---- replay ---------------------------------------------------------------------------------------------


def test_replay_of_an_untouched_batch_reports_nothing_and_names_the_click_a_changed_file_breaks(
        settings, providers, tmp_path):
    folder = shutil.copytree(SAMPLE, tmp_path / "trips")
    launch_meep(settings, providers, folder=folder)
    conversation_id = first_conversation(settings)
    coffee_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        ran, differences = replay(s, [conversation_id])
    assert (ran, differences) == (7, [])  # 2 calls, 3 templates, 2 sends

    places = (folder / "places.jsonl").read_text()
    (folder / "places.jsonl").write_text(places.replace('"2410 Main Street"', '"2412 Main Street"'))
    with session_scope(settings.database_url) as s:
        _, differences = replay(s, [conversation_id])
    assert [d.difference.what for d in differences] == ["results"]
    said = differences[0].describe()
    assert said.startswith(f"conversation {conversation_id}, turn 2, click 1 (api_call find_place): results")
    assert "2412 Main Street" in said

    (folder / "places.jsonl").write_text(places)
    templates = json.loads((folder / "templates.json").read_text())
    templates["t11"] = "Okay, we are going to {}."
    (folder / "templates.json").write_text(json.dumps(templates))
    with session_scope(settings.database_url) as s:
        _, differences = replay(s, [conversation_id])
    assert {(d.difference.kind, d.difference.name, d.difference.what) for d in differences} == {
        ("template", "t11", "template"), ("template", "t11", "utterance"), ("send", "", "message")}
    assert all(d.turn_index == 3 for d in differences)


# ---- SGD export -----------------------------------------------------------------------------------------


def test_the_sgd_export_carries_the_agents_api_calls_as_frames_with_the_clicked_arguments(settings, providers):
    launch_meep(settings, providers, conversations=2)
    conversation_id = first_conversation(settings)
    coffee_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        dialogues = list(sgd_dialogues(s, "key", ExportFilters()))  # the second one has said nothing yet
        services = sgd_services(s, set(dialogues[0]["services"]) | {"not_meep"})
    assert len(dialogues) == 1
    dialogue = dialogues[0]
    assert dialogue["dialogue_id"] == f"meep_{conversation_id}"
    assert dialogue["services"] == ["meep", "find_place", "start_driving"]
    assert [t["speaker"] for t in dialogue["turns"]] == ["USER", "SYSTEM"] * 2 + ["USER"]
    verdict = dialogue["turns"][-1]
    assert verdict["utterance"] == "Approved the destination" and verdict["frames"][0]["actions"][0]["act"] == "AFFIRM"
    found = dialogue["turns"][1]
    said, call = found["frames"]
    assert said["service"] == "meep" and [a["slot"] for a in said["actions"]] == ["t8", "t5"]
    assert said["actions"][0]["values"][:2] == ["Bluebird Coffee", "Main Street"]
    assert call["service"] == "find_place" and call["actions"][0] == {
        "act": "INFORM", "slot": "query", "values": ["Bluebird Coffee on Main Street"],
        "canonical_values": ["Bluebird Coffee on Main Street"]}
    assert call["service_call"]["parameters"]["latitude"] == "33.9803"
    assert call["service_results"][0]["address"] == "2410 Main Street"
    # where a value came from, in SGD's place for it: a slot's span of the utterance that says it
    asked = dialogue["turns"][0]
    assert asked["frames"][1] == {"service": "find_place", "actions": [], "slots": [
        {"slot": "query", "start": ASK.index("Bluebird"), "exclusive_end": ASK.index(", please")}]}
    sent = found["utterance"]
    spans = {slot["slot"]: sent[slot["start"]:slot["exclusive_end"]] for slot in call["slots"]}
    assert spans["name"] == "Bluebird Coffee" and spans["street_name"] == "Main Street"
    assert spans["duration_minutes"] == said["actions"][0]["values"][2]
    drove = dialogue["turns"][3]
    named = next(f for f in drove["frames"] if f["service"] == "find_place")  # v1, from an earlier turn
    assert [drove["utterance"][x["start"]:x["exclusive_end"]] for x in named["slots"]] == ["Bluebird Coffee"]
    assert [s["service_name"] for s in services] == ["find_place", "meep", "start_driving"]
    find_place = services[0]
    assert [slot["name"] for slot in find_place["slots"]] == ["query", "latitude", "longitude"]
    assert find_place["intents"][0]["result_slots"][:2] == ["place_id", "name"]


# ---- "+" and the destination -----------------------------------------------------------------------------

PLUS = {"words": [{"message": 1, "token": 7}, {"message": 1, "token": 8}, {"template": "t2", "token": 1},
                  {"blank": True}, {"template": "t2", "token": 8}]}  # "Bluebird Coffee is {}."


def test_a_template_an_agent_adds_is_shared_with_the_batch_and_replays(settings, providers):
    launch_meep(settings, providers, conversations=2)
    with session_scope(settings.database_url) as s:
        first, second = s.exec(select(Conversation.id).order_by(Conversation.id)).all()
    paid_turn(settings, providers, first, "U1-meep", "user", [], {"text": ASK})
    paid_turn(settings, providers, first, "A1-meep", "wizard", [
        ("call_api", {"api": "find_place", "arguments": QUERY}), ("add_template", PLUS),
        ("pick_template", {"template": "t13", "fillers": [{"result": "v1", "field": "neighborhood"}]})],
        {"action": "send"})
    paid_turn(settings, providers, second, "U2-meep", "user", [], {"text": "Tacos on Washington Boulevard"})
    with session_scope(settings.database_url) as s:
        held, author, _ = hold(s, second, "A2-meep", "wizard")
        from turkflow.protocols.meep.dialog import agent_view
        shown = agent_view(s, held, worker_id=author.id)
        assert {"id": "t13", "text": "Bluebird Coffee is {}."}.items() <= next(
            t for t in shown["templates"] if t["id"] == "t13").items()
        record_action(s, held, author, "pick_template", {"template": "t13", "fillers": [{"tokens": [0]}]})
        added = s.exec(select(DialogEvent).where(DialogEvent.action == "add_template")).one()
        assert added.data["TemplateText"] == "Bluebird Coffee is {}." and added.data["Words"][2] == {
            "template": "t2", "token": 1, "text": "is"}
    with session_scope(settings.database_url) as s:
        assert replay(s, [first, second])[1] == []


def test_once_the_car_drives_the_agent_calls_nothing_and_the_user_only_judges(settings, providers):
    launch_meep(settings, providers)
    conversation_id = first_conversation(settings)
    paid_turn(settings, providers, conversation_id, "U1-meep", "user", [], {"text": ASK})
    drive = ("call_api", {"api": "start_driving", "arguments": {"latitude": {"result": "v1", "field": "latitude"},
                                                                "longitude": {"result": "v1", "field": "longitude"}}})
    with session_scope(settings.database_url) as s:
        held, author, assignment = hold(s, conversation_id, "A1-meep", "wizard")
        record_action(s, held, author, "call_api", {"api": "find_place", "arguments": QUERY})
        record_action(s, held, author, *drive)
        with pytest.raises(InvalidInput) as refused:
            record_action(s, held, author, "call_api", {"api": "find_place", "arguments": QUERY})
        assert "driving" in refused.value.reason
        record_action(s, held, author, "pick_template", {"template": "t11", "fillers": [{"result": "v1", "field": "name"}]})
        submit_turn(s, assignment, author, {"action": "send"})
    pipeline.open_next_turn(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        held, author, assignment = hold(s, conversation_id, "U1-meep", "user")
        from turkflow.protocols.meep.dialog import user_view
        assert user_view(s, held)["destination"] == {"latitude": 34.0016, "longitude": -118.4825,
                                                      "name": "Bluebird Coffee"}
        for action, fields in (("utter", {"text": "Thanks"}), ("judge", {"approved": "maybe"})):
            with pytest.raises(InvalidInput):
                record_action(s, held, author, action, fields)
        ended = submit_turn(s, assignment, author, {"approved": "no"})
        assert (ended.turn.label, ended.turn.text) == ("complete", "Disapproved the destination")
    with session_scope(settings.database_url) as s:
        assert replay(s, [conversation_id])[1] == []
        judge = s.exec(select(DialogEvent).where(DialogEvent.action == "judge")).one()
        judge.data = {**judge.data, "Latitude": 1.0}
        s.add(judge)
    with session_scope(settings.database_url) as s:
        assert "the user judged the destination" in replay(s, [conversation_id])[1][0].what
