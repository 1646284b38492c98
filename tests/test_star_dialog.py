"""STAR dialogs on the pipeline: tasks loaded from STAR's folders, scenarios at launch, every action an
event written through ``record_action``, export in STAR's format read back by the analysis, replay."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from sqlmodel import col, select

from turkflow.dataset.analysis.corpora import read_corpus
from turkflow.db import session_scope
from turkflow.errors import InvalidInput
from turkflow.hits import lifecycle
from turkflow.models import Conversation, DialogEvent, Hit, HitStatus, Task, Turn, Worker
from turkflow.protocols.registry import load_tasks
from turkflow.protocols.star.dialog import (
    give_nudges,
    knowledge_base,
    make_scenarios,
    read_tasks,
    record_action,
    replay,
    star_turns,
)

SAMPLE = Path(__file__).resolve().parents[1] / "turkflow" / "samples" / "star" / "tasks"
USER_1, USER_2, WIZARD_1, WIZARD_2 = "U1-star-user", "U2-star-user", "W1-star-wizard", "W2-star-wizard"


def launch_star(settings, providers, conversations: int = 1, tasks_per_dialog: int = 1,
                tasks_dir: Path = SAMPLE) -> int:
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(tasks_dir))
        # the library first: the dialogs below are about books
        tasks = list(s.exec(select(Task).where(Task.protocol == "star").order_by(Task.key.desc())))
        scenarios = make_scenarios(tasks, conversations, tasks_per_dialog=tasks_per_dialog)
        batch, hits = lifecycle.launch_batch(s, tasks, conversations, name="star pilot", max_turns=20,
                                             protocol="star", scenarios=scenarios)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def hold(s, conversation_id: int, external_id: str, role: str) -> tuple[Turn, Worker, str]:
    """A worker takes the conversation's open turn, as the queue page does."""
    author = s.exec(select(Worker).where(Worker.external_id == external_id)).first()
    if author is None:
        author = Worker(external_id=external_id, role=role, onboarded=True)
        s.add(author)
        s.flush()
    hit = s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                 .where(Turn.conversation_id == conversation_id, Hit.status == HitStatus.open)).one()
    assignment = lifecycle.take_turn(s, author, hit.id, lease_seconds=60)
    return s.get(Turn, hit.turn_id), author, assignment.external_id


def turn(settings, providers, conversation_id: int, external_id: str, role: str,
         actions: list[tuple[str, dict]], label: str, text: str) -> None:
    """One paid turn: take it, log its actions through record_action, submit it, open the next one."""
    with session_scope(settings.database_url) as s:
        held, author, assignment = hold(s, conversation_id, external_id, role)
        give_nudges(s, held)
        for action, fields in actions:
            record_action(s, held, author, action, fields)
        intent = "intent" if role == "user" else "action"
        lifecycle.submit_turn(s, assignment, author, {intent: label, "response": text})
        next_hit = lifecycle.advance_conversation(s, conversation_id)
        if next_hit is not None:
            lifecycle.publish_hit(s, providers.get("local"), next_hit.id)


def first_conversation(settings) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation.id).order_by(Conversation.id)).first()


def library_dialog(settings, providers, conversation_id: int) -> None:
    """A complete library dialog: seven paid turns, nine STAR turns (two wizard turns query first)."""
    turn(settings, providers, conversation_id, USER_1, "user",
         [("utter", {"text": "Hi, I'd like to borrow a novel."})], "utter",
         "Hi, I'd like to borrow a novel.")
    turn(settings, providers, conversation_id, WIZARD_1, "wizard",
         [("request_suggestions", {"text": "Which language?"}),
          ("pick_suggestion", {"label": "library_ask_language", "options": ["library_ask_language", "goodbye"],
                               "text": "In which language would you like to read it?"})],
         "pick_suggestion", "In which language would you like to read it?")
    turn(settings, providers, conversation_id, USER_2, "user",
         [("utter", {"text": "English, please."})], "utter", "English, please.")
    turn(settings, providers, conversation_id, WIZARD_2, "wizard",
         [("query", {"api": "library_search",
                     "constraints": [{"Genre": '"Novel"'}, {"Language": '"English"'}]}),
          ("pick_suggestion", {"label": "library_inform_book",
                               "text": "Paper Rivers by M. Ruiz is on floor 2."})],
         "pick_suggestion", "Paper Rivers by M. Ruiz is on floor 2.")
    turn(settings, providers, conversation_id, USER_1, "user",
         [("utter", {"text": "Do you have poetry in German too?"})], "utter",
         "Do you have poetry in German too?")
    turn(settings, providers, conversation_id, WIZARD_1, "wizard",
         [("query", {"api": "library_search", "constraints": {"Genre": '"Poetry"', "Language": '"German"'}}),
          ("utter", {"text": "Yes, several; the first is on floor 1."})],
         "utter", "Yes, several; the first is on floor 1.")
    turn(settings, providers, conversation_id, USER_2, "user",
         [("utter", {"text": "Thanks, bye!"}), ("complete", {})], "complete", "Thanks, bye!")


