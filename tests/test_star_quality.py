"""Quality for STAR batches (issue 24, item 4): quizzes that test understanding, and what judges a STAR writer
where no peer rates a turn (the wizard's agreement with the knowledge base and the flow chart, the content
of a written turn, the other role's end-of-dialog answers), fed to the monitor through the pipeline."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from tests.test_cli import ok, turkflow  # noqa: F401 - the fixture
from tests.test_star_dialog import USER_2, WIZARD_1, first_conversation, launch_star, library_dialog, turn
from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.models import DialogEvent, Event, JudgedSignal, Turn, Worker, utcnow
from turkflow.protocols import surveys
from turkflow.protocols.star import judged, stages
from turkflow.quality.checks import shared_run, words


def test_no_quiz_answer_restates_what_is_shown_above_it_and_hints_name_a_part_never_the_answer():
    for stage in stages.STAGES.values():
        parts = {paragraph.split(".")[0] for paragraph in stage.tutorial}
        above = words(" ".join(stage.tutorial))
        for question in stage.questions:
            right = words(dict(question.options)[question.answer])
            assert not shared_run(right, above, 4), (stage.title, question.name)
            assert not shared_run(words(question.text), words(" ".join(stage.tutorial)), 6), question.name
            assert not shared_run(right, words(question.hint), 3), (stage.title, question.name)
            assert any(f"“{part}”" in question.hint for part in parts), (stage.title, question.name)
            above = words(question.text)  # the next question sits under this one


def test_a_reply_that_contradicts_the_knowledge_base_is_an_error_and_one_claiming_nothing_is_not_judged():
    assert judged.agreement(+1, "Dr. Han is available at 10 am.", "failed", False, False)[0] is False
    assert judged.agreement(+1, "I found one for you.", "empty", False, True)[0] is False
    assert judged.agreement(-1, "Unfortunately it is taken.", "succeeded", False, False)[0] is False
    assert judged.agreement(+1, "Your table is booked!", "succeeded", False, False) == (
        False, "a booking claimed without a query that booked")  # a check only checks
    assert judged.agreement(+1, "Your table is booked!", "succeeded", True, False)[0] is True
    assert judged.agreement(+1, "It is available. Shall I book it?", "succeeded", False, False)[0] is True
    assert judged.agreement(-1, "Sorry, there is none.", "found", False, True)[0] is False
    assert judged.agreement(0, "What day would you like?", None, False, False) is None


def test_a_greeting_may_open_a_dialog_but_near_empty_turns_later_count_and_picked_templates_are_not_judged():
    def content(index, text, flags, label="utter"):
        return judged.content_verdict(Turn(conversation_id=1, index=index, role="user", text=text, flags=flags,
                                           label=label))

    assert content(0, "Hello.", ["near_empty"]) == (True, {"said": "Hello.", "flags": "none"})
    assert content(2, "ok", ["near_empty"]) == (False, {"said": "ok", "flags": "near_empty"})
    assert content(4, "I'd like Friday.", ["not_typed"])[0] is True  # the monitor's own rule judges typing
    assert content(3, "Is there anything else?", ["repeated_response"], "pick_suggestion") is None


def test_the_survey_speaks_for_the_judged_role_and_an_unhappy_scenario_expects_a_change_of_mind():
    assert judged.survey_verdict("user", {"task_done": True, "calm": False}, happy=True) is False
    assert judged.survey_verdict("user", {"task_done": False, "calm": True}, happy=False) is True
    assert judged.survey_verdict("user", {"task_done": False, "calm": True}, happy=True) is False
    assert judged.survey_verdict("wizard", {"aggressive": True, "changed_mind": True}, happy=False) is False
    assert judged.survey_verdict("wizard", {"aggressive": False, "changed_mind": False}, happy=False) is False
    assert judged.survey_verdict("wizard", {"aggressive": False, "changed_mind": False}, happy=True) is True


def test_star_turns_and_answers_are_judged_by_the_pipeline_with_their_evidence(settings, providers):
    launch_star(settings, providers)
    conversation_id = first_conversation(settings)
    turn(settings, providers, conversation_id, "U1", "user", [("utter", {"text": "Hi, I'd like a novel."})],
         "utter", "Hi, I'd like a novel.")
    turn(settings, providers, conversation_id, "W1", "wizard",
         [("pick_suggestion", {"label": "library_ask_language",
                               "options": ["goodbye", "library_inform_book", "hello", "library_ask_language"],
                               "text": "In which language would you like to read it?"})],
         "pick_suggestion", "In which language would you like to read it?")
    turn(settings, providers, conversation_id, "U1", "user", [("utter", {"text": "Spanish"})], "utter", "Spanish")
    turn(settings, providers, conversation_id, "W1", "wizard",
         [("query", {"api": "library_search", "constraints": {"Genre": '"Novel"', "Language": '"Spanish"'}}),
          ("utter", {"text": "Sorry, no such book is available."})], "utter", "Sorry, no such book is available.")
    turn(settings, providers, conversation_id, "U1", "user", [("utter", {"text": "xq zzkv"}), ("complete", {})],
         "complete", "xq zzkv")
    with session_scope(settings.database_url) as s:
        turn_ids = list(s.exec(select(Turn.id).where(Turn.conversation_id == conversation_id).order_by(Turn.index)))
        found = s.exec(select(DialogEvent).where(DialogEvent.action == "return_item")).one().data["Item"]
    for turn_id in turn_ids:
        pipeline.review_submission(settings, providers, turn_id)
    with session_scope(settings.database_url) as s:
        signals = {(s.get(Worker, j.worker_id).external_id, s.get(Turn, j.turn_id).index, j.kind): (j.ok, j.evidence)
                   for j in s.exec(select(JudgedSignal))}
        assert signals[("U1", 0, judged.CONTENT)][0] is True
        assert signals[("U1", 2, judged.CONTENT)][0] is True  # "Spanish" answers the language asked: not empty
        assert signals[("U1", 4, judged.CONTENT)] == (False, {"said": "xq zzkv", "flags": "not_english"})
        assert signals[("W1", 1, judged.CHART)] == (False, {"picked": "library_ask_language", "rank": "4 of 4",
                                                            "ranked_first": "goodbye"})
        assert found is not None  # the sample library holds a Spanish novel, so "no such book" is an error
        assert signals[("W1", 3, judged.KB_AGREEMENT)] == (False, {
            "said": "Sorry, no such book is available.", "reply": "own words",
            "knowledge_base": "an item", "query": signals[("W1", 3, judged.KB_AGREEMENT)][1]["query"],
            "why": "a refusal claimed after the knowledge base found an item"})
        assert ("W1", 1, judged.CONTENT) not in signals  # a picked template is not the wizard's writing
    assert pipeline.review_survey(settings, providers, conversation_id, 999_999) == []  # answered nothing


@pytest.mark.both_backends  # reconciliation: an anti-join on the event log
def test_answers_whose_judging_message_was_lost_are_judged_once_by_the_reconciler(settings, providers):
    launch_star(settings, providers)
    conversation_id = first_conversation(settings)
    library_dialog(settings, providers, conversation_id)  # WIZARD_1 wrote two of the three wizard turns
    with session_scope(settings.database_url) as s:
        user = s.exec(select(Worker).where(Worker.external_id == USER_2)).one()
        assert surveys.answer_survey(s, conversation_id, user, {"task_done": "no", "calm": "yes"})
        user_id = user.id  # ... and the message that asks for the judgement never arrives

    waiting = settings.model_copy(update={"review_after_seconds": 3600})
    assert pipeline.reconcile(waiting, providers).surveys_judged == []  # just stored: the message may yet come
    later = utcnow() + timedelta(seconds=3601)
    assert pipeline.reconcile(waiting, providers, later).surveys_judged == [(conversation_id, user_id)]
    with session_scope(settings.database_url) as s:
        verdicts = [(s.get(Worker, j.worker_id).external_id, j.ok, j.evidence["answered_by"])
                    for j in s.exec(select(JudgedSignal).where(JudgedSignal.kind == judged.SURVEY))]
    assert verdicts == [(WIZARD_1, False, user_id)]  # the task was not done in a happy scenario

    assert pipeline.reconcile(waiting, providers, later).surveys_judged == []
    assert pipeline.review_survey(settings, providers, conversation_id, user_id) == []  # the message, late
    with session_scope(settings.database_url) as s:
        marks = s.exec(select(Event.worker_id).where(Event.kind == surveys.JUDGED)).all()
    assert marks == [user_id]


def test_the_star_dry_run_budgets_no_rating_bonus_and_says_what_judges_its_workers(turkflow):
    out = ok(turkflow("batch", "launch", "--protocol", "star", "--all", "-n", "2", "--max-turns", "10",
                      "--dry-run"))
    assert "at most $4.00: $4.00 rewards + $0.00 bonuses + $0.00 fees" in out
    assert "no bonuses: STAR turns are not rated" in out and "top 10%" in out
    assert "% of turns earn" not in out and "quality policy" not in out
    assert "quality: no ratings; a worker 3 of whose last 6 signals of one kind are not ok goes to review" in out
