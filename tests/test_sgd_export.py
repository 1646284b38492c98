"""`turkflow export --format sgd`: Wizard of Tasks and STAR conversations in the Schema-Guided Dialogue
format, read back by `turkflow analyse --corpus sgd` with the dialogue and turn counts the database holds."""

from __future__ import annotations

import json

from click.testing import CliRunner
from sqlmodel import col, select

from tests.test_export import conversation_ids, full_conversation, launch
from tests.test_star_dialog import launch_star, library_dialog
from turkflow.cli.main import App, main
from turkflow.db import session_scope
from turkflow.models import Conversation, DialogEvent, Task, Turn, TurnStatus


def turkflow(settings, *args: str):  # noqa: ANN001, ANN201
    return CliRunner().invoke(main, list(args), obj=App(settings_=settings), catch_exceptions=False)


def both_protocols(settings, providers) -> tuple[int, int]:  # noqa: ANN001
    """A complete Wizard of Tasks conversation and a complete STAR dialog (plus one STAR in progress)."""
    launch(settings, providers, "cooking")
    [cooking] = conversation_ids(settings)
    full_conversation(settings, providers, cooking)
    launch_star(settings, providers, conversations=2)
    star = [c for c in conversation_ids(settings) if c != cooking][0]
    library_dialog(settings, providers, star)
    return cooking, star


def spoken(settings, conversation_id: int) -> list[tuple[str, str]]:  # noqa: ANN001
    """(speaker, text) of what the database holds: submitted turns, or a STAR dialog's utterances."""
    with session_scope(settings.database_url) as s:
        events = s.exec(select(DialogEvent).where(DialogEvent.conversation_id == conversation_id,
                                                  col(DialogEvent.action).in_(["utter", "pick_suggestion"]))
                        .order_by(DialogEvent.id)).all()
        if events:
            return [("USER" if e.agent == "User" else "SYSTEM", e.data["Text"]) for e in events]
        turns = s.exec(select(Turn).where(Turn.conversation_id == conversation_id,
                                          Turn.status == TurnStatus.submitted).order_by(Turn.index)).all()
        return [("USER" if t.role == "student" else "SYSTEM", t.text) for t in turns]


def test_both_protocols_export_as_sgd_and_read_back_with_the_counts_the_database_holds(
        settings, providers, tmp_path):
    cooking, star = both_protocols(settings, providers)
    out = tmp_path / "sgd"

    done = turkflow(settings, "export", "--format", "sgd", "--completed-only", "--out", str(out))

    assert done.exit_code == 0, done.output
    held = {cooking: spoken(settings, cooking), star: spoken(settings, star)}
    turns = sum(len(t) for t in held.values())
    assert f"exported 2 dialogues ({turns} turns) in the Schema-Guided Dialogue format" in done.output
    [dialogues_file] = sorted(out.glob("dialogues_*.json"))
    dialogues = {d["dialogue_id"]: d for d in json.loads(dialogues_file.read_text())}
    for key, conversation_id in ((str(cooking), cooking), (f"star_{star}", star)):
        assert [(t["speaker"], t["utterance"]) for t in dialogues[key]["turns"]] == held[conversation_id]

    teacher = dialogues[str(cooking)]["turns"][1]["frames"][0]
    assert {"act": "RETURN_ITEMS", "slot": "", "values": [], "canonical_values": []} in teacher["actions"]
    shared = [a["values"] for a in teacher["actions"] if a["slot"] == "document_item"]
    assert shared == [["item-1"], ["item-2"]]
    frames = [t["frames"][0] for t in dialogues[f"star_{star}"]["turns"]]
    after_query = next(frame for frame in frames if "service_call" in frame)
    assert after_query["service_call"] == {"method": "library_search",
                                           "parameters": {"Genre": '"Novel"', "Language": '"English"'}}
    assert after_query["service_results"][0]["Genre"] == "Novel"
    assert after_query["actions"][0]["act"] == "LIBRARY_INFORM_BOOK"

    services = {s["service_name"]: s for s in json.loads((out / "schema.json").read_text())}
    with session_scope(settings.database_url) as s:
        cooking_task = s.get(Task, s.get(Conversation, cooking).task_id).key
    assert set(services) == {cooking_task, "library_search"}
    library = services["library_search"]
    assert {"Genre", "Language"} <= {slot["name"] for slot in library["slots"]}
    assert library["intents"][0]["name"] == "library_search"

    environment, analysis = {"TURKFLOW_DATA_DIR": str(tmp_path / "var")}, tmp_path / "a"
    analysed = CliRunner().invoke(main, ["analyse", "--corpus", "sgd", str(out), "--out", str(analysis)],
                                  env=environment, catch_exceptions=False)
    assert analysed.exit_code == 0, analysed.output
    stats = json.loads((analysis / "stats.json").read_text())
    assert (stats["dialogues"], stats["turns"]) == (2, turns)


def test_options_that_star_conversations_do_not_support_are_one_line_errors(settings, providers, tmp_path):
    both_protocols(settings, providers)
    refused = turkflow(settings, "export", "--format", "sgd", "--exclude-blocked",
                       "--out", str(tmp_path / "x"))
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [
        "error: --exclude-blocked and --scrub-pii do not apply to STAR, Frames or MEEP conversations yet; "
        "choose a Wizard of Tasks batch with --batch"]
    assert not (tmp_path / "x").exists()
