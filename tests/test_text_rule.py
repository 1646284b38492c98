"""The one rule on text a person writes: text holds a letter or a digit of some script (Unicode L* or N*) once
format characters, combining marks and the blank fillers are set aside. Invisible-only text is refused at the
turn page, before the turn is paid or the next one opens, on every protocol's pages, and the content check's
near-empty flag counts words by the same rule, so the two never disagree.

The property tests here draw many strings and need no database (their strategies, and the same
properties over HTTP, are in test_hostile_input); the page tests run on both databases.
"""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings

from tests.test_frames_dialog import domain_copy, launch_frames
from tests.test_hostile_input import INVISIBLE_TEXT, WITH_A_WORD, stored, teacher_turn  # noqa: F401 (a fixture)
from tests.test_meep_dialog import launch_meep
from tests.test_star_dialog import launch_star
from tests.test_star_pages import act, send, star_worker, take
from tests.test_star_pages import stored as logged_stored
from tests.test_worker_pages import JSON, TEACHER_REPLY, submitted_turns
from turkflow.errors import InvalidAnswer, InvalidInput
from turkflow.protocols.questions import (
    FILLERS, STAR, WIZARD_OF_TASKS, TurnContext, clean_text, has_words, validate_answers,
)
from turkflow.protocols.registry import message_text
from turkflow.quality.checks import NEAR_EMPTY, CheckPolicy, content_flags, words

MANY = hypothesis_settings(max_examples=300, deadline=None, derandomize=True, database=None)

# Each class twice or more: one character alone is no less refused, but two show it is not about length.
INVISIBLE_ONLY = {
    "combining marks": "\u202e\u0301\u0301\u202c",
    "emoji modifiers": "\U0001F3FB\U0001F3FF",
    "variation selectors": "\ufe0f\ufe0e\ufe0f",
    "variation selectors supplement": "\U000E0100\U000E01EF",
    "hangul filler": "\u3164\u3164",
    "braille blank": "\u2800\u2800",
    "hangul choseong and jungseong fillers": "\u115f\u1160",
    "halfwidth hangul filler": "\uffa0\uffa0",
    "tag characters": "\U000E0061\ufe0f\U000E0062\ufe0f\U000E007F",
    "all of them": "\u200b\u0301\U0001F3FB\ufe0f\U000E0100\u3164\u2800\u115f\u1160\uffa0\U000E0041\u00a0",
}
LEGITIMATE = ["Han", "639431", "OK", "5", "好", "你好，我需要面粉", "مرحبا، أحتاج الدقيق", "नमस्ते, मुझे आटा चाहिए",
              "👍🏽 thanks", "🙂 ok", "Ⅻ", "½", "②"]


# ---- the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_text_without_a_letter_or_digit_is_refused_naming_the_field(text):
    assert not has_words(text)
    with pytest.raises(InvalidInput, match="write some words") as refused:
        clean_text(text, "response")
    assert refused.value.field == "response"


@pytest.mark.parametrize("text", LEGITIMATE)
def test_short_answers_in_any_script_and_emoji_with_a_word_are_text(text):
    assert has_words(text)
    assert clean_text(text) == unicodedata.normalize("NFC", text)
    assert message_text({"text": text}, "text", 100) == text


def test_a_hangul_filler_inside_korean_text_leaves_the_text_alone():
    assert clean_text("안녕\u3164하세요") == "안녕\u3164하세요"


