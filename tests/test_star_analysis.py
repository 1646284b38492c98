"""STAR's measures of the wizard in `turkflow analyse --corpus star`: suggestions picked vs replies
written, queries per dialogue, and the order of the wizard's first questions (STAR's Table 8).

Expected numbers come from dialogues written here or from the raw sample files read with plain json."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.conftest import SHARED_DATA
from tests.test_analysis import run_analyse
from turkflow.cli.main import main
from turkflow.protocols.star.consistency import QUERY, checked_actions, follows_order
from turkflow.protocols.star.schemas import load_schema

STAR = SHARED_DATA / "star"
PLANE_BOOK = ("ask_name", "plane_ask_flight_id", QUERY)


def test_plane_books_checked_actions_are_the_three_star_names():
    """STAR's Table 8 caption: "ask_name", "plane_ask_flight_id" and "query plane_book", in that order."""
    assert checked_actions(load_schema(STAR / "tasks" / "plane_book")) == PLANE_BOOK


def test_questions_may_be_skipped_or_asked_twice_but_not_asked_out_of_order():
    assert follows_order(["hello", "ask_name", None, "plane_ask_flight_id", QUERY], PLANE_BOOK)
    assert follows_order(["plane_ask_flight_id", "plane_ask_flight_id", QUERY], PLANE_BOOK)  # name skipped
    assert follows_order(["ask_name", QUERY, "ask_name"], PLANE_BOOK)  # after the query nothing counts
    assert not follows_order(["plane_ask_flight_id", "ask_name", QUERY], PLANE_BOOK)
    assert not follows_order(["hello", "plane_ask_flight_id", None, "ask_name", QUERY], PLANE_BOOK)


def event(agent: str, action: str, label: str = "", text: str = "") -> dict:
    found = {"Agent": agent, "Action": action, "Text": text or label or action, "UnixTime": 1}
    if label:
        found["ActionLabel"] = label
    return found


def dialogue(number: int, tasks: list[str], wizard: list[str], happy: bool = True) -> dict:
    """A complete STAR dialogue whose wizard picks these labels (``query`` queries, ``custom`` writes)."""
    events = []
    for action in wizard:
        events.append(event("User", "utter", text="a user turn"))
        if action == QUERY:
            events += [event("Wizard", "query"), event("KnowledgeBase", "return_item")]
        elif action == "custom":
            events.append(event("Wizard", "utter", text="my own words"))
        else:
            events.append(event("Wizard", "pick_suggestion", label=action))
    return {"DialogueID": number, "CompletionLevel": "Complete", "Events": events,
            "AnonymizedUserWorkerID": "u", "AnonymizedWizardWorkerID": "w",
            "Scenario": {"Domains": ["plane"], "Happy": happy, "MultiTask": len(tasks) > 1,
                         "WizardCapabilities": [{"Task": task, "Domain": "plane"} for task in tasks]}}


def write_corpus(root: Path, dialogues: list[dict]) -> Path:
    (root / "dialogues").mkdir(parents=True)
    for d in dialogues:
        (root / "dialogues" / f"{d['DialogueID']}.json").write_text(json.dumps(d))
    return root


def test_the_wizards_order_replies_and_queries_of_written_dialogues(tmp_path):
    root = write_corpus(tmp_path / "star", [
        dialogue(1, ["plane_book"], ["hello", "ask_name", "custom", "plane_ask_flight_id", QUERY, "yes"]),
        dialogue(2, ["plane_book"], ["plane_ask_flight_id", "ask_name", QUERY], happy=False),
        dialogue(3, ["plane_book", "plane_search"], ["plane_ask_flight_id", "ask_name", QUERY, QUERY]),
    ])

    star = run_analyse(tmp_path, "--corpus", "star", str(root), "--schemas", str(STAR / "tasks"))["star"]

    assert star["wizard_replies"] == {"suggestions_picked": 8, "written": 1, "picked_share": 8 / 9}
    assert star["queries_per_dialogue"] == 4 / 3
    order = star["wizard_order"]
    assert (order["single_task_dialogues"], order["follow"], order["happy_follow"]) == (2, 0.5, 1.0)
    assert order["tasks"]["plane_book"]["checked_actions"] == list(PLANE_BOOK)
    assert "Table 8" in (tmp_path / "analysis" / "report.html").read_text()


def test_a_star_root_brings_its_schemas_and_the_sample_is_judged_dialogue_by_dialogue(tmp_path):
    complete = [d for d in (json.loads(p.read_text()) for p in (STAR / "dialogues").glob("*.json"))
                if d["CompletionLevel"] == "Complete"]
    wizard = [e for d in complete for e in d["Events"] if e["Agent"] == "Wizard"]
    single = [d for d in complete if not d["Scenario"]["MultiTask"]
              and len(d["Scenario"]["WizardCapabilities"]) == 1]

    star = run_analyse(tmp_path, "--corpus", "star", str(STAR))["star"]

    picked = sum(e["Action"] == "pick_suggestion" for e in wizard)
    assert star["wizard_replies"]["suggestions_picked"] == picked
    assert star["wizard_replies"]["written"] == sum(e["Action"] == "utter" for e in wizard)
    assert star["queries_per_dialogue"] == sum(e["Action"] == "query" for e in wizard) / len(complete)
    order = star["wizard_order"]
    assert order["single_task_dialogues"] == len(single)
    assert sum(t["dialogues"] for t in order["tasks"].values()) == len(single)
    assert 0 < order["follow"] < 1  # the sample's wizards mostly follow the chart, and not always


def test_without_schemas_the_order_is_not_judged_and_schemas_need_a_star_corpus(tmp_path):
    files = sorted((STAR / "dialogues").glob("*.json"))[:5]
    star = run_analyse(tmp_path, "--corpus", "star", *map(str, files))["star"]
    assert star["wizard_order"] is None and star["wizard_replies"]["suggestions_picked"] > 0
    assert "analyse with --schemas" in (tmp_path / "analysis" / "report.html").read_text()

    refused = CliRunner().invoke(main, ["analyse", "--corpus", "sgd", str(SHARED_DATA / "sgd"), "--schemas",
                                        str(STAR / "tasks"), "--out", str(tmp_path / "sgd")],
                                 env={"TURKFLOW_DATA_DIR": str(tmp_path / "var")})
    assert refused.exit_code == 1
    assert refused.stderr.strip() == "error: --schemas: only a STAR corpus (--corpus star) has task schemas"