def events_of(settings, conversation_id: int) -> list[DialogEvent]:
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(DialogEvent).where(DialogEvent.conversation_id == conversation_id)
                           .order_by(DialogEvent.id)))


def test_a_star_dialog_is_logged_event_by_event_and_ends_with_the_users_complete(settings, providers):
    launch_star(settings, providers)
    conversation_id = first_conversation(settings)
    library_dialog(settings, providers, conversation_id)

    logged = events_of(settings, conversation_id)
    events = [e for e in logged if e.action != "instruct"]
    assert [(e.agent, e.action) for e in events] == [
        ("User", "utter"), ("Wizard", "request_suggestions"), ("Wizard", "pick_suggestion"),
        ("User", "utter"),
        ("Wizard", "query"), ("KnowledgeBase", "return_item"), ("Wizard", "pick_suggestion"),
        ("User", "utter"), ("Wizard", "query"), ("KnowledgeBase", "return_item"), ("Wizard", "utter"),
        ("User", "utter"), ("User", "complete"),
    ]
    # the user guide speaks as each user turn opens, when the dialog's state calls for it: the opening
    # nudge at the start, the task file's own nudge at its turn, the scenario's others once each when due
    with session_scope(settings.database_url) as s:
        planned = {n["text"]: n for n in s.get(Conversation, conversation_id).scenario["nudges"]}
    nudges = [(e.turn_index, e.data["Text"].rsplit(" [", 1)[0]) for e in logged if e.action == "instruct"]
    assert nudges[0][0] == 0 and planned[nudges[0][1]]["when"] == "start"
    assert (2, "Mention that you are a student and ask whether that matters.") in nudges or any(
        index == 2 and planned[text].get("turn") == 2 for index, text in nudges)
    assert all(text in planned for _, text in nudges) and len({t for _, t in nudges}) == len(nudges)
    assert [e.data["Text"].rsplit("[", 1)[1] for e in logged if e.action == "instruct"] == [
        f"instruction {n} of {len(planned)}]" for n in range(1, len(nudges) + 1)]
    assert all(logged[logged.index(e) + 1].action == "utter" for e in logged if e.action == "instruct")
    assert events[5].data["TotalItems"] > 0 and events[5].data["Item"]["Genre"] == "Novel"
    assert all(e.worker_id is not None for e in events if e.agent in ("User", "Wizard"))
    assert star_turns(events) == 9
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, conversation_id)
        assert (conversation.status, conversation.end_reason, conversation.turn_count) == (
            "completed", "user_complete", 7)
        assert conversation.scenario["tasks"] == ["library_search"]


