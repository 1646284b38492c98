"""MEEP's "+": an agent composes a new template by clicking words (of the user's messages or of the
templates) and blanks; the log keeps the clicks, so executing it composes the template again and checks
every later pick of it; the dialog's destination is the agent's start_driving."""

from __future__ import annotations

import pytest

from turkflow.errors import InvalidInput
from turkflow.protocols.meep import clicks
from turkflow.protocols.meep.events import from_events, to_events
from turkflow.protocols.meep.execute import execute
from turkflow.protocols.meep.log import Blank, SessionLog, TemplateWord, WordClick

from tests.test_meep_clicks import FIRST, kb, paper_dialog, templates  # noqa: F401  (fixtures)

# "There is a {} in {}." is t2: its words are tokens 0-2, 5 and 8 ("."); "Shall we go?" is t5
NEW = [{"message": 1, "token": 5}, {"message": 1, "token": 6}, {"template": "t2", "token": 1},
       {"blank": True}, {"template": "t5", "token": 3}]


def with_new_template(kb, templates):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, FIRST))
    log.add(clicks.call_api(log, kb, "find_place", {"query": {"tokens": [5, 6, 8, 9]},
                                                    "latitude": {"result": "source", "field": "latitude"},
                                                    "longitude": {"result": "source", "field": "longitude"}}))
    added = log.add(clicks.add_template(log, templates, NEW))
    shared = {**templates, added.template: added.text}
    log.add(clicks.pick_template(log, shared, added.template, [{"result": "v1", "field": "neighborhood"}]))
    log.add(clicks.send(log))
    return log, shared


def test_a_new_template_is_composed_from_clicked_words_and_blanks(kb, templates):
    log, shared = with_new_template(kb, templates)
    added = log.records[2]
    assert (added.template, added.text) == ("t13", "Bluebird Coffee is {}?")
    assert added.pieces == (WordClick(1, 5, "Bluebird"), WordClick(1, 6, "Coffee"), TemplateWord("t2", 1, "is"),
                            Blank(), TemplateWord("t5", 3, "?"))
    assert log.records[-1].text == "Bluebird Coffee is Mar Vista?"


def test_the_same_text_again_keeps_its_id(kb, templates):
    log, shared = with_new_template(kb, templates)
    assert clicks.add_template(log, shared, NEW).template == "t13"


def test_replay_composes_the_template_again_and_checks_its_later_uses(kb, templates):
    log, shared = with_new_template(kb, templates)
    again = from_events(to_events(log))
    assert again == log and execute(again, templates, kb) == []  # the file's templates: "+" comes from the log
    edited = SessionLog(log.given, [type(log.records[0])(1, FIRST.replace("Bluebird", "Redbird"))]
                        + log.records[1:], log.tokenizer)
    whats = {(d.kind, d.what) for d in execute(edited, templates, kb)}
    assert ("template_added", "template_text") in whats and ("template", "utterance") in whats


@pytest.mark.parametrize("words, field", [
    ([], "words"), ([{"blank": True}], "words"), ([{"message": 9, "token": 0}], "words[0]"),
    ([{"template": "t99", "token": 0}], "words[0]"), ([{"template": "t2", "token": 3}], "words[0]"),
    (["Bluebird"], "words[0]"), ([{"message": 1, "token": 0, "text": "I"}], "words[0]"),
])
def test_the_composer_takes_only_clicks(kb, templates, words, field):
    log = clicks.start(kb)
    log.add(clicks.user_says(log, FIRST))
    with pytest.raises(InvalidInput) as refused:
        clicks.add_template(log, templates, words)
    assert refused.value.field == field


def test_the_destination_is_the_agents_last_start_driving(kb, templates):
    log = paper_dialog(kb, templates)
    assert clicks.destination(log, kb) == {"latitude": 34.0021, "longitude": -118.4301}
    assert clicks.destination(clicks.start(kb), kb) is None
