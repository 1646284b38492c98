"""Frames dialogs on the pipeline: a domain file loaded as tasks, goals drawn at launch with the asked
probability of success, every search an event written through ``record_action`` (with its results and
suggestions, drawn reproducibly), replay against the database on disk, the analysis of success."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from sqlmodel import select

from tests.test_star_dialog import command, hold
from turkflow.db import session_scope
from turkflow.protocols.registry import load_tasks
from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.protocols.frames.domain import SAMPLE
from turkflow.protocols.frames.survey import binomial_interval
from turkflow.protocols.frames.dialog import (
    make_scenarios, read_tasks, record_action, replay, submit_turn, success_summary, survey_shows,
)
from turkflow.hits import lifecycle
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task, Worker

USER_1, USER_2, WIZARD_1, WIZARD_2 = "U1-frames-user", "U2-frames-user", "W1-frames-wizard", "W2-frames-wizard"
NOTHING = {"constraints": {"origin": "Boston", "price": {"at_most": 300}}}  # no package is that cheap


def domain_copy(tmp_path: Path, suggestions: float = 1.0) -> Path:
    """The sample domain in a folder of the test's own, suggestions shown at this probability."""
    folder = tmp_path / "frames"
    shutil.copytree(SAMPLE.parent, folder)
    domain = folder / "frames.yaml"
    domain.write_text(domain.read_text().replace("suggestion_probability: 0.5",
                                                 f"suggestion_probability: {suggestions}"))
    return domain


def launch_frames(settings, providers, conversations: int = 1, domain: Path = SAMPLE,
                  success: float | None = None, seed: int = 0) -> int:
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(domain))
        tasks = list(s.exec(select(Task).where(Task.protocol == "frames").order_by(Task.id)))
        batch, hits = lifecycle.launch_batch(s, tasks, conversations, name="frames pilot", max_turns=20,
                                             protocol="frames",
                                             scenarios=make_scenarios(tasks, conversations, seed=seed,
                                                                      success=success))
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def turn(settings, providers, conversation_id: int, external_id: str, role: str,
         searches: list[dict], text: str, complete: bool = False) -> list[DialogEvent]:
    """One paid turn: take it, search, submit the message (perhaps ending the dialog), open the next one.
    Returns the events the searches wrote."""
    with session_scope(settings.database_url) as s:
        held, author, assignment = hold(s, conversation_id, external_id, role)
        written = [e for search in searches for e in record_action(s, held, author, "search", search)]
        submit_turn(s, assignment, author, {"action": "utter", "text": text,
                                            **({"complete": "yes"} if complete else {})})
        next_hit = lifecycle.advance_conversation(s, conversation_id)
        if next_hit is not None:
            lifecycle.publish_hit(s, providers.get("local"), next_hit.id)
        return written


def first_conversation(settings) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation.id).order_by(Conversation.id)).first()


def events_of(settings, conversation_id: int) -> list[DialogEvent]:
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(DialogEvent).where(DialogEvent.conversation_id == conversation_id)
                           .order_by(DialogEvent.id)))


def trip_dialog(settings, providers, conversation_id: int) -> None:
    """Five paid turns: a search that finds nothing (suggestions offered), one that finds Lisbon trips."""
    turn(settings, providers, conversation_id, USER_1, "user", [], "Hi! A trip from Boston under $300?")
    turn(settings, providers, conversation_id, WIZARD_1, "wizard", [NOTHING],
         "Nothing that cheap; the cheapest from Boston is more. Could you spend more?")
    turn(settings, providers, conversation_id, USER_2, "user", [], "Then Lisbon, any price.")
    turn(settings, providers, conversation_id, WIZARD_2, "wizard",
         [{"constraints": {"destination": "lisbon "}, "sort": "price", "descending": True}],
         "I have several Lisbon trips; the dearest first.")
    turn(settings, providers, conversation_id, USER_1, "user", [], "Great, bye!", complete=True)


# ---- loading and launching ------------------------------------------------------------------------------


def test_tasks_load_reads_a_domain_file_and_a_bad_one_loads_nothing_naming_the_field(settings, tmp_path):
    loaded = command(settings, "tasks", "load", "--protocol", "frames", str(SAMPLE))
    assert loaded.returncode == 0, loaded.stderr
    assert "8 created" in loaded.stdout
    with session_scope(settings.database_url) as s:
        tasks = list(s.exec(select(Task).where(Task.protocol == "frames").order_by(Task.key)))
    assert [t.key for t in tasks][:2] == ["frames:trips:anniversary_surprise", "frames:trips:budget_trip"]
    assert {t.star["kind"] for t in tasks} == {"generic", "role_play"} and {t.domain for t in tasks} == {"trips"}

    bad = domain_copy(tmp_path)
    bad.write_text(bad.read_text().replace("budget: {field: price, op: at_most, step: 100, slack: 2}",
                                           "budget: {field: cost, op: at_most}", 1))
    failed = command(settings, "tasks", "load", "--protocol", "frames", str(bad))
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1, failed.stderr
    assert str(bad) in failed.stderr and "'cost'" in failed.stderr
    with session_scope(settings.database_url) as s:
        assert len(s.exec(select(Task)).all()) == 8