@pytest.mark.parametrize("action, fields, field", [
    ("shout", {"text": "hi"}, "action"),
    ("return_item", {}, "action"),
    ("query", {"api": "library_search", "constraints": [{"Colour": '"Red"'}]}, "Colour"),
    ("query", {"api": "library_search", "constraints": [{"Genre": "42"}]}, "Genre"),
    ("query", {"api": "library_search", "constraints": "Genre=Novel"}, "constraints"),
    ("query", {"api": "weather", "constraints": []}, "api"),
    ("pick_suggestion", {"label": "no_such_reply", "text": "hello"}, "label"),
    ("pick_suggestion", {"label": "hello", "text": 42}, "text"),
    ("utter", {"text": "hello", "mood": "cheerful"}, "mood"),
    ("select_task", {"task": "weather"}, "task"),
])
def test_a_bad_action_is_an_error_naming_the_field_and_stores_nothing(settings, providers, action, fields,
                                                                      field):
    launch_star(settings, providers)
    conversation_id = first_conversation(settings)
    turn(settings, providers, conversation_id, USER_1, "user",
         [("utter", {"text": "I need a novel."})], "utter", "I need a novel.")
    before = len(events_of(settings, conversation_id))
    with session_scope(settings.database_url) as s:
        held, author, _ = hold(s, conversation_id, WIZARD_1, "wizard")
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, author, action, fields)
    assert error.value.field == field
    assert len(events_of(settings, conversation_id)) == before


def test_only_the_worker_holding_the_turn_logs_its_actions_and_a_user_cannot_query(settings, providers):
    launch_star(settings, providers)
    conversation_id = first_conversation(settings)
    with session_scope(settings.database_url) as s:
        held, author, _ = hold(s, conversation_id, USER_1, "user")
        stranger = Worker(external_id="U9-other", role="user", onboarded=True)
        s.add(stranger)
        s.flush()
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, stranger, "utter", {"text": "hi"})
        assert error.value.field == "turn"
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, author, "query", {"api": "cinema_search", "constraints": []})
        assert error.value.field == "action"
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, author, "complete", {})  # goodbye first
        assert error.value.field == "action"


def test_replay_finds_nothing_on_an_untouched_log_and_names_a_query_whose_row_changed(settings, providers):
    launch_star(settings, providers)
    conversation_id = first_conversation(settings)
    library_dialog(settings, providers, conversation_id)
    kb = knowledge_base(str(SAMPLE.resolve().parent / "apis"))
    with session_scope(settings.database_url) as s:
        replayed, differences = replay(s, [conversation_id])
        assert (replayed, differences) == (2, [])

        first_query = next(e for e in events_of(settings, conversation_id) if e.action == "query")
        returned = next(e for e in events_of(settings, conversation_id) if e.action == "return_item")
        row = next(r for r in kb.databases["library"].rows if r["id"] == returned.data["Item"]["id"])
        saved = dict(row)
        try:
            row["Floor"] = 99
            replayed, differences = replay(s, [conversation_id])
        finally:
            row.clear()
            row.update(saved)
    assert replayed == 2
    assert [d.event_id for d in differences] == [first_query.id]
    assert "library_search" in differences[0].describe() and '"Floor": 99' in differences[0].describe()


def test_star_tasks_and_wizard_of_tasks_documents_are_not_mixed_in_one_batch(settings, providers):
    from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(SAMPLE))
        load_documents(s, read_documents(sample_tasks_path()))
        every = list(s.exec(select(Task)))
        with pytest.raises(ValueError, match="a batch follows one protocol"):
            lifecycle.launch_batch(s, every, 2, name="mixed", protocol="star")
        with pytest.raises(ValueError, match="a batch follows one protocol"):
            lifecycle.launch_batch(s, every, 2, name="mixed")


def test_multi_task_scenarios_name_several_tasks_and_nudges_come_once(settings, providers):
    launch_star(settings, providers, conversations=2, tasks_per_dialog=2)
    with session_scope(settings.database_url) as s:
        scenarios = [c.scenario for c in s.exec(select(Conversation).order_by(Conversation.id))]
    assert [sc["tasks"] for sc in scenarios] == [["library_search", "cinema_search"],
                                                 ["cinema_search", "library_search"]]
    own = json.loads((SAMPLE / "library_search" / "library_search.json").read_text())["turkflow"]["nudges"]
    for sc in scenarios:
        assert sc["multi_task"] and len(sc["plans"]) == 2
        assert [{"turn": n["turn"], "text": n["text"]} for n in sc["nudges"] if "turn" in n] == [
            {"turn": 2, "text": own[0]["text"]}]
        assert any(sc["tasks"][1].replace("_", " ") in n["text"] and n["when"] == "turns" for n in sc["nudges"])


