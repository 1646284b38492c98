"""The dialog events a MEEP log would be written as: one per click, read back into the same log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from turkflow.errors import InvalidDocument
from turkflow.protocols.meep import clicks
from turkflow.protocols.meep.events import CLOSING, ROLE_ACTIONS, EventShape, from_events, to_events
from turkflow.protocols.meep.execute import execute

from tests.test_meep_clicks import kb, paper_dialog, templates  # noqa: F401  (fixtures)


@dataclass
class Row:
    """Stands for a stored ``DialogEvent``: ``from_events`` reads only agent, action and data."""

    id: int
    agent: str
    action: str
    data: Any


def test_each_click_is_one_event_and_each_call_is_answered_by_the_api(kb, templates):
    log = paper_dialog(kb, templates)
    events = to_events(log)
    assert [(e.agent, e.action) for e in events[:7]] == [
        ("Scenario", "start"), ("User", "utter"), ("Agent", "call_api"), ("API", "return_results"),
        ("Agent", "pick_template"), ("Agent", "pick_template"), ("Agent", "send")]
    call, answer = events[2].data, events[3].data
    assert call["API"] == "find_place" and call["Arguments"]["query"]["clicks"][0] == {
        "message": 1, "token": 5, "text": "Bluebird"}
    assert answer["Results"][0]["id"] == "v1" and answer["Results"][0]["fields"]["name"] == "Bluebird Coffee"
    assert events[4].data["Template"] == "t4" and events[4].data["Text"].startswith("Bluebird Coffee on")


def test_every_worker_action_belongs_to_a_role_and_turns_close_as_the_protocol_says(kb, templates):
    events = to_events(paper_dialog(kb, templates))
    worker_events = [e for e in events if e.agent in ("User", "Agent")]
    for event in worker_events:
        role = event.agent.lower()
        assert event.action in ROLE_ACTIONS[role]
    closers = [e.action for e in worker_events if e.action in CLOSING.values()]
    assert closers == ["utter", "send"] * 3  # user and agent take turns, each turn closed once


def test_stored_rows_read_back_into_the_same_log_which_executes_without_a_difference(kb, templates):
    log = paper_dialog(kb, templates)
    events = to_events(log)
    rows = [Row(n, e.agent, e.action, dict(e.data)) for n, e in enumerate(events, 1)]
    again = from_events(rows)
    assert again == log and execute(again, templates, kb) == []


@pytest.mark.parametrize("change, words", [
    (lambda ev: ev.pop(3), "has no return_results"),
    (lambda ev: ev.pop(2), "no call_api to 'find_place'"),
    (lambda ev: ev.pop(0), "starts with a Scenario start"),
    (lambda ev: ev.append(EventShape("Wizard", "query", {})), "not a MEEP event"),
    (lambda ev: ev.__setitem__(1, EventShape("User", "utter", {"Text": "hi"})), "event 1 (User utter)"),
    (lambda ev: ev.append(EventShape("Agent", "call_api", {"API": "find_place"})), "last call_api"),
])
def test_events_out_of_shape_are_refused_naming_the_event(kb, templates, change, words):
    events = to_events(paper_dialog(kb, templates))
    change(events)
    with pytest.raises(InvalidDocument) as caught:
        from_events(events)
    assert words in caught.value.message


def test_a_log_begun_from_a_scenarios_own_start_location(kb):
    log = clicks.start(kb, {"address": "1 World Way", "latitude": 33.9451, "longitude": -118.4023})
    assert from_events(to_events(log)) == log
    assert clicks.panel(log)["source"].fields["address"] == "1 World Way"
