"""`turkflow simulate --protocol frames`: simulated users pursue goals drawn from the sample domain and
simulated wizards search for them on Frames' pages, through the real stack (gunicorn, a prefork Celery
worker, Redis, SQLite and PostgreSQL); no turn is lost, the SGD export reads back with the dialogues and
turns the database holds, replay finds the database unchanged, and the same seed gives the same report."""

from __future__ import annotations

import json

from sqlalchemy import func
from sqlmodel import col, select

from tests.test_simulator_star import last_batch, turkflow
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.protocols.frames.domain import SAMPLE
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Turn, TurnStatus
from turkflow.simulator.frames import write_frames_scripts
from turkflow.simulator.run import SimulationConfig, run_with_stack


def held(database_url: str, batch_id: int) -> dict:
    with session_scope(database_url) as s:
        ids = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).all()
        return {
            "turns": s.exec(select(func.count()).select_from(Turn).where(
                col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)).one(),
            "searches": s.exec(select(func.count()).select_from(DialogEvent).where(
                col(DialogEvent.conversation_id).in_(ids), DialogEvent.action == "search")).one(),
            "answers": dict(s.exec(select(SurveyAnswer.role, func.count()).where(
                col(SurveyAnswer.conversation_id).in_(ids)).group_by(SurveyAnswer.role)).all()),
        }


def test_ten_frames_conversations_lose_no_turn_and_export_to_sgd_with_the_counts_the_database_holds(
        tmp_path, database_url):
    simulated = turkflow(database_url, tmp_path, "simulate", "--protocol", "frames", "--conversations", "10",
                         "--seed", "1", "--database-url", database_url, "--run-dir", str(tmp_path / "run"),
                         "--json", str(tmp_path / "report.json"))
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    assert "frames: " in simulated.stdout and "goals could succeed" in simulated.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    done, frames = report["reproducible"], report["reproducible"]["frames"]
    batch_id = last_batch(database_url)
    db = held(database_url, batch_id)

    events = frames["events"]
    ended = done["conversations"]["by_end_reason"]
    assert done["conversations"]["completed"] == 10 and set(ended) == {"user_complete", "wizard_booked"}
    assert ended["wizard_booked"] == events["Wizard book"] and ended["user_complete"] == events["User complete"]
    assert done["turns"]["stored"] == done["turns"]["confirmed"] == done["turns"]["planned"] == db["turns"]
    assert done["turns"]["lost"] == done["turns"]["unexpected"] == done["turns"]["history_mismatches"] == 0
    assert done["refused_requests"] == {} and report["measured"]["http"]["errors"] == {}
    assert events["Wizard search"] == events["KnowledgeBase search_results"] == db["searches"] > 0
    assert frames["searches_found_nothing"] > 0
    assert frames["surveys_answered"] == {"user": 10, "wizard": 10} and db["answers"] == {"user": 10, "wizard": 10}
    overall = frames["success"]["templates"][-1]
    assert overall["template"] == "all" and overall["dialogs"] == 10 and overall["judged"] == 10
    assert overall["feasible"] == frames["goals"]["feasible"] and overall["feasible_as_expected"]
    assert sum(overall["ratings"].values()) == 10
    booked = overall["booked"]  # each booking is the first item of a search with the goal's (or alternate's) conditions
    assert booked["meets_goal"] + booked["meets_alternate"] == events["Wizard book"] and booked["breaks_goal"] == 0

    exported = turkflow(database_url, tmp_path, "export", "--format", "sgd", "--out", str(tmp_path / "S"))
    assert exported.returncode == 0, exported.stderr
    assert f"exported 10 dialogues ({db['turns']} turns)" in exported.stdout
    dialogues = json.loads((tmp_path / "S" / "dialogues_001.json").read_text())
    system = [t for d in dialogues for t in d["turns"] if t["speaker"] == "SYSTEM"]
    assert sum(1 for t in system if "service_call" in t["frames"][0]) > 0
    assert all(t["frames"][0]["state"]["slot_values"] for t in system if "service_call" in t["frames"][0])
    schema = json.loads((tmp_path / "S" / "schema.json").read_text())
    assert [s["service_name"] for s in schema] == ["trips"]
    analysed = turkflow(database_url, tmp_path, "analyse", "--corpus", "sgd", str(tmp_path / "S"),
                        "--out", str(tmp_path / "A"))
    assert analysed.returncode == 0, analysed.stderr
    stats = json.loads((tmp_path / "A" / "stats.json").read_text())
    assert (stats["dialogues"], stats["turns"]) == (10, db["turns"])

    replayed = turkflow(database_url, tmp_path, "replay", "--batch", str(batch_id))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"replayed {db['searches']} searches in 10 conversations: 0 differ" in replayed.stdout

    judged = turkflow(database_url, tmp_path, "batch", "surveys", str(batch_id))
    assert judged.returncode == 0, judged.stderr
    rating = next(line for line in judged.stdout.splitlines() if "How cooperative" in line)
    assert f"{sum(overall['ratings'].values())}" in rating.split("│")[-2]  # answered: every user
    every = next(line for line in judged.stdout.splitlines() if line.startswith("│ all "))
    cells = [cell.strip() for cell in every.split("│")[1:-1]]
    assert cells[2:4] == [str(overall["dialogs"]), str(overall["feasible"])]
    assert cells[5:7] == [str(overall["judged"]), str(overall["reached"])]


def test_the_same_seed_gives_the_same_frames_report(tmp_path, sqlite_url):
    config = SimulationConfig(students=3, teachers=3, conversations=4, mix={"spammer": 0.34}, seed=5,
                              concurrency=4, settle_timeout=30, protocol="frames")
    reports = []
    for name in ("first", "second"):
        work = tmp_path / name
        url = sqlite_url if name == "first" else f"sqlite:///{work / 'again.sqlite'}"
        work.mkdir()
        settings = Settings(data_dir=work, database_url=url, secret_key="test", worker_hash_key="test")
        reports.append(run_with_stack(settings, work, config, web_workers=2, web_threads=2))
    first, second = reports
    assert first["reproducible"] == second["reproducible"]
    assert first["reproducible"]["crowd"]["spammer"]["turns"] > 0
    assert first["reproducible"]["turns"]["lost"] == 0


def test_each_dialog_is_planned_from_its_goal_and_its_failure_rule():
    scripts = write_frames_scripts(SAMPLE, 40, seed=2, max_turns=40)
    assert scripts == write_frames_scripts(SAMPLE, 40, seed=2, max_turns=40)
    for script in scripts:
        goal = script.scenario
        assert len(script.searches) == len(script.user) - 1 and script.stops_at(script.length - 1)
        assert all(c["field"] in script.searches[0] for c in goal["constraints"])
        assert script.reached == (goal["matches"] > 0 or bool(goal["alternate"] and goal["alternate"]["matches"]))
        assert script.books == script.reached and script.books_at(script.length - 1) == script.books
        if script.books:  # the user asks to book; the last wizard books, which ends the dialog
            assert script.length in (4, 6)
            assert script.user[-1].count("book") == 1
        else:  # told to end, or the alternate found nothing either: the user ends the dialog
            assert script.length in (3, 5)
        if goal["matches"] == 0 and goal["alternate"]:  # the alternate goal is stated and searched for
            assert script.searches[1] != script.searches[0]
    assert {s.length for s in scripts} == {3, 4, 5, 6}
    short = write_frames_scripts(SAMPLE, 40, seed=2, max_turns=2)
    assert {s.turns(2) for s in short} == {1}