# ---- export, analyse, the commands ---------------------------------------------------------------------

TURKFLOW = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "turkflow"


def command(settings, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(settings.data_dir),
           "TURKFLOW_DATABASE_URL": settings.database_url, "TURKFLOW_SECRET_KEY": settings.secret_key,
           "TURKFLOW_WORKER_HASH_KEY": settings.worker_hash_key}
    return subprocess.run([str(TURKFLOW), *args], capture_output=True, text=True, env=env, timeout=300)


def test_export_in_stars_format_reads_back_with_the_turn_count_the_database_holds(settings, providers,
                                                                                  tmp_path):
    batch_id = launch_star(settings, providers, conversations=2)
    conversation_id = first_conversation(settings)
    library_dialog(settings, providers, conversation_id)
    with session_scope(settings.database_url) as s:
        held = star_turns(s.exec(select(DialogEvent).where(DialogEvent.conversation_id == conversation_id)))

    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "star"))
    assert exported.returncode == 0, exported.stderr
    # the other conversation never started: it is no STAR dialogue and is not written
    assert f"exported 1 STAR dialogue ({held} STAR turns in complete ones)" in exported.stdout
    assert len(list((tmp_path / "star" / "dialogues").iterdir())) == 1
    doc = json.loads((tmp_path / "star" / "dialogues" / f"{conversation_id}.json").read_text())
    assert doc["CompletionLevel"] == "Complete" and doc["Scenario"]["WizardCapabilities"][0]["Task"] == (
        "library_search")
    query = next(e for e in doc["Events"] if e["Action"] == "query")
    assert query["Agent"] == "Wizard" and query["APIName"] == "library_search"
    assert query["Constraints"] == [{"Genre": '"Novel"'}, {"Language": '"English"'}]
    answer = doc["Events"][doc["Events"].index(query) + 1]
    assert answer["Agent"] == "KnowledgeBase" and answer["Item"]["Genre"] == "Novel"
    assert answer["TotalItems"] > 0
    raw_ids = (USER_1, USER_2, WIZARD_1, WIZARD_2)
    text = json.dumps(doc)
    assert not any(raw in text for raw in raw_ids)
    assert doc["AnonymizedUserWorkerID"].startswith("w")
    assert len({e.get("AnonymizedWorkerID") for e in doc["Events"] if e["Agent"] == "User"}) == 2

    dialogues, _ = read_corpus("star", [tmp_path / "star"])
    read = list(dialogues)
    assert [(d.id, len(d.turns)) for d in read] == [(str(conversation_id), held)]  # the other is in progress
    analysed = command(settings, "analyse", "--corpus", "star", str(tmp_path / "star" / "dialogues"),
                       "--out", str(tmp_path / "analysis"))
    assert analysed.returncode == 0, analysed.stderr
    stats = json.loads((tmp_path / "analysis" / "stats.json").read_text())
    assert (stats["dialogues"], stats["turns"]) == (1, held)

    plain = command(settings, "export", "--out", str(tmp_path / "plain"))  # Wizard of Tasks only
    assert plain.returncode == 1 and plain.stderr == (
        "error: no conversations match these filters; nothing exported (they select star: star with "
        "--format star)\n")
    frames = command(settings, "export", "--out", str(tmp_path / "frames"), "--format", "frames",
                     "--batch", str(batch_id))
    assert frames.returncode == 1 and frames.stderr == (
        f"error: no Frames conversations match these filters; nothing exported (batch {batch_id} follows "
        "star: star with --format star)\n")


def test_replay_command_reports_nothing_on_an_untouched_log(settings, providers):
    batch_id = launch_star(settings, providers)
    library_dialog(settings, providers, first_conversation(settings))
    done = command(settings, "replay", "--batch", str(batch_id))
    assert done.returncode == 0, done.stderr
    assert "replayed 2 queries in 1 conversations: 0 differ" in done.stdout
    missing = command(settings, "replay", "999")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "999" in missing.stderr


