"""Frames as the paper ran it (issue 26, item 2): the wizard's booking ends the dialog and is judged against
the user's goal (whose failure rule makes every booking for a goal drawn to fail a compromise), flexible
dates widen a search, each dialog draws its wizards' instruction, and the domain file's labels, one-bound
fields and result columns are checked. Pure functions where they suffice; the state machine on the
pipeline, on both databases."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest
from sqlmodel import select

from tests.test_frames_dialog import (
    NOTHING, USER_1, WIZARD_1, domain_copy, first_conversation, launch_frames, turn,
)
from tests.test_star_dialog import hold
from turkflow.db import session_scope
from turkflow.errors import InvalidDocument, InvalidInput
from turkflow.hits import lifecycle
from turkflow.models import Conversation, DialogEvent, Task, Turn
from turkflow.protocols.frames import events as frames_events
from turkflow.protocols.frames.dialog import make_scenarios, read_tasks, record_action, replay, submit_turn
from turkflow.protocols.frames.domain import SAMPLE, load_domain
from turkflow.protocols.frames.goals import (
    BREAKS_GOAL, MEETS_ALTERNATE, MEETS_GOAL, generate, judge_booking,
)
from turkflow.protocols.frames.search import parse_search, run_search
from turkflow.protocols.frames.survey import success_report
from turkflow.protocols.registry import load_tasks


@pytest.fixture(scope="module")
def domain():
    return load_domain()


# ---- the goal's failure rule, against booking -------------------------------------------------------------


def test_no_package_meets_a_goal_drawn_to_fail_so_any_booking_breaks_it_or_meets_the_alternate(domain):
    goals = generate(domain.templates, domain.db, 60, 0.0, random.Random(3))
    for goal in goals:
        outcomes = [judge_booking(goal, item) for item in domain.db.items]
        assert all(o.outcome != MEETS_GOAL and o.broken for o in outcomes), goal.template
        meets_alternate = sum(o.outcome == MEETS_ALTERNATE for o in outcomes)
        assert meets_alternate == (goal.alternate.matches if goal.alternate else 0)
    assert any(g.alternate and g.alternate.matches for g in goals)  # some users can compromise


def test_a_goal_drawn_to_succeed_is_met_by_exactly_the_packages_it_matches(domain):
    for goal in generate(domain.templates, domain.db, 30, 1.0, random.Random(4)):
        met = [item for item in domain.db.items if judge_booking(goal, item).outcome == MEETS_GOAL]
        assert len(met) == goal.matches > 0
        broken = judge_booking(goal, next(i for i in domain.db.items if i not in met))
        assert broken.outcome in (BREAKS_GOAL, MEETS_ALTERNATE) and broken.broken


def test_the_success_report_counts_what_each_dialog_booked_against_its_goal(domain):
    fails = next(g for g in generate(domain.templates, domain.db, 30, 0.0, random.Random(5)) if g.alternate)
    succeeds = generate(domain.templates, domain.db, 1, 1.0, random.Random(6))[0]
    met = next(i for i in domain.db.items if judge_booking(succeeds, i).outcome == MEETS_GOAL)
    broken = next(i for i in domain.db.items if judge_booking(fails, i).outcome == BREAKS_GOAL)
    rows = success_report([(succeeds, {}), (fails, {}), (fails, {})], [met, broken, None])
    assert rows[-1].template == "all" and rows[-1].booked == {
        "meets_goal": 1, "meets_alternate": 0, "breaks_goal": 1, "none": 1}


# ---- flexible dates, labels, instructions -------------------------------------------------------------


def test_flexible_dates_widen_every_date_condition_and_are_logged_so_replay_finds_the_same(domain):
    item = min(domain.db.items, key=lambda i: i["departure"])
    day = (item["departure"] + timedelta(days=2)).isoformat()
    exact = parse_search(domain.db, {"origin": item["origin"], "departure": day})
    assert item["id"] not in run_search(domain.db, exact, limit=10_000).ids
    flexible = parse_search(domain.db, {"origin": item["origin"], "departure": day}, flexible="2")
    found = run_search(domain.db, flexible, limit=10_000)
    assert item["id"] in found.ids
    logged = frames_events.search_events(flexible, found)
    assert logged[0].data["flexible"] == 2 and logged[0].data["constraints"][1]["value"] == day  # as typed
    assert frames_events.replay(domain.db, logged) == []
    for bad in (-1, 8, "two", True):
        with pytest.raises(InvalidInput) as error:
            parse_search(domain.db, {}, flexible=bad)
        assert error.value.field == "flexible"


def test_each_dialog_draws_its_wizards_instruction_from_the_domain_and_the_seed(settings):
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(SAMPLE))
        tasks = list(s.exec(select(Task).where(Task.protocol == "frames")))
        drawn = make_scenarios(tasks, 20, seed=7)
        assert [g for _, g in drawn] == [g for _, g in make_scenarios(tasks, 20, seed=7)]
    told = [goal["wizard_instruction"] for _, goal in drawn]
    assert set(told) <= set(load_domain().wizard_instructions) and len(set(told)) > 2
    assert any("nothing is available" in t for t in load_domain().wizard_instructions)


@pytest.mark.parametrize("line, bad, named", [
    ("    hotel: Hotel\n", "    hotl: Hotel\n", "database.labels: 'hotl' is not a column"),
    ("    max_adults: at_least\n", "    origin: at_least\n", "database.ask: 'origin'"),
    ("    max_adults: at_least\n", "    max_adults: around\n", "database.ask: 'max_adults'"),
    ("results: [destination,", "results: [pricey, destination,", "database.results: 'pricey'"),
])
def test_a_bad_label_bound_or_result_column_refuses_the_domain_naming_the_key(tmp_path, line, bad, named):
    path = domain_copy(tmp_path)
    path.write_text(path.read_text().replace(line, bad, 1))
    with pytest.raises(InvalidDocument, match=named):
        load_domain(path)


# ---- booking on the pipeline --------------------------------------------------------------------------


def test_a_wizard_books_only_a_package_the_dialog_showed_then_only_replies_and_the_dialog_ends(
        settings, providers, tmp_path):
    launch_frames(settings, providers, domain=domain_copy(tmp_path), success=1.0)
    dialog = first_conversation(settings)
    turn(settings, providers, dialog, USER_1, "user", [], "Hi! Lisbon, please.")
    with session_scope(settings.database_url) as s:
        held, wizard, assignment = hold(s, dialog, WIZARD_1, "wizard")
        with pytest.raises(InvalidInput) as error:  # nothing shown yet
            record_action(s, held, wizard, "book", {"id": 1})
        assert error.value.field == "id"
        found = record_action(s, held, wizard, "search", {"constraints": {"destination": "Lisbon"}})[1].data
        record_action(s, held, wizard, "search", NOTHING)
        unseen = next(i for i in range(1, 1000) if i not in found["ids"])
        for fields, field in (({"id": unseen}, "id"), ({"id": [found["ids"][0]]}, "id"),
                              ({"id": found["ids"][0], "seat": "business"}, "seat")):
            with pytest.raises(InvalidInput) as error:
                record_action(s, held, wizard, "book", fields)
            assert error.value.field == field
        booked = record_action(s, held, wizard, "book", {"id": str(found["ids"][0])})  # as a form sends it
        assert [(e.agent, e.action) for e in booked] == [("Wizard", "book")]
        assert booked[0].data["id"] == found["ids"][0] and booked[0].data["item"]["destination"] == "Lisbon"
        for action, fields in (("search", NOTHING), ("book", {"id": found["ids"][0]})):
            with pytest.raises(InvalidInput) as error:
                record_action(s, held, wizard, action, fields)
            assert error.value.field == "action"
        submit_turn(s, assignment, wizard, {"action": "utter", "text": "Booked your Lisbon trip!"})
        assert lifecycle.advance_conversation(s, dialog) is None  # nothing opens after a booking
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, dialog)
        last = s.exec(select(Turn).where(Turn.conversation_id == dialog).order_by(Turn.index.desc())).first()
        assert (conversation.status, conversation.end_reason) == ("completed", "wizard_booked")
        assert (last.label, last.answers["action"]) == ("book", "book")
        count = len(s.exec(select(DialogEvent).where(DialogEvent.conversation_id == dialog)).all())
    with session_scope(settings.database_url) as s:
        assert replay(s, [dialog]) == (2, [])
        assert len(s.exec(select(DialogEvent).where(DialogEvent.conversation_id == dialog)).all()) == count

    # the export says what was booked and its verdict against the goal, and the user's rating once answered
    from tests.test_star_dialog import command
    from turkflow.models import Worker
    from turkflow.protocols import surveys

    exported = command(settings, "export", "--format", "frames", "--out", str(tmp_path / "unrated"))
    assert exported.returncode == 0, exported.stderr
    (unrated,) = json.loads((tmp_path / "unrated" / "frames.json").read_text())
    assert unrated["labels"]["userSurveyRating"] is None  # not answered yet
    with session_scope(settings.database_url) as s:
        user = s.exec(select(Worker).where(Worker.external_id == USER_1)).one()
        assert surveys.answer_survey(s, dialog, user, {"cooperativity": "4"})
    exported = command(settings, "export", "--format", "frames", "--out", str(tmp_path / "F"))
    assert exported.returncode == 0, exported.stderr
    (dialogue,) = json.loads((tmp_path / "F" / "frames.json").read_text())
    assert dialogue["labels"]["userSurveyRating"] == 4 and dialogue["user_survey"] == {"cooperativity": 4}
    booking = dialogue["booking"]
    assert booking["id"] == found["ids"][0] and booking["item"]["dst_city"] == "Lisbon"  # its Frames names

    def holds(condition, item):  # the goal's conditions, read off the export by hand
        value = item[condition["field"]]
        return {"is": lambda: str(value).casefold() == str(condition["value"]).casefold(),
                "at_least": lambda: value >= condition["value"], "at_most": lambda: value <= condition["value"]
                }[condition["op"]]()

    names = load_domain(SAMPLE).frames_names
    booked_item = {column: booking["item"][names.get(column, column)] for column in names}
    broken = [c for c in dialogue["goal"]["constraints"] if not holds(c, booked_item)]
    assert [(c["field"], c["op"]) for c in booking["broken"]] == [(names[c["field"]], c["op"]) for c in broken]
    assert booking["verdict"] == (MEETS_GOAL if not broken else MEETS_ALTERNATE if dialogue["goal"].get(
        "alternate") and all(holds(c, booked_item) for c in dialogue["goal"]["alternate"]["constraints"])
        else BREAKS_GOAL)


def test_a_user_cannot_book(settings, providers):
    launch_frames(settings, providers)
    with session_scope(settings.database_url) as s:
        held, user, _ = hold(s, first_conversation(settings), USER_1, "user")
        with pytest.raises(InvalidInput) as error:
            record_action(s, held, user, "book", {"id": 1})
        assert error.value.field == "action"
