"""The dataset export, on databases filled by the real lifecycle functions (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from sqlmodel import select

from turkflow import pipeline
from tests.test_meep_dialog import coffee_dialog, launch_meep
from tests.test_star_dialog import launch_star, library_dialog
from turkflow.cli.main import App, main
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.dataset.export import ExportError, ExportFilters, export_dataset, iter_conversations, write_export
from turkflow.hits import lifecycle
from turkflow.models import Conversation, DialogEvent, Hit, HitStatus, Task, Turn, Worker
from turkflow.quality.monitor import block_worker
from turkflow.simulator.annotate import play_frames

TURKFLOW = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "turkflow"
STUDENT_1, STUDENT_2 = "A1STUDENTQ7X2KD9", "A2STUDENTM4P8ZR3"
TEACHER_1, TEACHER_2 = "A3TEACHERW5N1YB6", "A4TEACHERH2J7LC0"


def environment(settings) -> dict[str, str]:
    """The test's settings as the TURKFLOW_* variables a requester's shell would hold."""
    return {"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(settings.data_dir),
            "TURKFLOW_DATABASE_URL": settings.database_url, "TURKFLOW_SECRET_KEY": settings.secret_key,
            "TURKFLOW_WORKER_HASH_KEY": settings.worker_hash_key}


def launch(settings, providers, domain: str, conversations: int = 1, name: str = "pilot") -> int:
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        tasks = list(s.exec(select(Task).where(Task.domain == domain).order_by(Task.id)))
        batch, hits = lifecycle.launch_batch(s, tasks, conversations, name=name, max_turns=10)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def worker(settings, role: str, external_id: str) -> Worker:
    with session_scope(settings.database_url) as s:
        found = s.exec(select(Worker).where(Worker.external_id == external_id)).first()
        if found is None:
            found = Worker(external_id=external_id, role=role, onboarded=True)
            s.add(found)
            s.flush()
        return found


def say(settings, providers, conversation_id: int, external_id: str, answers: dict) -> None:
    """One worker takes the open turn of a conversation and submits it; then what Celery would run."""
    role = "student" if "intent" in answers else "teacher"
    author = worker(settings, role, external_id)
    with session_scope(settings.database_url) as s:
        hit = s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                     .where(Turn.conversation_id == conversation_id, Hit.status == HitStatus.open)).one()
        assignment = lifecycle.take_turn(s, author, hit.id, lease_seconds=60)
        turn_id = lifecycle.submit_turn(s, assignment.external_id, author, answers).turn.id
    pipeline.after_submission(settings, providers, turn_id)


def conversation_ids(settings) -> list[int]:
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Conversation.id).order_by(Conversation.id)))


def full_conversation(settings, providers, conversation_id: int, planted: str = "") -> None:
    """Six turns that end with the student's stop and the teacher's closing turn."""
    say(settings, providers, conversation_id, STUDENT_1,
        {"intent": "request_items", "response": f"Hi! What do I need? {planted}".strip()})
    say(settings, providers, conversation_id, TEACHER_1,
        {"relevant": "yes", "useful": "yes", "action": "return_items", "shared": ["item-1", "item-2"],
         "response": "You need the flour and the baking powder first."})
    say(settings, providers, conversation_id, STUDENT_2,
        {"relevant": "yes", "useful": "no", "danger": ["item-1"], "real_life": f"I take the flour out. {planted}",
         "intent": "question_step", "response": "Can I use whole wheat flour instead?"})
    say(settings, providers, conversation_id, TEACHER_1,
        {"relevant": "no", "useful": "no", "action": "answer_external", "urls": ["https://example.org/flour"],
         "response": "Yes, but the pancakes come out denser."})
    say(settings, providers, conversation_id, STUDENT_1,
        {"relevant": "yes", "useful": "yes", "real_life": "I mix everything.", "intent": "stop",
         "response": "Great, I'm done, thank you!"})
    say(settings, providers, conversation_id, TEACHER_2,
        {"relevant": "yes", "useful": "yes", "action": "chit_chat", "response": "Enjoy your pancakes!"})


def export_files(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "conversations").glob("*.json"))]


def test_export_round_trips_through_the_json_schema(settings, providers, tmp_path):
    batch_id = launch(settings, providers, "cooking", conversations=2)
    first, second = conversation_ids(settings)
    full_conversation(settings, providers, first)
    say(settings, providers, second, STUDENT_2, {"intent": "request_step", "response": "Where do I start?"})
    out = tmp_path / "dataset"

    with session_scope(settings.database_url) as s:
        summary = export_dataset(s, out, hash_key=settings.worker_hash_key)

    assert (summary.conversations, summary.turns) == (2, 7)
    schema = json.loads((out / "schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    lines = [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]
    files = export_files(out)
    assert lines == files
    for doc in lines:
        assert list(validator.iter_errors(doc)) == []

    done, active = lines
    assert (done["conversation_id"], done["status"], done["end_reason"]) == (first, "completed", "student_stop")
    assert (active["status"], active["end_reason"], active["completed_at"]) == ("active", None, None)
    assert done["batch"] == {"id": batch_id, "name": "pilot", "protocol": "wizard_of_tasks"}
    assert (done["task"]["key"], done["task"]["domain"]) == ("cooking-pancakes", "cooking")
    assert done["task"]["document"]["items"][:2] == ["250 g plain flour", "2 teaspoons baking powder"]
    turns = done["turns"]
    assert [t["index"] for t in turns] == [0, 1, 2, 3, 4, 5]
    assert [t["label"] for t in turns] == ["request_items", "return_items", "question_step", "answer_external",
                                           "stop", "chit_chat"]
    # A turn's ratings are the ones the next worker gave it.
    assert [(r or {}).get("relevant") for r in (t["ratings_received"] for t in turns)] == [True, True, False, True,
                                                                                          True, None]
    assert [(r or {}).get("useful") for r in (t["ratings_received"] for t in turns)] == [True, False, False, True,
                                                                                        True, None]
    assert turns[0]["ratings_received"]["rater"] == turns[1]["worker"]
    assert [item["id"] for item in turns[1]["shared"]] == ["item-1", "item-2"]
    assert turns[1]["shared"][0] == {"id": "item-1", "kind": "item", "text": "250 g plain flour"}
    assert [item["id"] for item in turns[2]["danger"]] == ["item-1"]
    assert turns[3]["urls"] == ["https://example.org/flour"]
    assert [t["real_life"] for t in turns] == [None, None, "I take the flour out.", None, "I mix everything.", None]
    assert turns[1]["worker"] == turns[3]["worker"] != turns[5]["worker"]


def test_no_raw_worker_id_appears_anywhere_in_an_export(settings, providers, tmp_path):
    launch(settings, providers, "cooking")
    [conversation_id] = conversation_ids(settings)
    full_conversation(settings, providers, conversation_id, planted=f"(my worker id is {STUDENT_1})")
    out = tmp_path / "dataset"

    with session_scope(settings.database_url) as s:
        export_dataset(s, out, hash_key=settings.worker_hash_key)

    exported = b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file())
    for raw in (STUDENT_1, STUDENT_2, TEACHER_1, TEACHER_2):
        assert raw.encode() not in exported
    expected = "w" + hmac.new(settings.worker_hash_key.encode(), STUDENT_1.encode(), hashlib.sha256).hexdigest()[:32]
    doc = export_files(out)[0]
    assert doc["turns"][0]["worker"] == expected
    assert doc["turns"][0]["text"] == f"Hi! What do I need? (my worker id is {expected})"


def test_scrub_pii_removes_planted_emails_phones_and_names(settings, providers, tmp_path):
    launch(settings, providers, "cooking")
    [conversation_id] = conversation_ids(settings)
    planted = ("My name is John Smith, email me at john.smith@example.com or call 555-123-4567; "
               "I live at 42 Baker Street, Springfield.")
    full_conversation(settings, providers, conversation_id, planted=planted)
    out = tmp_path / "dataset"

    result = CliRunner().invoke(main, ["export", "--out", str(out), "--scrub-pii"], env=environment(settings),
                                catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert "exported 1 conversation (6 turns)" in result.stdout
    exported = (out / "conversations.jsonl").read_text()
    for secret in ("John", "Smith", "john.smith@example.com", "555-123-4567", "42 Baker Street"):
        assert secret not in exported
    turns = export_files(out)[0]["turns"]
    scrubbed = ("My name is [NAME], email me at [EMAIL] or call [PHONE]; I live at [ADDRESS].")
    assert turns[0]["text"] == f"Hi! What do I need? {scrubbed}"
    assert turns[2]["real_life"] == f"I take the flour out. {scrubbed}"
    assert turns[1]["text"] == "You need the flour and the baking powder first."  # no personal data, untouched


def test_filters_select_batch_domain_completed_conversations_and_drop_blocked_workers_turns(settings, providers,
                                                                                         tmp_path):
    cooking = launch(settings, providers, "cooking", conversations=2, name="cooking")
    diy = launch(settings, providers, "diy", conversations=1, name="diy")
    c1, c2, d1 = conversation_ids(settings)
    full_conversation(settings, providers, c1)
    say(settings, providers, c2, STUDENT_1, {"intent": "request_step", "response": "Where do I start?"})
    full_conversation(settings, providers, d1)
    with session_scope(settings.database_url) as s:
        blocked = s.exec(select(Worker).where(Worker.external_id == STUDENT_2)).one()
        block_worker(s, blocked, permanent=True, actor="requester:test", reason="random answers")

    def exported(name: str, filters: ExportFilters) -> list[dict]:
        with session_scope(settings.database_url) as s:
            export_dataset(s, tmp_path / name, hash_key=settings.worker_hash_key, filters=filters)
        return export_files(tmp_path / name)

    assert [d["conversation_id"] for d in exported("batch", ExportFilters(batch_id=diy))] == [d1]
    assert [d["conversation_id"] for d in exported("domain", ExportFilters(domain="Cooking"))] == [c1, c2]
    assert [d["conversation_id"] for d in exported("done", ExportFilters(batch_id=cooking, completed_only=True))] == [c1]
    kept = exported("clean", ExportFilters(batch_id=cooking, exclude_blocked=True))[0]["turns"]
    assert [t["index"] for t in kept] == [0, 1, 3, 4, 5]  # turn 2 was the blocked worker's
    assert kept[1]["ratings_received"] is None  # that worker's rating of turn 1 goes with their turn
    assert all(t["real_life"] != "I take the flour out." for t in kept)


def test_conversations_are_read_page_by_page_in_id_order(settings, providers):
    launch(settings, providers, "diy", conversations=5)
    ids = conversation_ids(settings)
    for conversation_id in ids:
        say(settings, providers, conversation_id, STUDENT_1, {"intent": "request_items", "response": "What do I need?"})

    with session_scope(settings.database_url) as s:
        docs = list(iter_conversations(s, settings.worker_hash_key, page_size=2))

    assert [d["conversation_id"] for d in docs] == ids
    assert all(len(d["turns"]) == 1 for d in docs)


def test_an_interrupted_export_leaves_nothing_behind(tmp_path):
    def documents():
        yield {"conversation_id": 1, "format": "not ours"}

    with pytest.raises(ExportError, match="conversation 1 breaks the export schema"):
        write_export(documents(), tmp_path / "dataset")

    assert list(tmp_path.iterdir()) == []


def test_export_cli_errors_are_one_line(settings, providers, tmp_path):
    launch(settings, providers, "cooking")
    [conversation_id] = conversation_ids(settings)
    say(settings, providers, conversation_id, STUDENT_1, {"intent": "request_items", "response": "What do I need?"})
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("keep me")
    env = environment(settings)

    cases = [
        (["export", "--out", str(occupied)], f"error: {occupied} already exists and is not an empty directory"),
        (["export", "--out", str(tmp_path / "x"), "--domain", "gardening"], "error: no conversations match"),
        (["export", "--out", str(tmp_path / "y"), "--scrub-pii"], "error: spaCy model 'no_such_model' is not"),
    ]
    for args, message in cases:  # in process (a subprocess spends seconds importing) ...
        run_env = dict(env, TURKFLOW_SPACY_MODEL="no_such_model") if "--scrub-pii" in args else env
        done = CliRunner().invoke(main, args, env=run_env, catch_exceptions=False)
        assert done.exit_code == 1, done.output
        assert done.stderr.startswith(message), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.output, done.output
    args, message = cases[0]  # ... and once through the console script, as a shell sees it
    done = subprocess.run([str(TURKFLOW), *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert (occupied / "notes.txt").read_text() == "keep me"
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


# ---- every format hides the ids the same way ---------------------------------------------------------------


def plant_ids(settings) -> list[str]:  # noqa: ANN001
    """Every writer types their own raw id into what they wrote, as it is and upper-cased (a turn's text and
    a logged message's): the ids every export must hide."""
    with session_scope(settings.database_url) as s:
        writers = {w.id: w.external_id for w in s.exec(select(Worker))}
        for turn in s.exec(select(Turn).where(Turn.text.is_not(None), Turn.worker_id.is_not(None))):
            raw = writers[turn.worker_id]
            turn.text = f"{turn.text} (I am {raw}, {raw.upper()}, {raw.lower()})"
            s.add(turn)
        for event in s.exec(select(DialogEvent).where(DialogEvent.worker_id.is_not(None))):
            if isinstance(event.data.get("Text"), str):
                raw = writers[event.worker_id]
                event.data = {**event.data, "Text": f"{event.data['Text']} (id: {raw.upper()}; {raw.lower()})"}
                s.add(event)
    return list(writers.values())


def test_every_export_format_hides_raw_worker_ids_typed_in_any_case(settings, providers, tmp_path):
    launch(settings, providers, "cooking")
    [cooking] = conversation_ids(settings)
    full_conversation(settings, providers, cooking)
    launch_star(settings, providers)
    library_dialog(settings, providers, conversation_ids(settings)[-1])
    launch_meep(settings, providers)
    coffee_dialog(settings, providers, conversation_ids(settings)[-1])
    with session_scope(settings.database_url) as s:
        play_frames(s, providers.get("local"), 1, random.Random(3))
    raw_ids = plant_ids(settings)
    for format_ in ("turkflow", "star", "sgd", "frames", "meep"):
        out = tmp_path / format_
        done = CliRunner().invoke(main, ["export", "--out", str(out), "--format", format_],
                                  obj=App(settings_=settings), catch_exceptions=False)
        assert done.exit_code == 0, done.output
        exported = b"".join(p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()).decode().lower()
        assert "i am " in exported or "id: " in exported, format_  # the planted text is there, ids hidden
        leaked = [raw for raw in raw_ids if raw.lower() in exported]
        assert leaked == [], f"--format {format_} holds raw ids {leaked}"


def test_export_into_the_current_folder_is_refused_before_any_work_and_a_link_to_an_empty_folder_is_written(
        settings, providers, tmp_path, monkeypatch):
    """``--out .`` failed only after the whole export was written (its staging folder was made inside it), and
    ``--out LINK`` to an empty folder too (a link is no folder to remove): now the first is a one-line error
    before anything is read or written, the second writes into the folder the link names."""
    launch(settings, providers, "cooking")
    [conversation_id] = conversation_ids(settings)
    full_conversation(settings, providers, conversation_id)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    refused = CliRunner().invoke(main, ["export", "--out", "."], obj=App(settings_=settings), catch_exceptions=False)
    assert refused.exit_code == 1 and "the folder you are in" in refused.stderr, refused.output
    assert len(refused.stderr.strip().splitlines()) == 1
    assert list(here.iterdir()) == [] and [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "link").symlink_to(empty)
    done = CliRunner().invoke(main, ["export", "--out", str(tmp_path / "link")], obj=App(settings_=settings),
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert (tmp_path / "link").is_symlink() and len(export_files(empty)) == 1