def test_replay_command_names_the_query_whose_knowledge_base_row_changed(settings, providers, tmp_path):
    copy = tmp_path / "star"
    shutil.copytree(SAMPLE.parent, copy)
    batch_id = launch_star(settings, providers, tasks_dir=copy / "tasks")
    with session_scope(settings.database_url) as s:  # the tasks remember where their knowledge base is
        assert s.exec(select(Task).where(Task.key == "star:library_search")).one().star["kb_dir"] == str(
            (copy / "apis").resolve())
    library_dialog(settings, providers, first_conversation(settings))
    assert command(settings, "replay", "--batch", str(batch_id)).returncode == 0

    database = copy / "apis" / "dbs" / "library.json"  # the rows are drawn again, with other floors
    database.write_text(database.read_text().replace('"Min": 0, "Max": 3', '"Min": 10, "Max": 13'))
    changed = command(settings, "replay", "--batch", str(batch_id))
    assert changed.returncode == 1
    queries = [e for e in events_of(settings, first_conversation(settings)) if e.action == "query"]
    reported = [line for line in changed.stdout.splitlines() if line.startswith("conversation ")]
    assert [f"query {q.id} to library_search" in line for q, line in zip(queries, reported)] == [True, True]
    assert "2 differ" in changed.stdout


def test_tasks_load_reads_a_star_folder_and_a_bad_file_is_one_line_naming_it(settings, tmp_path):
    loaded = command(settings, "tasks", "load", "--protocol", "star", str(SAMPLE))
    assert loaded.returncode == 0 and "loaded 2 STAR tasks" in loaded.stdout and "2 created" in loaded.stdout
    again = command(settings, "tasks", "load", "--protocol", "star", str(SAMPLE))
    assert "0 created, 2 updated" in again.stdout

    bad = tmp_path / "star"
    shutil.copytree(SAMPLE.parent, bad)
    broken = bad / "tasks" / "cinema_search" / "cinema_search.json"
    broken.write_text(broken.read_text().replace('"query": "cinema_inform_showing"', '"query": "nowhere"'))
    (bad / "tasks" / "aaa_first").mkdir()
    shutil.copy(SAMPLE / "library_search" / "library_search.json",
                bad / "tasks" / "aaa_first" / "aaa_first.json")
    failed = command(settings, "tasks", "load", "--protocol", "star", str(bad / "tasks"))
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1, failed.stderr
    assert str(broken) in failed.stderr and "nowhere" in failed.stderr
    with session_scope(settings.database_url) as s:  # only the first load's tasks
        assert [t.key for t in s.exec(select(Task).order_by(Task.key))] == [
            "star:cinema_search", "star:library_search"]

    not_json = tmp_path / "other" / "tasks" / "x"
    not_json.mkdir(parents=True)
    (not_json / "x.json").write_text("{oops")
    failed = command(settings, "tasks", "load", "--protocol", "star", str(not_json.parent))
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1 and "x.json" in failed.stderr


def test_batch_launch_protocol_star_gives_each_conversation_a_scenario(settings):
    assert command(settings, "tasks", "load", "--protocol", "star", str(SAMPLE)).returncode == 0
    refused = command(settings, "batch", "launch", "--protocol", "star", "--tasks",
                      str(SAMPLE / "library_search" / "library_search.json"), "-n", "2")
    assert refused.returncode == 1 and "tasks load --protocol star" in refused.stderr
    refused = command(settings, "batch", "launch", "--all", "-n", "2", "--unhappy", "0.5")
    assert refused.returncode == 1 and "--protocol star only" in refused.stderr
    launched = command(settings, "batch", "launch", "--protocol", "star", "--all", "-n", "4",
                       "--unhappy", "1", "--tasks-per-dialog", "2", "--yes")
    assert launched.returncode == 0, launched.stderr
    assert "4 user turns open" in launched.stdout
    with session_scope(settings.database_url) as s:
        conversations = list(s.exec(select(Conversation)))
        assert all(c.scenario["multi_task"] and not c.scenario["happy"] and len(c.scenario["tasks"]) == 2
                   for c in conversations)
        assert {t.role for t in s.exec(select(Turn))} == {"user"}
    closed = command(settings, "batch", "launch", "--protocol", "star", "--all", "-n", "1",
                     "--provider", "mturk")  # Prolific takes STAR batches: tests/test_star_prolific.py
    assert closed.returncode == 1 and "Mechanical Turk closed" in closed.stderr
    nothing = command(settings, "batch", "launch", "--all", "-n", "1")  # Wizard of Tasks: no documents
    assert nothing.returncode == 1 and "turkflow tasks load" in nothing.stderr


