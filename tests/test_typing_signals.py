"""Machine-written turns: what the turn page sees of the typing, the not_typed flag judged from it, and where
a reviewer and a dataset user meet it."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from jsonschema import Draft202012Validator
from sqlmodel import select

from tests.conftest import wait_until
from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd, low_rated_teacher
from tests.test_dashboard import sign_in
from tests.test_export import conversation_ids, launch as launch_domain, say
from tests.test_pipeline import launch
from tests.test_worker_pages import JSON, joined, submitted_turns, take_first
from turkflow.db import session_scope
from turkflow.dataset.export import export_dataset
from turkflow.models import Conversation, Turn
from turkflow.quality import review
from turkflow.quality.checks import NOT_TYPED, CheckPolicy, typing_flags
from turkflow.requesters import create_requester
from turkflow.simulator.crowd import Behaviour, build_crowd, writing_report
from turkflow.writing import writing_signals

POLICY = CheckPolicy()
TEXT = "Whisk the dry things together first, then add the buttermilk."  # 61 characters


def report(page_ms=60_000, first_key_ms=20_000, keys=70, pastes=0, drops=0, blurs=0):
    return {"page_ms": page_ms, "first_key_ms": first_key_ms, "keys": keys, "pastes": pastes, "drops": drops,
            "blurs": blurs}


TYPED = report()
PASTED = report(page_ms=9_000, first_key_ms=None, keys=0, pastes=1)


# ---- the rule ---------------------------------------------------------------------------------------


def test_a_typed_response_is_not_flagged():
    assert typing_flags(POLICY, TEXT, TYPED) == {}
    assert typing_flags(POLICY, TEXT, report(keys=31)) == {}  # half a key per character: predictive typing
    assert typing_flags(POLICY, TEXT, report(page_ms=25_000)) == {}  # 61 characters in 5 s: a fast typist


def test_far_fewer_keystrokes_than_characters_is_flagged_not_typed():
    found = typing_flags(POLICY, TEXT, report(keys=12, blurs=2))
    assert found == {NOT_TYPED: {"why": ["few_keystrokes"], "chars": 61, "keys": 12, "typing_seconds": 40.0,
                                 "pastes": 0, "drops": 0, "blurs": 2}}
    assert typing_flags(POLICY, TEXT, PASTED)[NOT_TYPED]["why"] == ["few_keystrokes", "too_fast"]


def test_text_faster_than_a_typist_can_type_is_flagged_not_typed():
    # 70 keys, but 61 characters 2 s after the first keystroke: 30 characters a second.
    found = typing_flags(POLICY, TEXT, report(page_ms=22_000, first_key_ms=20_000))
    assert found[NOT_TYPED]["why"] == ["too_fast"] and found[NOT_TYPED]["typing_seconds"] == 2.0


def test_the_thresholds_are_settings(settings):
    strict = CheckPolicy.of(settings.model_copy(update={"check_keys_per_char": 1.2,
                                                         "check_max_chars_per_second": 5}))
    assert typing_flags(strict, TEXT, TYPED)[NOT_TYPED]["why"] == ["few_keystrokes"]
    assert typing_flags(strict, TEXT, report(keys=80, page_ms=30_000))[NOT_TYPED]["why"] == ["too_fast"]
    assert typing_flags(CheckPolicy.of(settings.model_copy(update={"check_typed_min_chars": 100})), TEXT,
                        PASTED) == {}


def test_unknown_reports_short_answers_and_paste_attempts_alone_are_not_flagged():
    assert typing_flags(POLICY, TEXT, {"unknown": "absent"}) == {}
    assert typing_flags(POLICY, TEXT, {"unknown": "malformed"}) == {}
    assert typing_flags(POLICY, TEXT, {}) == {}  # turns written before pages reported anything
    assert typing_flags(POLICY, "Thanks, that helps!", report(keys=0, first_key_ms=None)) == {}  # 19 chars
    assert typing_flags(POLICY, TEXT, report(pastes=3, drops=1)) == {}  # refused pastes, then typed


def test_the_simulators_pasters_send_reports_the_flag_catches_and_its_typists_mostly_do_not():
    crowd = build_crowd(50, 50, {Behaviour.paster: 0.2}, seed=3)
    flagged = Counter()
    for worker in crowd:
        for n in range(10):
            sent = writing_report(worker, TEXT, random.Random(f"{worker.name}:{n}"), seed=3)
            assert writing_signals({"signals": json.dumps(sent)}) == sent
            flagged[worker.behaviour, bool(typing_flags(POLICY, TEXT, sent))] += 1
    assert flagged[Behaviour.paster, True] == 200 and flagged[Behaviour.paster, False] == 0
    assert 0 < flagged[Behaviour.honest, True] < 0.05 * 800  # phone keyboards with word completion


# ---- the report as the server receives it ----------------------------------------------------------


def test_a_report_is_checked_and_bounded_and_anything_else_is_unknown():
    sent = json.dumps(report(first_key_ms=None, keys=0))
    assert writing_signals({"signals": [sent]}) == report(first_key_ms=None, keys=0)
    assert writing_signals({"signals": {**TYPED, "extra": "ignored", "keys": 70.6}}) == TYPED
    assert writing_signals({}) == {"unknown": "absent"}
    assert writing_signals({"signals": [""]}) == {"unknown": "absent"}
    malformed = ["{", "[1, 2]", "null-ish", "x" * 10_000, json.dumps(report(keys=-1)),
                 json.dumps(report(keys=10 ** 9)), json.dumps(report(keys=True)),
                 json.dumps(report(keys="70")),
                 '{"page_ms": NaN}', json.dumps(report(first_key_ms=90_000)), "[" * 400 + "]" * 400,
                 ["{}", "{}"], 17]
    for value in malformed:
        assert writing_signals({"signals": value}) == {"unknown": "malformed"}, value


def test_malformed_signals_never_give_a_server_error_nor_block_the_submission(app, settings, providers,
                                                                             celery_worker):
    sent = [["not json"], ["1e999"], ['{"keys": -5}'], ["x" * 100_000], ["{}", "{}"], []]
    bodies = [{"signals": [1, 2]}, {"signals": "ü\x00"}, {"signals": {"keys": {"nested": True}}}]
    launch(settings, providers, conversations=len(sent) + len(bodies) + 1)
    student = joined(app, settings, "student")
    answers = {"intent": "request_items", "response": "Hi! What do I need for this?"}
    for value in sent:
        form = {**answers, "signals": value} if value else answers
        response = student.post(take_first(student), data=form)
        assert response.status_code == 303, response.get_data(as_text=True)[:300]
    for body in bodies:
        response = student.post(take_first(student), json={**answers, **body}, headers=JSON)
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
    response = student.post(take_first(student), json={**answers, "signals": TYPED}, headers=JSON)
    assert response.status_code == 200

    stored = [t.signals for t in sorted(submitted_turns(settings), key=lambda t: t.submitted_at)]  # as sent
    malformed, absent = {"unknown": "malformed"}, {"unknown": "absent"}
    assert stored == [malformed] * 5 + [absent] + [malformed] * 3 + [TYPED]


def test_a_refused_page_sends_the_report_back_so_the_refilled_text_keeps_its_keystrokes(app, settings,
                                                                                         providers):
    launch(settings, providers)
    student = joined(app, settings, "student")
    page = student.post(take_first(student), data={"response": TEXT, "signals": json.dumps(TYPED)})
    assert page.status_code == 400  # no intent chosen
    html = page.get_data(as_text=True)
    sent_back = json.dumps(TYPED).replace('"', "&#34;")
    assert f'name="signals" data-writing-signals value="{sent_back}"' in html


# ---- where a reviewer and a dataset user see it ----------------------------------------------------


def test_a_blocked_workers_pasted_turns_show_not_typed_in_the_review_queue(client, settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=5)
    teacher = crowd.worker("teacher", "T-paster", name="Pat")
    students = [crowd.worker("student", f"S{i}") for i in range(3)]
    low_rated_teacher(crowd, teacher, students, turns=5, signals=PASTED)  # five useless turns block
    with session_scope(settings.database_url) as s:
        flagged = s.exec(select(Turn).where(Turn.worker_id == teacher.id)).all()
        assert all(NOT_TYPED in t.flags and t.signals == PASTED for t in flagged) and len(flagged) == 5
        [entry] = review.daily_review(s, review.ReviewPolicy.of(settings)).entries
        assert entry.flags[NOT_TYPED] == 5
        create_requester(s, "ada", "correct horse")
    sign_in(client)
    page = client.get("/admin/review").get_data(as_text=True)
    assert "not typed × 5" in page
    assert "no key pressed" in page and f"0 keys for {len(TEACHER_LINES[0])} characters" in page


def test_export_includes_each_turns_signals_and_flag(settings, providers, tmp_path):
    launch_domain(settings, providers, "cooking")
    [conversation] = conversation_ids(settings)
    say(settings, providers, conversation, "S-1", {"intent": "request_items", "response": STUDENT_LINES[0],
                                                   "signals": json.dumps(TYPED)})
    rated = {"relevant": "yes", "useful": "yes"}
    say(settings, providers, conversation, "T-1", {**rated, "action": "return_step", "response": TEXT,
                                                   "signals": PASTED})
    say(settings, providers, conversation, "S-1", {**rated, "intent": "question_step", "real_life": "I mix.",
                                                   "response": "How long should I whisk?"})
    with session_scope(settings.database_url) as s:
        export_dataset(s, tmp_path / "out", hash_key=settings.worker_hash_key)
    [doc] = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    schema = json.loads((tmp_path / "out" / "schema.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(doc)) == []
    turns = doc["turns"]
    assert [t["signals"] for t in turns] == [TYPED, PASTED, {"unknown": "absent"}]
    assert [NOT_TYPED in t["flags"] for t in turns] == [False, True, False]


# ---- in a real browser ------------------------------------------------------------------------------


@pytest.mark.browser
def test_typing_is_recorded_and_text_inserted_without_keystrokes_is_flagged_on_the_conversation_page(
        live_server, browser_context, chromium, settings, providers, celery_worker):
    from tests.test_browser_conversation import join, submit, take_next_turn

    launch(settings, providers, max_turns=6)
    student = join(browser_context, live_server, settings, "student", name="Sam")
    take_next_turn(student, live_server)
    student.check("input[name=intent][value=request_items]")
    typed = "Hi! What do I need for the pancakes?"
    student.click("textarea[name=response]")
    student.keyboard.type(typed, delay=120)  # about 8 characters a second
    submit(student)

    teacher_context = chromium.new_context()
    try:
        teacher = join(teacher_context, live_server, settings, "teacher", name="Tia")
        take_next_turn(teacher, live_server)
        teacher.check("input[name=relevant][value=yes]")
        teacher.check("input[name=useful][value=yes]")
        teacher.check("input[name=action][value=return_items]")
        teacher.focus("textarea[name=response]")
        teacher.keyboard.press("Control+V")  # refused by the page, but counted
        teacher.evaluate("text => { document.querySelector('textarea[name=response]').value = text; }",
                         TEXT)
        submit(teacher)
    finally:
        teacher_context.close()

    def reviewed():
        turns = submitted_turns(settings)
        return len(turns) == 2 and all(t.reviewed_at for t in turns) and turns

    first, second = wait_until(reviewed, interval=0.1)
    mine = first.signals
    assert (mine["keys"], mine["pastes"], mine["drops"]) == (len(typed), 0, 0)
    assert 0 < mine["first_key_ms"] and mine["page_ms"] - mine["first_key_ms"] >= 120 * (len(typed) - 1)
    assert NOT_TYPED not in first.flags
    theirs = second.signals
    assert (theirs["keys"], theirs["first_key_ms"], theirs["pastes"]) == (0, None, 1)
    assert NOT_TYPED in second.flags

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
        conversation_id = s.exec(select(Conversation.id)).one()
    admin = browser_context.new_page()
    admin.goto(f"{live_server.url}/admin/login")
    admin.fill("input[name=username]", "ada")
    admin.fill("input[name=password]", "correct horse")
    admin.click("button[type=submit]")
    admin.wait_for_url(f"{live_server.url}/admin/**")
    admin.goto(f"{live_server.url}/admin/conversations/{conversation_id}")
    student_turn, teacher_turn = admin.locator("#turn-0"), admin.locator("#turn-1")
    assert teacher_turn.locator(".flag", has_text="not typed").is_visible()
    assert f"0 keys for {len(TEXT)} characters" in teacher_turn.inner_text()
    assert "1 paste," in teacher_turn.inner_text()
    assert student_turn.locator(".flag", has_text="not typed").count() == 0
    assert f"{len(typed)} keys for {len(typed)} characters" in student_turn.inner_text()