@pytest.mark.parametrize("success, expected", [(0.0, (0, 0)), (1.0, (200, 200)),
                                               (0.5, binomial_interval(200, 0.5, 0.99))])
def test_goals_match_the_database_with_the_asked_probability(success, expected):
    scenarios = make_scenarios(read_tasks(SAMPLE), 200, seed=7, success=success)
    matching = sum(1 for _, goal in scenarios if goal["matches"] > 0)
    assert expected[0] <= matching <= expected[1]
    assert all(goal["probability"] == success for _, goal in scenarios)
    kinds = {goal["kind"] for _, goal in scenarios}
    assert kinds == {"generic", "role_play"}  # role-play templates mix with generic ones
    for task, goal in scenarios:
        assert task.star["template"] == goal["template"] and goal["instructions"].startswith(
            goal["character"] or goal["text"])
        if goal["matches"] == 0:  # an unsuccessful user changes the goal or ends the dialog
            assert goal["instructions"].endswith(goal["alternate"]["text"] if goal["alternate"]
                                                 else "you may end the conversation.")


def test_the_same_seed_draws_the_same_goals_and_a_bad_probability_is_refused():
    tasks = read_tasks(SAMPLE)
    assert make_scenarios(tasks, 20, seed=3) == make_scenarios(tasks, 20, seed=3)
    with pytest.raises(InvalidInput) as error:
        make_scenarios(tasks, 2, success=1.5)
    assert error.value.field == "success"


def test_batch_launch_draws_a_goal_per_conversation_at_the_given_success(settings):
    assert command(settings, "tasks", "load", "--protocol", "frames", str(SAMPLE)).returncode == 0
    refused = command(settings, "batch", "launch", "--protocol", "star", "--all", "-n", "2", "--success", "1")
    assert refused.returncode == 1 and "--protocol frames only" in refused.stderr
    launched = command(settings, "batch", "launch", "--protocol", "frames", "--all", "-n", "6",
                       "--success", "0", "--yes")
    assert launched.returncode == 0, launched.stderr
    assert "6 user turns open" in launched.stdout
    with session_scope(settings.database_url) as s:
        goals = [c.scenario for c in s.exec(select(Conversation))]
    assert len(goals) == 6 and all(g["matches"] == 0 and g["probability"] == 0.0 for g in goals)
    closed = command(settings, "batch", "launch", "--protocol", "frames", "--all", "-n", "1",
                     "--provider", "mturk")
    assert closed.returncode == 1 and "--provider local or prolific" in closed.stderr


# ---- the event log --------------------------------------------------------------------------------------


def test_a_frames_dialog_logs_each_search_with_its_results_and_the_suggestions_shown(settings, providers,
                                                                                    tmp_path):
    launch_frames(settings, providers, domain=domain_copy(tmp_path))
    conversation_id = first_conversation(settings)
    trip_dialog(settings, providers, conversation_id)

    events = events_of(settings, conversation_id)
    assert [(e.agent, e.action) for e in events] == [
        ("User", "utter"),
        ("Wizard", "search"), ("KnowledgeBase", "search_results"), ("KnowledgeBase", "suggestions"),
        ("Wizard", "utter"), ("User", "utter"),
        ("Wizard", "search"), ("KnowledgeBase", "search_results"), ("Wizard", "utter"),
        ("User", "utter"), ("User", "complete"),
    ]
    nothing, suggested, lisbon = events[2].data, events[3].data["suggestions"], events[7].data
    assert nothing == {"ids": [], "total": 0}
    assert [s["relaxed"]["field"] for s in suggested] == ["price"]  # any origin would still cost more
    assert suggested[0]["instead"]["value"] > 300 and suggested[0]["total"] >= 1
    assert events[6].data["constraints"] == [{"field": "destination", "op": "is", "value": "lisbon"}]
    assert events[6].data["sort"] == {"field": "price", "descending": True} and lisbon["total"] > 1
    assert [e.data["draw"] for e in events if e.action == "search"] == [0, 1]
    assert all(e.worker_id is None for e in events if e.agent == "KnowledgeBase")
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, conversation_id)
        assert (conversation.status, conversation.end_reason, conversation.turn_count) == (
            "completed", "user_complete", 5)


