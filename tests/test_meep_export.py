"""``turkflow export --format meep`` (issue 39, part 4): MEEP's session logs as its paper describes them (section
5.2, Figure 3: every click, the template, where each value came from, the "+" events, ``wait_for_user``) and
its click-level training examples (section 6), read back field by field from the exported files; ``turkflow
replay --from`` executes the exported files, not the database."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys


from tests.test_meep_dialog import ASK, PLUS, QUERY, SAMPLE, coffee_dialog, first_conversation, launch_meep, paid_turn
from tests.test_star_dialog import command
from turkflow.db import session_scope
from turkflow.models import Conversation
from turkflow.protocols.meep.dialog import session_log
from turkflow.protocols.meep.log import SessionLog


def test_the_meep_export_is_the_session_log_with_every_click_where_its_values_came_from_and_wait_for_user(
        settings, providers, tmp_path):
    folder = shutil.copytree(SAMPLE, tmp_path / "trips")
    launch_meep(settings, providers, conversations=2, folder=folder)
    conversation_id = first_conversation(settings)
    coffee_dialog(settings, providers, conversation_id)
    exported = command(settings, "export", "--format", "meep", "--out", str(tmp_path / "M"))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith("exported 1 MEEP session log (")  # the other dialog: nothing said yet
    document = json.loads((tmp_path / "M" / "sessions" / f"meep_{conversation_id}.json").read_text())

    with session_scope(settings.database_url) as s:
        logged = session_log(s, s.get(Conversation, conversation_id))
    assert SessionLog.from_json(document["log"]) == logged  # the log reads back as the database holds it
    assert document["folder"] == str(folder) and document["verdict"] == {
        "approved": True, "latitude": 34.0016, "longitude": -118.4825}
    assert document["templates"]["t8"].count("{}") == 4 and len(document["workers"]["agent"]) == 2

    clicks = document["clicks"]
    assert [c["click"] for c in clicks] == [
        "user_message", "api", "argument", "argument", "argument", "results", "template", "blank", "blank",
        "blank", "blank", "template", "send", "wait_for_user", "user_message", "api", "argument", "argument",
        "results", "template", "blank", "send"]
    query, latitude = clicks[2], clicks[3]
    assert (query["argument"], query["from"], query["value"], query["query"]) == (
        "query", ["u1_7", "u1_8", "u1_9", "u1_10", "u1_11"], "Bluebird Coffee on Main Street", True)
    assert (latitude["from"], latitude["query"]) == (["source.latitude"], False)
    assert [c["from"] for c in clicks[7:11]] == [["v1.name"], ["v1.street_name"], ["v1.duration_minutes"],
                                                 ["v1.distance_miles"]]
    assert clicks[5]["results"][0]["id"] == "v1" and clicks[5]["results"][0]["fields"]["name"] == "Bluebird Coffee"
    assert clicks[6]["template"] == "t8" and clicks[12]["text"].startswith("I found Bluebird Coffee on Main Street.")
    assert clicks[16]["from"] == ["v1.latitude"] and clicks[20]["from"] == ["v1.name"]

    # Figure 3's form: Python that runs the session again and prints the dialog as it was said
    script = tmp_path / "M" / "sessions" / f"meep_{conversation_id}.py"
    source = script.read_text()
    assert "u1_7 = 'Bluebird'" in source and "session.call('find_place', query=words(u1, 7, 8, 9, 10, 11), " \
        "latitude=source_latitude, longitude=source_longitude)" in source
    assert "v1_name = api_variables[0]['name']" in source
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    said = [(f"User: {c['text']}" if c["click"] == "user_message" else f"Agent: {c['text']}")
            for c in clicks if c["click"] in ("user_message", "send")]
    assert ran.stdout.splitlines() == said

    lines = [json.loads(line) for line in (tmp_path / "M" / "examples.jsonl").read_text().splitlines()]
    decisions = [(e["kind"], e["target"]) for e in lines]
    assert decisions == [
        ("action", "find_place"), ("query", query["from"]), ("parameter", ["source.latitude"]),
        ("parameter", ["source.longitude"]), ("action", "t8"), ("parameter", ["v1.name"]),
        ("parameter", ["v1.street_name"]), ("parameter", ["v1.duration_minutes"]),
        ("parameter", ["v1.distance_miles"]), ("action", "t5"), ("action", "wait_for_user"),
        ("action", "start_driving"), ("parameter", ["v1.latitude"]), ("parameter", ["v1.longitude"]),
        ("action", "t11"), ("parameter", ["v1.name"])]
    first, after_results = lines[0], lines[4]
    assert first["context"][0].startswith("[VAR] source ") and first["context"][-1] == f"[USER] {ASK}"
    assert "[AGENT] find_place" in after_results["context"] and any(
        line.startswith("[VAR] v1 ") and "name = Bluebird Coffee" in line for line in after_results["context"])
    assert all(e["dialog"] == f"meep_{conversation_id}" for e in lines)
    assert f"({sum(1 for c in clicks if c['click'] not in ('user_message', 'results'))} agent clicks, " \
           f"{len(lines)} click-level examples)" in exported.stdout


def test_a_template_added_with_plus_is_exported_with_the_clicks_that_made_it(settings, providers, tmp_path):
    launch_meep(settings, providers)
    conversation_id = first_conversation(settings)
    paid_turn(settings, providers, conversation_id, "U1-meep", "user", [], {"text": ASK})
    with session_scope(settings.database_url) as s:
        from tests.test_star_dialog import hold
        from turkflow.protocols.meep.dialog import record_action, submit_turn

        held, author, assignment = hold(s, conversation_id, "A1-meep", "wizard")
        record_action(s, held, author, "call_api", {"api": "find_place", "arguments": QUERY})
        added = record_action(s, held, author, "add_template", PLUS)
        template = added[0].data["Template"]
        record_action(s, held, author, "pick_template", {"template": template,
                                                         "fillers": [{"result": "v1", "field": "street_name"}]})
        submit_turn(s, assignment, author, {"action": "send"})
    exported = command(settings, "export", "--format", "meep", "--out", str(tmp_path / "M"))
    assert exported.returncode == 0, exported.stderr
    (session,) = (tmp_path / "M" / "sessions").glob("*.json")
    clicks = json.loads(session.read_text())["clicks"]
    plus = next(c for c in clicks if c["click"] == "add_template")
    assert plus["pieces"] == ["u1_7", "u1_8", "t2_1", "{ }", "t2_8"] and plus["text"] == "Bluebird Coffee is {}."
    assert plus["template"] == template
    assert [c["click"] for c in clicks[-4:]] == ["add_template", "template", "blank", "send"]
    script = session.with_suffix(".py")
    assert f"session.add_template({template!r}, 'Bluebird Coffee is {{}}.')" in script.read_text()
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [f"User: {ASK}", f"Agent: {clicks[-1]['text']}"]


def test_replay_from_the_exported_files_is_clean_and_names_the_click_a_changed_file_breaks(
        settings, providers, tmp_path):
    folder = shutil.copytree(SAMPLE, tmp_path / "trips")
    kept = shutil.copytree(SAMPLE, tmp_path / "untouched")
    launch_meep(settings, providers, folder=folder)
    coffee_dialog(settings, providers, first_conversation(settings))
    assert command(settings, "export", "--format", "meep", "--out", str(tmp_path / "M")).returncode == 0

    clean = command(settings, "replay", "--from", str(tmp_path / "M"))
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.strip() == "replayed 7 clicks in 1 exported MEEP sessions: 0 differ"

    places = (folder / "places.jsonl").read_text()
    (folder / "places.jsonl").write_text(places.replace('"2410 Main Street"', '"2412 Main Street"'))
    broken = command(settings, "replay", "--from", str(tmp_path / "M" / "sessions"))
    assert broken.returncode == 1
    said = broken.stdout.splitlines()
    assert said[0].startswith(f"meep_{first_conversation(settings)}.json, click 1 (api_call find_place): results")
    assert "2412 Main Street" in said[0] and said[-1].endswith(": 1 differ")
    # the files name their folder; another one can be given: an untouched copy replays clean
    other = command(settings, "replay", "--from", str(tmp_path / "M"), "--folder", str(kept))
    assert other.returncode == 0 and other.stdout.strip().endswith("0 differ"), other.stdout + other.stderr

    (tmp_path / "junk.json").write_text("{\"format\": \"something else\"}")
    junk = command(settings, "replay", "--from", str(tmp_path / "junk.json"))
    assert junk.returncode == 1 and junk.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'junk.json'}: not a MEEP session file (format turkflow.meep-session/1 expected)"]
    both = command(settings, "replay", "1", "--from", str(tmp_path / "M"))
    assert both.returncode == 1 and "one of them" in both.stderr
