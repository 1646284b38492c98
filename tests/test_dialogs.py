"""The registry of the event-logged protocols (STAR, Frames, MEEP: ``turkflow.protocols.registry``) and what their dialog
modules share through it: a submit's fields, a message's text, a replay's differences."""

from __future__ import annotations

import pytest

from tests.test_imports import imports_of
from turkflow.protocols import registry
from turkflow.protocols.registry import ReplayDifference, message_text, one
from turkflow.errors import InvalidInput
from turkflow.dataset.sgd import OWN_CONVERTERS

MODULES = {name: protocol.module for name, protocol in registry.LOGGED.items()}


@pytest.mark.parametrize("name", sorted(registry.LOGGED))
def test_every_logged_protocols_dialog_module_provides_what_the_registry_promises(name):
    module = registry.parts(name)
    launched_by = "make_scenarios" if registry.LOGGED[name].dialog else "launch"  # annotation: over a batch
    promised = ("read_tasks", launched_by, "submit_turn", "replay") + (
        ("sgd_dialogues", "sgd_services") if name in OWN_CONVERTERS else ())
    for function in promised:
        assert callable(getattr(module, function)), f"{module.__name__}.{function}"


@pytest.mark.parametrize("name", sorted(registry.LOGGED))
def test_a_dialog_module_takes_shared_code_from_the_registry_never_from_another_protocols_module(name):
    path = MODULES[name].replace(".", "/") + ".py"
    assert imports_of(path, *(module for other, module in MODULES.items() if other != name)) == []


def test_a_fields_one_value_is_its_element_and_two_values_are_refused_naming_the_field():
    body = {"text": ["Hello"], "complete": [], "options": ["hello", "bye"], "action": ["utter", "utter"]}
    assert one(body, "text") == "Hello"
    assert one(body, "complete") is None
    assert one(body, "options") == ["hello", "bye"]  # a picked reply's options are a list by nature
    with pytest.raises(InvalidInput) as refused:
        one(body, "action")
    assert refused.value.field == "action" and body == {}


def test_a_message_is_clean_text_within_the_limit_and_refused_naming_its_field():
    assert message_text({"text": "  Hi there\r\n"}, "text", 20) == "Hi there"
    assert message_text({}, "text", 20, required=False) == ""
    for fields, reason in (({"text": "x" * 21}, "write at most 20 characters"), ({}, "expected text"),
                           ({"text": " "}, "this text is required"), ({"text": 5}, "expected text")):
        with pytest.raises(InvalidInput) as refused:
            message_text(dict(fields), "text", 20)
        assert (refused.value.field, refused.value.reason) == ("text", reason)


def test_a_replay_difference_names_its_conversation_and_its_turn_when_known():
    assert ReplayDifference(4, "query 9 to api []: the wizard saw 1, now 2").describe() == (
        "conversation 4, query 9 to api []: the wizard saw 1, now 2")
    assert ReplayDifference(4, "click 2 differs", turn_index=2).describe() == (
        "conversation 4, turn 3, click 2 differs")