# ---- parity with STAR's own files (issue 24, item 6) -----------------------------------------------------

STAR_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "star"
OUR_EVENT_FIELDS = {"Turn", "AnonymizedWorkerID"}  # which paid turn, which of several workers wrote it
OUR_TOP_FIELDS = {"AnonymizedUserWorkerIDs", "AnonymizedWizardWorkerIDs", "TurkflowStatus"}
ITEM_SELECTION = {"PrimaryItem", "SecondaryItem"}  # the knowledge-base form's selections write these
needs_star = pytest.mark.skipif(not (STAR_ROOT / "dialogues").is_dir(), reason="STAR's dialogues are not here")


def star_key_sets() -> tuple[set[str], dict[tuple[str, str], tuple[set[str], set[str]]]]:
    """The top-level keys and, per (Agent, Action), the keys every one of STAR's sample dialogues' events
    of that kind holds and the keys any of them holds, the item selection aside."""
    top: set[str] = set()
    kinds: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for path in sorted((STAR_ROOT / "dialogues").glob("*.json")):
        doc = json.loads(path.read_text())
        top |= set(doc)
        for event in doc["Events"]:
            keys = set(event) - ITEM_SELECTION
            every, some = kinds.get((event["Agent"], event["Action"]), (keys, set()))
            kinds[(event["Agent"], event["Action"])] = (every & keys, some | keys)
    return top, kinds


@needs_star
def test_star_export_has_every_field_stars_dialogues_have_per_event_kind(settings, providers, tmp_path):
    launch_star(settings, providers, conversations=2)
    conversation_id = first_conversation(settings)
    library_dialog(settings, providers, conversation_id)
    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "star"))
    assert exported.returncode == 0, exported.stderr
    doc = json.loads((tmp_path / "star" / "dialogues" / f"{conversation_id}.json").read_text())

    top, kinds = star_key_sets()
    assert set(doc) - OUR_TOP_FIELDS == top
    ours = {}
    for event in doc["Events"]:
        ours.setdefault((event["Agent"], event["Action"]), set(event) - OUR_EVENT_FIELDS - ITEM_SELECTION)
    assert set(ours) == {("User", "utter"), ("User", "complete"), ("UserGuide", "instruct"),
                         ("Wizard", "request_suggestions"), ("Wizard", "pick_suggestion"), ("Wizard", "query"),
                         ("KnowledgeBase", "return_item"), ("Wizard", "utter")}
    for kind, keys in ours.items():
        every, some = kinds[kind]
        assert every <= keys <= some, kind  # no field STAR always writes missing, none STAR never writes
    assert doc["CompletionLevel"] in {"Complete", "EarlyDisconnectDuringDialogue", "DisconnectDuringDialogue",
                                      "DisconnectDuringQuestionnaire"}