def test_whether_suggestions_show_is_drawn_from_the_conversation_and_the_search_number(settings, providers,
                                                                                       tmp_path):
    launch_frames(settings, providers, conversations=1, domain=domain_copy(tmp_path, suggestions=0.5))
    conversation_id = first_conversation(settings)
    turn(settings, providers, conversation_id, USER_1, "user", [], "Something cheap from Boston?")
    written = turn(settings, providers, conversation_id, WIZARD_1, "wizard", [NOTHING] * 8, "Nothing.")
    offered = [any(e.action == "suggestions" for e in written[n:n + 3] if e.action != "search")
               for n, e in enumerate(written) if e.action == "search"]
    expected = [random.Random(f"frames:{conversation_id}:{n}").random() < 0.5 for n in range(8)]
    assert [bool(o) for o in offered] == expected and True in expected and False in expected


@pytest.mark.parametrize("fields, field", [
    ({"constraints": {"colour": "red"}}, "colour"),
    ({"constraints": {"hotel": "Little House Naples"}}, "hotel"),  # a column, not a search field
    ({"constraints": {"price": "cheap"}}, "price"),
    ({"constraints": {"price": {"around": 900}}}, "price"),
    ({"constraints": {"origin": {"at_least": "Boston"}}}, "origin"),
    ({"constraints": {"origin": "Bos\x07ton"}}, "origin"),
    ({"constraints": {"origin": "x" * 201}}, "origin"),
    ({"constraints": {"departure": "next Tuesday"}}, "departure"),
    ({"constraints": "origin=Boston"}, "constraints"),
    ({"constraints": {}, "sort": "hotel_colour"}, "hotel_colour"),
    ({"constraints": {}, "descending": "sometimes"}, "descending"),
    ({"constraints": {}, "mood": "cheerful"}, "mood"),
])
def test_a_bad_search_is_an_error_naming_the_field_and_stores_nothing(settings, providers, fields, field):
    launch_frames(settings, providers)
    conversation_id = first_conversation(settings)
    turn(settings, providers, conversation_id, USER_1, "user", [], "Hello.")
    before = len(events_of(settings, conversation_id))
    with session_scope(settings.database_url) as s:
        held, author, _ = hold(s, conversation_id, WIZARD_1, "wizard")
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, author, "search", fields)
    assert error.value.field == field
    assert len(events_of(settings, conversation_id)) == before


def test_only_the_holder_logs_and_a_user_cannot_search_or_end_before_saying_something(settings, providers):
    launch_frames(settings, providers)
    conversation_id = first_conversation(settings)
    with session_scope(settings.database_url) as s:
        held, author, _ = hold(s, conversation_id, USER_1, "user")
        stranger = Worker(external_id="U9-other", role="user", onboarded=True)
        s.add(stranger)
        s.flush()
        for who, action, fields, field in ((stranger, "utter", {"text": "hi"}, "turn"),
                                           (author, "search", {"constraints": {}}, "action"),
                                           (author, "complete", {}, "action")):
            with pytest.raises(InvalidInput) as error:
                record_action(s, held, who, action, fields)
            assert error.value.field == field
        record_action(s, held, author, "utter", {"text": "Hi."})
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, author, "utter", {"text": "Twice."})
        assert error.value.field == "action"


# ---- replay ---------------------------------------------------------------------------------------------


def test_replay_is_clean_on_an_untouched_log_and_names_the_search_whose_row_changed(settings, providers,
                                                                                    tmp_path):
    domain = domain_copy(tmp_path)
    batch_id = launch_frames(settings, providers, domain=domain)
    conversation_id = first_conversation(settings)
    trip_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        assert replay(s, [conversation_id]) == (2, [])
    done = command(settings, "replay", "--batch", str(batch_id))
    assert done.returncode == 0, done.stderr
    assert "replayed 2 searches in 1 conversations: 0 differ" in done.stdout

    lisbon = next(e for e in events_of(settings, conversation_id) if e.action == "search_results"
                  and e.data["total"])
    dearest = lisbon.data["ids"][0]
    trips = domain.parent / "trips.csv"
    rows = trips.read_text().splitlines()
    line = next(n for n, row in enumerate(rows) if row.startswith(f"{dearest},"))
    rows[line] = rows[line].replace(",Lisbon,", ",Porto,")  # the package goes elsewhere now
    trips.write_text("\n".join(rows) + "\n")
    with session_scope(settings.database_url) as s:
        replayed, differences = replay(s, [conversation_id])
    assert replayed == 2 and len(differences) == 1
    assert differences[0].describe().startswith(f"conversation {conversation_id}, search 2: logged")
    assert f"no longer found: {dearest}" in differences[0].describe()
    changed = command(settings, "replay", str(conversation_id))
    assert changed.returncode == 1 and "1 differ" in changed.stdout and f"{dearest}" in changed.stdout


