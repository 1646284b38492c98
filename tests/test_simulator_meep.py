"""`turkflow simulate --protocol meep`: simulated users and agents play MEEP on its pages through the real
stack (gunicorn, a prefork Celery worker, Redis, SQLite and PostgreSQL); no turn is lost, the log replays
with no difference, and the SGD export reads back with the dialogues and turns the database holds."""

from __future__ import annotations

import json

from sqlalchemy import func
from sqlmodel import col, select

from tests.test_simulator_star import last_batch, turkflow
from turkflow.db import session_scope
from turkflow.models import Conversation, DialogEvent, Turn, TurnStatus


def held(database_url: str, batch_id: int) -> dict:
    with session_scope(database_url) as s:
        ids = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).all()
        return {
            "turns": s.exec(select(func.count()).select_from(Turn).where(
                col(Turn.conversation_id).in_(ids), Turn.status == TurnStatus.submitted)).one(),
            "clicks": s.exec(select(func.count()).select_from(DialogEvent).where(
                col(DialogEvent.conversation_id).in_(ids),
                col(DialogEvent.action).in_(["call_api", "add_template", "pick_template", "send"]))).one(),
            "drives": s.exec(select(func.count()).select_from(DialogEvent).where(
                col(DialogEvent.conversation_id).in_(ids), DialogEvent.action == "call_api",
                DialogEvent.data["API"].as_string() == "start_driving")).one(),
            "verdicts": s.exec(select(func.count()).select_from(DialogEvent).where(
                col(DialogEvent.conversation_id).in_(ids), DialogEvent.action == "judge")).one(),
        }


def test_ten_meep_conversations_lose_no_turn_replay_clean_and_round_trip_through_sgd(tmp_path, database_url):
    simulated = turkflow(database_url, tmp_path, "simulate", "--protocol", "meep", "--conversations", "10",
                         "--seed", "1", "--database-url", database_url, "--run-dir", str(tmp_path / "run"),
                         "--json", str(tmp_path / "report.json"))
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    done, meep = report["reproducible"], report["reproducible"]["meep"]
    batch_id = last_batch(database_url)
    db = held(database_url, batch_id)

    assert done["conversations"] == {"launched": 10, "completed": 10, "by_end_reason": {"user_complete": 10}}
    assert done["turns"]["stored"] == done["turns"]["confirmed"] == done["turns"]["planned"] == db["turns"] == 50
    assert done["turns"]["lost"] == done["turns"]["unexpected"] == done["turns"]["history_mismatches"] == 0
    assert done["refused_requests"] == {} and report["measured"]["http"]["errors"] == {}
    events = meep["events"]
    assert events["Agent call_api"] == events["API return_results"] > 0 and events["Agent send"] == 20
    assert meep["apis_called"]["find_place"] > 0 and meep["apis_called"]["start_driving"] > 0
    # every dialog the agent drove ends with the user's verdict on the map; the others with a last message
    assert sum(meep["approved"].values()) == db["verdicts"] == db["drives"] > 0
    assert meep["paid_turns_by_label"]["complete"] == 10

    replayed = turkflow(database_url, tmp_path, "replay", "--batch", str(batch_id))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"replayed {db['clicks']} clicks in 10 conversations: 0 differ" in replayed.stdout

    exported = turkflow(database_url, tmp_path, "export", "--format", "sgd", "--out", str(tmp_path / "S"))
    assert exported.returncode == 0, exported.stderr
    assert f"exported 10 dialogues ({db['turns']} turns)" in exported.stdout
    schema = {s["service_name"] for s in json.loads((tmp_path / "S" / "schema.json").read_text())}
    assert {"meep", "find_place", "start_driving"} <= schema
    analysed = turkflow(database_url, tmp_path, "analyse", "--corpus", "sgd", str(tmp_path / "S"),
                        "--out", str(tmp_path / "A"))
    assert analysed.returncode == 0, analysed.stderr
    stats = json.loads((tmp_path / "A" / "stats.json").read_text())
    assert (stats["dialogues"], stats["turns"]) == (10, db["turns"])