@needs_star
def test_star_export_writes_stars_completion_levels_worker_ids_and_minus_one_for_a_check(settings, providers,
                                                                                       tmp_path):
    """A check to a booking API counts no rows (-1, as STAR logs it); the user who wrote most of the
    dialog is its user, every user is listed; a dialog stopped after two turns is an early disconnect."""
    launch_star(settings, providers, conversations=1, tasks_dir=STAR_ROOT / "tasks")
    conversation_id = first_conversation(settings)
    with session_scope(settings.database_url) as s:
        scenario = s.get(Conversation, conversation_id).scenario
        name = scenario["tasks"][0]
    turn(settings, providers, conversation_id, USER_1, "user", [("utter", {"text": "Hello there."})], "utter",
         "Hello there.")
    turn(settings, providers, conversation_id, WIZARD_1, "wizard", [("utter", {"text": "Hi, how can I help?"})],
         "utter", "Hi, how can I help?")
    turn(settings, providers, conversation_id, USER_2, "user", [("utter", {"text": "I need a hand."})],
         "utter", "I need a hand.")
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, conversation_id)
        conversation.status = "cancelled"
        s.add(conversation)
    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "star"))
    assert exported.returncode == 0, exported.stderr
    doc = json.loads((tmp_path / "star" / "dialogues" / f"{conversation_id}.json").read_text())
    assert doc["CompletionLevel"] == "EarlyDisconnectDuringDialogue" and doc["TurkflowStatus"] == "cancelled"
    users = [e["AnonymizedWorkerID"] for e in doc["Events"] if e["Agent"] == "User"]
    assert doc["AnonymizedUserWorkerIDs"] == list(dict.fromkeys(users)) and len(set(users)) == 2
    assert doc["AnonymizedUserWorkerID"] == users[0]  # a tie: the first to join
    assert doc["Scenario"]["WizardCapabilities"][0]["Task"] == name

    from turkflow.protocols.star.dialog import _star_answer

    with session_scope(settings.database_url) as s:
        tasks = {t.star["task"]: t for t in s.exec(select(Task).where(Task.protocol == "star"))}
    checked = _star_answer({"APIName": "doctor_schedule", "Item": {"Message": "The time slot is available."},
                            "TotalItems": 1}, tasks)
    assert checked == {"APIName": "doctor_schedule", "Item": {"Message": "The time slot is available."},
                       "TotalItems": -1}
    assert _star_answer({"APIName": "weather", "Item": None, "TotalItems": 0}, tasks) == {
        "APIName": "weather", "TotalItems": 0}


@needs_star
def test_an_unhappy_scenarios_request_is_told_no_on_the_pipeline_and_replays_the_same(settings, providers):
    """The wizard checks exactly what the unhappy scenario names: the knowledge base says no (the user
    must react), the user guide then asks the user to react, and replay finds the same answer."""
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(STAR_ROOT / "tasks"))
        doctor = s.exec(select(Task).where(Task.key == "star:doctor_schedule")).one()
        scenarios = make_scenarios([doctor], 1, unhappy=1.0, seed=4)
        batch, hits = lifecycle.launch_batch(s, [doctor], 1, name="unhappy", max_turns=20, protocol="star",
                                             scenarios=scenarios)
        lifecycle.publish_hit(s, providers.get("local"), hits[0].id)
    conversation_id = first_conversation(settings)
    values = scenarios[0][1]["plans"][0]["values"]
    asked = [{"Name": json.dumps(values["Name"])}, {"Day": json.dumps(values["Day"])},
             {"StartTimeHour": json.dumps(values["StartTimeHour"])}, {"PatientName": '"Wen"'},
             {"Symptoms": '"a cough"'}, {"RequestType": '"Check"'}]
    turn(settings, providers, conversation_id, USER_1, "user", [("utter", {"text": "I need a doctor."})],
         "utter", "I need a doctor.")
    turn(settings, providers, conversation_id, WIZARD_1, "wizard",
         [("query", {"api": "doctor_schedule", "constraints": asked}),
          ("utter", {"text": "Sorry, that time is taken."})], "utter", "Sorry, that time is taken.")
    turn(settings, providers, conversation_id, USER_2, "user", [("utter", {"text": "Another day then?"})],
         "utter", "Another day then?")
    events = events_of(settings, conversation_id)
    answer = next(e for e in events if e.action == "return_item")
    assert "conflicting appointment" in answer.data["Item"]["Message"]
    reacted = [e.data["Text"] for e in events if e.action == "instruct" and e.turn_index == 2]
    assert len(reacted) == 1 and "That answer does not suit you" in reacted[0]
    done = command(settings, "replay", "--batch", str(batch.id))
    assert done.returncode == 0 and "replayed 1 queries in 1 conversations: 0 differ" in done.stdout