def test_a_word_character_is_a_letter_or_digit_and_not_a_filler_for_every_code_point():
    """The rule is a regular expression; this keeps it equal to its definition on this Python's Unicode."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) == "Cs":
            continue
        expected = unicodedata.category(char)[0] in "LN" and char not in FILLERS
        assert has_words(char) == expected, f"U+{code:04X}"


def test_the_fillers_that_are_letters_by_category_are_named():
    assert {unicodedata.category(c) for c in "\u3164\uffa0\u115f\u1160"} == {"Lo"}
    assert set("\u3164\uffa0\u115f\u1160\u2800") <= set(FILLERS)


# ---- every field that takes text ----------------------------------------------------------------------

TEACHER_CTX = TurnContext(index=1, role="teacher", shareable=("item-1",))
TEACHER_ANSWERS = {"relevant": "yes", "useful": "yes", "action": "return_step", "response": "Do step one."}
STUDENT_CTX = TurnContext(index=2, role="student")
STUDENT_ANSWERS = {"relevant": "yes", "useful": "yes", "real_life": "cut it", "intent": "stop", "response": "Bye"}


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_wizard_of_tasks_text_answers_must_hold_words(text):
    for ctx, answers, field in [(TEACHER_CTX, TEACHER_ANSWERS, "response"), (STUDENT_CTX, STUDENT_ANSWERS, "response"),
                                (STUDENT_CTX, STUDENT_ANSWERS, "real_life")]:
        with pytest.raises(InvalidAnswer, match="write some words") as refused:
            validate_answers(WIZARD_OF_TASKS, ctx, {**answers, field: text})
        assert refused.value.field == field


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_a_logged_message_must_hold_words_even_where_it_may_be_left_out(text):
    for required in (True, False):
        with pytest.raises(InvalidInput, match="write some words") as refused:
            message_text({"text": text}, "text", STAR.max_response_chars, required=required)
        assert refused.value.field == "text"
    assert message_text({}, "text", STAR.max_response_chars, required=False) == ""


# ---- the near-empty check agrees ----------------------------------------------------------------------


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_the_near_empty_check_counts_no_word_in_invisible_only_text(text):
    assert words(text) == []
    flags = content_flags(CheckPolicy(), text, "teacher", None, "", [])
    assert flags[NEAR_EMPTY] == {"words": 0}


def test_underscores_and_fillers_are_not_words_to_the_check():
    assert words("_ \u3164 \u3164") == []
    assert words("Add\u3164salt") == ["add", "salt"]


# ---- properties ---------------------------------------------------------------------------------------



@MANY
@given(text=INVISIBLE_TEXT)
def test_invisible_only_text_is_never_stored_as_text(text):
    try:
        cleaned = clean_text(text, "response")
    except InvalidInput as refused:
        assert refused.field == "response"
    else:
        assert cleaned == ""
    with pytest.raises(InvalidInput):
        message_text({"text": text}, "text", STAR.max_response_chars)
    with pytest.raises(InvalidAnswer) as refused:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_ANSWERS, "response": text})
    assert refused.value.field == "response"
    assert words(text) == []


@MANY
@given(text=WITH_A_WORD)
def test_text_with_a_letter_or_digit_anywhere_is_never_refused_as_empty(text):
    cleaned = clean_text(text, "response")
    assert has_words(cleaned)
    assert message_text({"text": text}, "text", STAR.max_response_chars) == cleaned
    assert words(text)


# ---- over HTTP, on every protocol's pages -------------------------------------------------------------


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_an_invisible_only_wizard_of_tasks_answer_is_a_400_naming_it_and_nothing_is_paid(teacher_turn, settings,
                                                                                           text):
    teacher, turn_url = teacher_turn
    before = stored(settings)
    for send_as in ("json", "data"):
        refused = teacher.post(turn_url, headers=JSON, **{send_as: dict(TEACHER_REPLY, response=text)})
        assert refused.status_code == 400 and refused.is_json, refused.get_data(as_text=True)
        assert refused.get_json()["field"] == "response"
        assert refused.get_json()["error"].startswith("response: write some words")
    page = teacher.post(turn_url, data=dict(TEACHER_REPLY, response=text))
    assert page.status_code == 400 and 'data-error-field="response"' in page.get_data(as_text=True)
    assert "write some words" in page.get_data(as_text=True)
    assert stored(settings) == before


@pytest.mark.parametrize("text", LEGITIMATE)
def test_a_short_wizard_of_tasks_answer_in_any_script_is_stored(teacher_turn, settings, text):
    teacher, turn_url = teacher_turn
    accepted = teacher.post(turn_url, json=dict(TEACHER_REPLY, response=text), headers=JSON)
    assert accepted.status_code == 200, accepted.get_data(as_text=True)
    assert submitted_turns(settings)[-1].text == text


@pytest.fixture
def star(app, settings, providers):
    """A STAR library dialog whose user opened it; a wizard holds the second turn."""
    launch_star(settings, providers)
    user, wizard = star_worker(app, settings, "user"), star_worker(app, settings, "wizard")
    send(user, take(user), settings, providers, action="utter", text="Hi, I'd like to borrow a novel.")
    return wizard, take(wizard)


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_an_invisible_only_star_message_or_action_text_is_a_400_naming_it(star, settings, text):
    wizard, page = star
    before = logged_stored(settings)
    for action in ("utter", "request_suggestions"):
        refused = act(wizard, page, action, text=text)
        assert refused.status_code == 400 and refused.get_json()["field"] == "text", refused.get_data(as_text=True)
        assert "write some words" in refused.get_json()["error"]
    submitted = wizard.post(page, json={"action": "utter", "text": text}, headers=JSON)
    assert submitted.status_code == 400 and submitted.get_json()["field"] == "text"
    assert logged_stored(settings) == before


@pytest.mark.parametrize("text", LEGITIMATE)
def test_a_short_star_reply_in_any_script_is_logged_and_submitted(star, settings, text):
    """What the action logs, the submit takes: a one-character reply once passed one and failed the other,
    leaving the turn unsubmittable."""
    wizard, page = star
    logged = act(wizard, page, "utter", text=text)
    assert logged.status_code == 200, logged.get_data(as_text=True)
    submitted = wizard.post(page, json={}, headers=JSON)
    assert submitted.status_code == 200 and submitted.get_json()["created"], submitted.get_data(as_text=True)
    assert submitted_turns(settings)[-1].text == text


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_an_invisible_only_frames_message_is_a_400_naming_it(app, settings, providers, tmp_path, text):
    launch_frames(settings, providers, domain=domain_copy(tmp_path), success=1.0)
    user = star_worker(app, settings, "user")
    page = take(user)
    before = logged_stored(settings)
    for url in (f"{page}/action", page):
        refused = user.post(url, json={"action": "utter", "text": text}, headers=JSON)
        assert refused.status_code == 400 and refused.get_json()["field"] == "text", refused.get_data(as_text=True)
        assert "write some words" in refused.get_json()["error"]
    assert logged_stored(settings) == before
    accepted = user.post(page, json={"action": "utter", "text": "5"}, headers=JSON)
    assert accepted.status_code == 200, accepted.get_data(as_text=True)


@pytest.mark.parametrize("text", INVISIBLE_ONLY.values(), ids=INVISIBLE_ONLY.keys())
def test_an_invisible_only_meep_message_is_a_400_naming_it(app, settings, providers, text):
    launch_meep(settings, providers)
    user = star_worker(app, settings, "user")
    page = take(user)
    before = logged_stored(settings)
    clicked = user.post(f"{page}/action", json={"action": "utter", "text": text}, headers=JSON)
    submitted = user.post(page, json={"text": text}, headers=JSON)
    for refused in (clicked, submitted):
        assert refused.status_code == 400 and refused.get_json()["field"] == "text", refused.get_data(as_text=True)
        assert "write some words" in refused.get_json()["error"]
    assert logged_stored(settings) == before
    assert user.post(page, json={"text": "Han"}, headers=JSON).status_code == 200

