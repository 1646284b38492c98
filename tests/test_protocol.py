"""The Wizard of Tasks protocol as data: the questions each role answers and the rules on them."""

import pytest

from turkflow.errors import InvalidAnswer, InvalidInput
from turkflow.protocols.questions import FRAMES, WIZARD_OF_TASKS, TurnContext, clean_text, validate_answers, validate_survey

TEACHER_CTX = TurnContext(index=1, role="teacher", shareable=("item-1", "step-1"))


def test_first_student_turn_asks_no_rating_and_no_real_life_action():
    names = [q.name for q in WIZARD_OF_TASKS.form("student").questions_for(TurnContext(index=0, role="student"))]
    assert names == ["intent", "response"]


def test_later_student_turns_rate_label_danger_and_real_life():
    names = [q.name for q in WIZARD_OF_TASKS.form("student").questions_for(TurnContext(index=2, role="student"))]
    assert names == ["relevant", "useful", "danger", "real_life", "intent", "response"]


def test_teacher_answers_are_cleaned():
    clean = validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {
        "relevant": "yes", "useful": "no", "action": "answer_external",
        "urls": "https://example.org/a\nhttps://example.org/b", "shared": ["step-1"], "response": " Try this. "})
    assert clean == {"relevant": True, "useful": False, "action": "answer_external",
                     "urls": ["https://example.org/a", "https://example.org/b"], "shared": ["step-1"],
                     "response": "Try this."}


@pytest.mark.parametrize("change, field", [
    ({"relevant": "maybe"}, "relevant"),
    ({"action": "dance"}, "action"),
    ({"action": "answer_external", "urls": ""}, "urls"),
    ({"urls": "javascript:alert(1)"}, "urls"),
    ({"shared": ["step-9"]}, "shared"),
    ({"response": ""}, "response"),
    ({"response": "x" * 2001}, "response"),
])
def test_bad_teacher_answers_name_the_field(change, field):
    answers = {"relevant": "yes", "useful": "yes", "action": "return_step", "response": "Do step one."}
    with pytest.raises(InvalidAnswer) as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**answers, **change})
    assert err.value.field == field


def test_student_danger_labels_only_items_shared_so_far():
    ctx = TurnContext(index=2, role="student", shared_so_far=("step-2",))
    base = {"relevant": "yes", "useful": "yes", "real_life": "cut it", "intent": "stop", "response": "Thanks!"}
    assert validate_answers(WIZARD_OF_TASKS, ctx, {**base, "danger": ["step-2"]})["danger"] == ["step-2"]
    with pytest.raises(InvalidAnswer, match="danger"):
        validate_answers(WIZARD_OF_TASKS, ctx, {**base, "danger": ["step-3"]})


# ---- hostile input: strict types, one answer per single-answer question, clean text ---------------------

TEACHER_REPLY = {"relevant": "yes", "useful": "yes", "action": "return_step", "response": "Do step one."}


@pytest.mark.parametrize("value", [42, 4.5, True, None, {"text": "hi"}, ["hi", 1], [["nested"]]],
                         ids=["number", "float", "boolean", "null", "object", "list with a number", "nested list"])
def test_response_that_is_not_text_names_the_field(value):
    with pytest.raises(InvalidAnswer) as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "response": value})
    assert err.value.field == "response"


@pytest.mark.parametrize("field, value", [("relevant", True), ("action", 3), ("shared", {"step-1": True}),
                                          ("urls", 7)])
def test_choice_items_and_urls_of_the_wrong_type_name_the_field(field, value):
    with pytest.raises(InvalidAnswer) as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, field: value})
    assert err.value.field == field


@pytest.mark.parametrize("field, values", [("action", ["return_step", "chit_chat"]), ("relevant", ["yes", "no"]),
                                           ("response", ["one", "two"])])
def test_single_answer_question_given_twice_is_refused(field, values):
    with pytest.raises(InvalidAnswer, match="answer once") as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, field: values})
    assert err.value.field == field


def test_a_single_answer_sent_as_a_one_element_list_is_accepted():
    answers = {name: [value] for name, value in TEACHER_REPLY.items()}
    assert validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, answers)["action"] == "return_step"


def test_url_list_is_bounded():
    urls = "\n".join(f"https://example.org/{i}" for i in range(11))
    with pytest.raises(InvalidAnswer, match="at most 10") as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "action": "answer_external", "urls": urls})
    assert err.value.field == "urls"


def test_urls_with_invisible_characters_are_refused():
    with pytest.raises(InvalidAnswer, match="not a web address"):
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "urls": "https://exa\u200bmple.org/"})


@pytest.mark.parametrize("text", ["\u200b\u200b", "\ufeff", "\x00\x00", " \u200b\ufeff\x00\n\t "],
                         ids=["zero-width spaces", "BOM", "NULs", "mixed"])
def test_invisible_only_response_is_refused_as_empty(text):
    with pytest.raises(InvalidAnswer, match="required") as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "response": text})
    assert err.value.field == "response"


def test_invisible_edges_of_a_response_are_trimmed_and_only_they():
    assert clean_text(" \x00Add salt\u0085\u200b ") == "Add salt"
    with pytest.raises(InvalidInput):
        clean_text(" \x00Add\u0085salt")


@pytest.mark.parametrize("text", ["Add\x00salt", "Add\x07salt", "Add\x1bsalt", "Add\ud800salt"],
                         ids=["NUL", "bell", "escape", "lone surrogate"])
def test_control_characters_inside_a_response_are_refused(text):
    with pytest.raises(InvalidAnswer) as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "response": text})
    assert err.value.field == "response"


@pytest.mark.parametrize("text", ["\u0301\u0301", "\u3164\u3164", "\ufe0f\U0001F3FB", "\u2800", "\uffa0"],
                         ids=["accents", "hangul filler", "selector and modifier", "braille blank", "halfwidth filler"])
def test_a_response_without_a_letter_or_digit_is_refused_as_no_words(text):
    with pytest.raises(InvalidAnswer, match="write some words") as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "response": text})
    assert err.value.field == "response"


@pytest.mark.parametrize("text", ["5", "好", "OK", "Han", "639431"])
def test_a_one_or_two_character_answer_with_a_letter_or_digit_is_an_answer(text):
    assert validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**TEACHER_REPLY, "response": text})["response"] == text


def test_text_is_stored_in_nfc_with_one_kind_of_line_break():
    assert clean_text("\ufeff Cafe\u0301\r\nthen\rstir \u200b") == "Caf\u00e9\nthen\nstir"


@pytest.mark.parametrize("given", ["4", 4, ["4"]])
def test_a_survey_rating_is_stored_as_its_number_from_a_form_or_json(given):
    assert validate_survey(FRAMES.form("user").survey, {"cooperativity": given}) == {"cooperativity": 4}
    assert validate_survey(FRAMES.form("wizard").survey, {"goal_reached": True}) == {"goal_reached": True}


@pytest.mark.parametrize("given", ["0", "6", 6, "four", True, 4.0, None, ["4", "5"], {"n": 4}])
def test_a_survey_rating_outside_one_to_five_is_refused_naming_the_question(given):
    with pytest.raises(InvalidAnswer) as refused:
        validate_survey(FRAMES.form("user").survey, {"cooperativity": given})
    assert refused.value.field == "cooperativity"