@needs_star
def test_star_export_carries_stars_scenario_and_questionnaire_fields_as_its_dialogues_have_them(
        settings, providers, tmp_path):
    """Read back field by field against STAR's own dialogues: IntroducesConflicts is the scenario's own draw
    (not "unhappy"), the user task ends with STAR's "About you" block, the user is asked STAR's question
    for the task and the wizard STAR's questions in full, and a dialog still running is no disconnect."""
    from turkflow.protocols import surveys

    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(STAR_ROOT / "tasks"))
        tasks = list(s.exec(select(Task).where(Task.key == "star:plane_book")))
        scenarios = make_scenarios(tasks, 2, unhappy=0.0, conflicts=0.5, seed=4)
        batch, hits = lifecycle.launch_batch(s, tasks, 2, name="star fields", max_turns=20, protocol="star",
                                             scenarios=scenarios)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        ids = sorted(c.id for c in s.exec(select(Conversation).where(Conversation.batch_id == batch.id)))
    done, running = ids
    turn(settings, providers, done, USER_1, "user", [("utter", {"text": "Hello, a flight please."})], "utter",
         "Hello, a flight please.")
    turn(settings, providers, done, WIZARD_1, "wizard", [("utter", {"text": "Sure, which one?"})], "utter",
         "Sure, which one?")
    turn(settings, providers, done, USER_1, "user", [("utter", {"text": "Never mind, bye."}), ("complete", {})],
         "complete", "Never mind, bye.")
    turn(settings, providers, running, USER_2, "user", [("utter", {"text": "Hi there."})], "utter", "Hi there.")
    with session_scope(settings.database_url) as s:
        user = s.exec(select(Worker).where(Worker.external_id == USER_1)).one()
        wizard = s.exec(select(Worker).where(Worker.external_id == WIZARD_1)).one()
        asked = [q.label for q in surveys.survey_for(s, done, user).questions]
        assert asked[0] == "Did the AI Assistant book your flight?"
        assert surveys.answer_survey(s, done, user, {"task_done": "no", "calm": "yes"})
        assert surveys.answer_survey(s, done, wizard, {"changed_mind": "yes", "aggressive": "no", "unsure": "no"})
        drawn = {c.id: c.scenario for c in s.exec(select(Conversation).where(col(Conversation.id).in_(ids)))}
    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "star"))
    assert exported.returncode == 0, exported.stderr
    docs = {i: json.loads((tmp_path / "star" / "dialogues" / f"{i}.json").read_text()) for i in ids}

    star_docs = [json.loads(p.read_text()) for p in sorted((STAR_ROOT / "dialogues").glob("*.json"))]
    star_user_questions = {q["Question"] for d in star_docs for q in d.get("UserQuestionnaire") or []}
    doc = docs[done]
    assert [q["Question"] for q in doc["UserQuestionnaire"]] == [
        "Did the AI Assistant book your flight?", "Did the assistant stay calm and helpful throughout the dialogue?"]
    assert all(q["Question"] in star_user_questions for q in doc["UserQuestionnaire"])
    star_wizard = next([q["Question"] for q in d["WizardQuestionnaire"]] for d in star_docs
                       if len(d.get("WizardQuestionnaire") or []) == 3)
    assert [q["Question"] for q in doc["WizardQuestionnaire"]] == star_wizard  # in full, as STAR asked
    assert [q["Answer"] for q in doc["WizardQuestionnaire"]] == [True, False, False]
    for i in ids:
        assert docs[i]["IntroducesConflicts"] is drawn[i]["conflicts"] and docs[i]["Scenario"]["Happy"] is True
        about = f"About you:\n- Your name: {drawn[i]['user_details']['name']}\n- Today is {drawn[i]['user_details']['today']}"
        assert docs[i]["Scenario"]["UserTask"] == f"{drawn[i]['user_task']}\n\n{about}"
    assert sorted(d["IntroducesConflicts"] for d in docs.values()) == [False, True]  # one of two, drawn apart
    with tarfile.open(STAR_ROOT / "train.tar.gz") as split:  # the sample's dialogues are single-task ones
        star_about = next(t for t in (json.load(split.extractfile(m))["Scenario"]["UserTask"]
                                      for m in split if m.isfile()) if "About you:" in t)
    assert star_about.split("About you:")[1].startswith("\n- Your name: ")
    assert "\n- Today is " in star_about.split("About you:")[1]
    assert doc["CompletionLevel"] == "Complete"
    assert (docs[running]["CompletionLevel"], docs[running]["TurkflowStatus"]) == ("InProgress", "active")
