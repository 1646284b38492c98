"""`turkflow simulate --protocol star`: simulated users and wizards qualify on the onboarding pages and play
STAR on its pages through the real stack (gunicorn, a prefork Celery worker, Redis, SQLite and PostgreSQL);
the export in STAR's format reads back with the turns the database holds, and replay finds the knowledge
base unchanged until a row changes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import col, select

from tests.conftest import SHARED_DATA
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.models import (
    Batch, Conversation, DialogEvent, StageAttempt, SurveyAnswer, Turn, TurnStatus, Worker,
)
from turkflow.simulator.run import SimulationConfig, run_on, run_with_stack
from turkflow.simulator.stack import Stack
from turkflow.simulator.star import StarScript, sample_star_root, write_star_scripts
from turkflow.protocols.star.dialog import star_turns

TURKFLOW = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "turkflow"
STAR_DATA = SHARED_DATA / "star"
SMALL = SimulationConfig(students=3, teachers=3, conversations=5, mix={"spammer": 0.34}, seed=3,
                         concurrency=4, settle_timeout=30, protocol="star")


def turkflow(database_url: str, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(data_dir), "TURKFLOW_DATABASE_URL": database_url,
           "TURKFLOW_SECRET_KEY": "test", "TURKFLOW_WORKER_HASH_KEY": "test"}
    return subprocess.run([str(TURKFLOW), *args], capture_output=True, text=True, env=env, timeout=600)


def held(database_url: str, batch_id: int) -> dict:
    """What the database holds of a batch: paid turns, STAR turns (protocols.star.dialog.star_turns over its
    DialogEvent rows), completed dialogs, questionnaire answers by role."""
    with session_scope(database_url) as s:
        ids = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).all()
        events = s.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids))).all()
        return {
            "turns": s.exec(select(func.count()).select_from(Turn).where(
                col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)).one(),
            "star_turns": star_turns(events),
            "completed": s.exec(select(func.count()).select_from(Conversation).where(
                col(Conversation.id).in_(ids), Conversation.status == "completed")).one(),
            "answers": dict(s.exec(select(SurveyAnswer.role, func.count()).where(
                col(SurveyAnswer.conversation_id).in_(ids)).group_by(SurveyAnswer.role)).all()),
        }


def last_batch(database_url: str) -> int:
    with session_scope(database_url) as s:
        return s.exec(select(Batch.id).order_by(col(Batch.id).desc())).first()


# ---- the acceptance run, as the issue states it ------------------------------------------------------------


def test_twenty_star_conversations_export_and_analyse_with_the_turns_the_database_holds(tmp_path,
                                                                                        database_url):
    run = tmp_path / "run"
    simulated = turkflow(database_url, tmp_path, "simulate", "--protocol", "star", "--conversations", "20",
                         "--seed", "3", "--database-url", database_url, "--run-dir", str(run),
                         "--json", str(tmp_path / "report.json"))
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    done, star = report["reproducible"], report["reproducible"]["star"]
    batch_id = last_batch(database_url)
    db = held(database_url, batch_id)

    assert done["conversations"] == {"launched": 20, "completed": 20, "by_end_reason": {"user_complete": 20}}
    assert done["turns"]["stored"] == done["turns"]["confirmed"] == done["turns"]["planned"] == db["turns"]
    assert done["turns"]["lost"] == done["turns"]["unexpected"] == done["turns"]["history_mismatches"] == 0
    assert star["star_turns"] == star["star_turns_in_complete_dialogs"] == db["star_turns"]
    assert star["surveys_answered"] == {"user": 20, "wizard": 20}
    assert db["answers"] == {"user": 40, "wizard": 60}  # two questions a user, three a wizard
    events = star["events"]
    assert events["Wizard query"] == events["KnowledgeBase return_item"] > 0
    assert events["Wizard pick_suggestion"] > events["Wizard utter"] > 0  # mostly picked, some written
    assert events["UserGuide instruct"] > 0 and events["User complete"] == 20
    assert done["refused_requests"] == {} and report["measured"]["http"]["errors"] == {}

    exported = turkflow(database_url, tmp_path, "export", "--format", "star", "--out", str(tmp_path / "D"))
    assert exported.returncode == 0, exported.stderr
    assert f"exported 20 STAR dialogues ({db['star_turns']} STAR turns in complete ones)" in exported.stdout
    analysed = turkflow(database_url, tmp_path, "analyse", "--corpus", "star", str(tmp_path / "D"),
                        "--out", str(tmp_path / "A"))
    assert analysed.returncode == 0, analysed.stderr
    stats = json.loads((tmp_path / "A" / "stats.json").read_text())
    assert (stats["dialogues"], stats["turns"]) == (20, db["star_turns"])

    replayed = turkflow(database_url, tmp_path, "replay", "--batch", str(batch_id))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"replayed {events['Wizard query']} queries in 20 conversations: 0 differ" in replayed.stdout


# ---- reproducibility, qualification, replay after a changed row -------------------------------------------


def test_same_seed_gives_the_same_star_report_and_replay_names_the_queries_a_changed_row_answers(
        tmp_path, database_url):
    """Two runs of one seed, one after the other on one stack and database, report the same."""
    root = tmp_path / "star"  # a copy of the sample tasks, whose knowledge base we change below
    shutil.copytree(sample_star_root(), root)
    settings = Settings(data_dir=tmp_path, database_url=database_url, secret_key="test", worker_hash_key="test")
    config = SimulationConfig(**{**SMALL.__dict__, "dialogs": root})
    with Stack(settings, tmp_path / "logs", web_workers=2, web_threads=2) as stack:
        first, second = (run_on(stack.settings, stack.url, config) for _ in range(2))
    assert first["reproducible"] == second["reproducible"]
    assert first["parameters"] == second["parameters"]
    done = first["reproducible"]
    assert done["crowd"]["spammer"]["turns"] > 0 and done["turns"]["lost"] == 0
    assert done["star"]["events"]["Wizard query"] > 0

    with session_scope(database_url) as s:  # every worker passed both stages on the onboarding pages
        workers = s.exec(select(Worker).where(col(Worker.name).like("sim-%"))).all()
        assert len(workers) == 12 and all(w.stage == 2 and w.onboarded for w in workers)
        attempts = s.exec(select(StageAttempt)).all()
        assert all(a.graded_at is not None and a.provider == "local" for a in attempts)
        assert sum(1 for a in attempts if not a.passed) == 4  # a spammer per role and run fails once
        assert sum(1 for a in attempts if a.passed) == 24

    batch_id = last_batch(database_url)
    unchanged = turkflow(database_url, tmp_path, "replay", "--batch", str(batch_id))
    assert unchanged.returncode == 0 and " 0 differ" in unchanged.stdout, unchanged.stdout + unchanged.stderr
    for database in (root / "apis" / "dbs").glob("*.json"):  # the rows are drawn again, other prices/floors
        text = database.read_text()
        database.write_text(text.replace('"Min": 0, "Max": 3', '"Min": 10, "Max": 13')
                            .replace('"Min": 5, "Max": 15', '"Min": 50, "Max": 60'))
    changed = turkflow(database_url, tmp_path, "replay", "--batch", str(batch_id))
    assert changed.returncode == 1, changed.stdout + changed.stderr
    with session_scope(database_url) as s:
        ids = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).all()
        queries = s.exec(select(DialogEvent).where(col(DialogEvent.conversation_id).in_(ids),
                                                   DialogEvent.action == "query")).all()
    named = [line for line in changed.stdout.splitlines() if line.startswith("conversation ")]
    found = [q for q in queries if any(f"query {q.id} to {q.data['APIName']}" in line for line in named)]
    assert found and len(found) == len(named)


# ---- what honest workers say ------------------------------------------------------------------------------


def test_generated_dialogues_follow_the_flow_chart_and_end_with_the_users_complete_within_max_turns():
    scripts = write_star_scripts(sample_star_root(), 6, seed=3, max_turns=40)
    assert scripts == write_star_scripts(sample_star_root(), 6, seed=3, max_turns=40)
    for script in scripts:
        assert len(script.wizard) == len(script.user) - 1 and script.stops_at(script.length - 1)
        assert script.wizard[0].label == "hello" and script.user[-1].endswith("Goodbye!")
        queries = [query for step in script.wizard for api, query in step.queries]
        assert queries and all(set(q) == {"form"} for q in queries)
        tasks = script.scenario["tasks"]  # one query a task, one more when the user changes their mind
        assert len(queries) == len(tasks) + (0 if script.scenario["happy"] else 1)
        assert [step.label for step in script.wizard].count("hello") == 1
    assert any(len(s.scenario["tasks"]) == 2 for s in scripts)
    assert not all(s.scenario["happy"] for s in scripts)
    short = write_star_scripts(sample_star_root(), 6, seed=3, max_turns=5)
    assert {s.turns(5) for s in short} == {s.length for s in short} == {5}


@pytest.mark.skipif(not (STAR_DATA / "dialogues").is_dir(), reason="STAR's sample is not beside the checkout")
def test_star_sample_dialogues_are_replayed_user_turn_by_user_turn_with_their_nudges_and_valid_queries():
    scripts = write_star_scripts(STAR_DATA, 300, seed=1, max_turns=200)
    assert len({s.source for s in scripts}) == 300  # the complete ones; trivia and disconnects left out
    by_id = {s.source: s for s in scripts}
    first: StarScript = by_id["star:1"]  # dialogue 1: the user guide speaks first, then twice more
    assert first.user[0].startswith("Hello, I'm really worried.")
    assert [n["turn"] for n in first.scenario["nudges"]] == [0, 2, 4]
    assert "[instruction" not in first.scenario["nudges"][0]["text"]
    assert first.wizard[0].label == "ask_name" and first.wizard[0].draft == "What is your name?"
    assert first.wizard[1].queries == (("doctor_followup", {"constraints": [
        {"Name": 'api.is_equal_to("Dr. Johnson")'}, {"PatientName": '"Alexis"'}]}),)
    assert first.wizard[2].label is None and first.wizard[2].text.startswith("Yes. It must be before bed")


@pytest.mark.skipif(not (STAR_DATA / "dialogues").is_dir(), reason="STAR's sample is not beside the checkout")
def test_star_sample_dialogues_play_through_the_stack_with_the_sample_wizards_queries(tmp_path, sqlite_url):
    config = SimulationConfig(**{**SMALL.__dict__, "conversations": 6, "seed": 1, "dialogs": STAR_DATA})
    settings = Settings(data_dir=tmp_path, database_url=sqlite_url, secret_key="test", worker_hash_key="test")
    report = run_with_stack(settings, tmp_path, config, web_workers=2, web_threads=2)
    done, star = report["reproducible"], report["reproducible"]["star"]
    db = held(sqlite_url, last_batch(sqlite_url))
    assert star["scripts"] == {"star": 6} and done["conversations"]["completed"] == db["completed"] == 6
    assert done["turns"]["stored"] == done["turns"]["planned"] == db["turns"] and done["turns"]["lost"] == 0
    assert star["star_turns"] == db["star_turns"] and star["events"]["Wizard query"] > 0
    assert star["surveys_answered"] == {"user": 6, "wizard": 6} and done["refused_requests"] == {}
