"""The shapes MEEP's log takes as dialog events (``DialogEvent``'s agent, action and data).

Nothing is written here: ``turkflow.protocols.meep.dialog.record_action`` writes one event per click the way STAR's
does, and rebuilds the log from the rows to check the next click and to replay it:
``from_events(to_events(log)) == log``. The event names follow STAR's habits: the agent's call is one
event and the API's answer another (STAR's ``query`` and ``return_item``), data keys are CamelCase.

- ``Scenario start``: the panel's given results (the start location) and the tokenizer; written with
  the dialog's first click (the conversation opens with the user's turn).
- ``User utter``: one per user turn (``Text``, ``Number``), perhaps followed by ``User complete`` (no
  data): the user ends the dialog with that message. It changes no utterance, so a log has no record of it.
- ``User judge`` (``Approved``, ``Latitude``, ``Longitude``, ``Text``), then ``User complete``: once the agent
  has called ``start_driving``, the user's last turn approves or disapproves the destination shown on a map
  (MEEP's success label). Like ``complete``, it is an event, not a log record.
- ``Agent call_api`` (``API``, ``Arguments``: each a filler with its clicks and value), followed at once by
  ``API return_results`` (``API``, ``Results`` with their panel ids).
- ``Agent pick_template`` (``Template``, ``TemplateText``, ``Fillers``, ``Text``).
- ``Agent send`` (``Text``): closes a paid agent turn, as ``utter`` closes a user's.
- ``Agent add_template`` (``Template``, ``TemplateText``, ``Words``: each clicked word with where it came
  from, or a blank): MEEP's "+". It is a log record, so executing the log composes the template again and
  checks every later pick of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from turkflow.errors import InvalidDocument
from turkflow.protocols.meep.log import (
    ApiCall,
    Record,
    Result,
    Send,
    SessionLog,
    TemplateAdded,
    TemplatePick,
    UserMessage,
    filler_json,
    piece_json,
    record_from_json,
    result_json,
)

AGENTS = {"user": "User", "agent": "Agent"}
ROLE_ACTIONS = {"user": ("utter", "judge", "complete"), "agent": ("call_api", "pick_template", "add_template", "send")}
CLOSING = {"user": "utter", "agent": "send"}  # the action that ends a paid turn
SYSTEM_ACTIONS = {("Scenario", "start"): "written when the conversation opens",
                  ("API", "return_results"): "written with the call_api it answers"}


@dataclass(frozen=True)
class EventShape:
    """What one ``DialogEvent`` row would hold, apart from its conversation, turn and worker."""

    agent: str
    action: str
    data: Mapping[str, Any]


def start_event(log: SessionLog) -> EventShape:
    return EventShape("Scenario", "start", {"Results": [result_json(r) for r in log.given],
                                            "Tokenizer": log.tokenizer})


def judged(approved: bool, point: Mapping[str, Any]) -> EventShape:
    """The user's verdict on the destination shown on the map."""
    return EventShape("User", "judge", {"Approved": approved, "Latitude": point["latitude"],
                                        "Longitude": point["longitude"],
                                        "Text": f"{'Approved' if approved else 'Disapproved'} the destination"})


def record_events(record: Record) -> list[EventShape]:
    """The events one log record is written as."""
    if isinstance(record, UserMessage):
        return [EventShape("User", "utter", {"Text": record.text, "Number": record.number})]
    if isinstance(record, ApiCall):
        return [EventShape("Agent", "call_api", {"API": record.api, "Arguments": {
                    name: filler_json(f) for name, f in record.arguments.items()}}),
                EventShape("API", "return_results", {"API": record.api,
                                                     "Results": [result_json(r) for r in record.results]})]
    if isinstance(record, TemplatePick):
        return [EventShape("Agent", "pick_template", {
            "Template": record.template, "TemplateText": record.template_text,
            "Fillers": [filler_json(f) for f in record.fillers], "Text": record.text})]
    if isinstance(record, TemplateAdded):
        return [EventShape("Agent", "add_template", {"Template": record.template, "TemplateText": record.text,
                                                     "Words": [piece_json(p) for p in record.pieces]})]
    assert isinstance(record, Send)
    return [EventShape("Agent", "send", {"Text": record.text})]


def to_events(log: SessionLog) -> list[EventShape]:
    return [start_event(log)] + [event for record in log.records for event in record_events(record)]


def from_events(events: Iterable[Any]) -> SessionLog:
    """The log the events hold; ``events`` are ``EventShape``s or rows with ``agent``, ``action`` and
    ``data`` (a ``DialogEvent``). A ``call_api`` with no ``return_results`` after it is refused."""
    given: tuple[Result, ...] = ()
    tokenizer = None
    records: list[Record] = []
    waiting: dict[str, Any] | None = None  # a call_api's data, until its results come
    for n, event in enumerate(events):
        where = f"event {n} ({event.agent} {event.action})"
        data = dict(event.data)
        if waiting is not None and (event.agent, event.action) != ("API", "return_results"):
            raise InvalidDocument(f"{where}: the call_api before it has no return_results")
        if (event.agent, event.action) == ("Scenario", "start"):
            start = SessionLog.from_json({"given": data.get("Results"), "records": [],
                                          "tokenizer": data.get("Tokenizer", "")})
            given, tokenizer = start.given, start.tokenizer
        elif (event.agent, event.action) == ("User", "utter"):
            records.append(record_from_json({"kind": "user_message", "number": data.get("Number"),
                                             "text": data.get("Text")}, where))
        elif (event.agent, event.action) == ("Agent", "call_api"):
            waiting = data
        elif (event.agent, event.action) == ("API", "return_results"):
            if waiting is None or waiting.get("API") != data.get("API"):
                raise InvalidDocument(f"{where}: no call_api to {data.get('API')!r} before it")
            records.append(record_from_json({"kind": "api_call", "api": waiting["API"],
                                             "arguments": waiting.get("Arguments"),
                                             "results": data.get("Results")}, where))
            waiting = None
        elif (event.agent, event.action) == ("Agent", "pick_template"):
            records.append(record_from_json({"kind": "template", "template": data.get("Template"),
                                             "template_text": data.get("TemplateText"),
                                             "fillers": data.get("Fillers"), "text": data.get("Text")},
                                            where))
        elif (event.agent, event.action) == ("Agent", "send"):
            records.append(record_from_json({"kind": "send", "text": data.get("Text")}, where))
        elif (event.agent, event.action) == ("Agent", "add_template"):
            records.append(record_from_json({"kind": "template_added", "template": data.get("Template"),
                                             "text": data.get("TemplateText"), "pieces": data.get("Words")},
                                            where))
        elif (event.agent, event.action) not in (("User", "judge"), ("User", "complete")):
            raise InvalidDocument(f"{where}: not a MEEP event")
    if waiting is not None:
        raise InvalidDocument("the last call_api has no return_results")
    if tokenizer is None:
        raise InvalidDocument("a MEEP log starts with a Scenario start event")
    return SessionLog(given, records, tokenizer)