# ---- the end of the dialog: questions and the analysis --------------------------------------------------


def test_success_against_the_templates_probability_reads_the_goals_and_the_survey(settings, providers):
    batch_id = launch_frames(settings, providers, conversations=3, success=1.0)
    conversation_id = first_conversation(settings)
    trip_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        goal = s.get(Conversation, conversation_id).scenario
        assert survey_shows(s, conversation_id, "wizard") == goal["instructions"]
        assert survey_shows(s, conversation_id, "user") is None
        workers = {w.external_id: w.id for w in s.exec(select(Worker))}
        s.add(SurveyAnswer(conversation_id=conversation_id, worker_id=workers[USER_1], role="user",
                           question="cooperativity", text="?", answer=4))
        s.add(SurveyAnswer(conversation_id=conversation_id, worker_id=workers[WIZARD_2], role="wizard",
                           question="goal_reached", text="?", answer=True))
    with session_scope(settings.database_url) as s:
        summary = success_summary(s, batch_id)
    assert summary["batch_id"] == batch_id and summary["dialogs"] == 3
    overall = summary["templates"][-1]
    assert overall["template"] == "all" and overall["feasible"] == 3 and overall["expected"] == [3, 3]
    assert overall["feasible_as_expected"] and (overall["judged"], overall["reached"]) == (1, 1)
    assert overall["ratings"] == {"1": 0, "2": 0, "3": 0, "4": 1, "5": 0} and overall["mean_rating"] == 4
    with pytest.raises(InvalidDocument):
        read_tasks(SAMPLE.parent / "missing.yaml")


def test_the_sgd_export_holds_the_searches_as_the_wizards_frames_the_answers_as_labels_and_no_acts(
        settings, providers, tmp_path):
    launch_frames(settings, providers, domain=domain_copy(tmp_path))
    conversation_id = first_conversation(settings)
    trip_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        user = s.exec(select(Worker).where(Worker.external_id == USER_1)).one()
        s.add(SurveyAnswer(conversation_id=conversation_id, worker_id=user.id, role="user",
                           question="cooperativity", text="?", answer=5))
    exported = command(settings, "export", "--format", "sgd", "--out", str(tmp_path / "S"))
    assert exported.returncode == 0, exported.stderr
    assert "exported 1 dialogue (5 turns)" in exported.stdout
    (dialogue,) = json.loads((tmp_path / "S" / "dialogues_001.json").read_text())
    assert dialogue["dialogue_id"] == f"frames_{conversation_id}" and dialogue["services"] == ["trips"]
    assert [t["speaker"] for t in dialogue["turns"]] == ["USER", "SYSTEM", "USER", "SYSTEM", "USER"]
    first, lisbon = dialogue["turns"][1]["frames"][0], dialogue["turns"][3]["frames"][0]
    assert first["service_call"] == {"method": "search_trips",
                                     "parameters": {"origin": "Boston", "price_at_most": "300"}}
    assert first["service_results"] == [] and first["state"]["slot_values"] == {
        "origin": ["Boston"], "price_at_most": ["300"]}
    # acts come from annotation only (turkflow.protocols.annotate): nobody labelled this dialog, so none
    assert all(frame["actions"] == [] for t in dialogue["turns"] for frame in t["frames"])
    assert len(lisbon["service_results"]) == 10 and {r["destination"] for r in lisbon["service_results"]} == {
        "Lisbon"}
    assert dialogue["labels"] == {"userSurveyRating": 5, "wizardSurveyTaskSuccessful": None}
    assert dialogue["goal"]["template"] and dialogue["goal"]["instructions"]
    (service,) = json.loads((tmp_path / "S" / "schema.json").read_text())
    slots = {slot["name"]: slot for slot in service["slots"]}
    assert slots["origin"]["is_categorical"] and "Boston" in slots["origin"]["possible_values"]
    assert {"price", "price_at_least", "price_at_most"} <= set(slots) and "hotel" not in slots
    analysed = command(settings, "analyse", "--corpus", "sgd", str(tmp_path / "S"), "--out", str(tmp_path / "A"))
    assert analysed.returncode == 0, analysed.stderr
    stats = json.loads((tmp_path / "A" / "stats.json").read_text())
    assert (stats["dialogues"], stats["turns"]) == (1, 5)
