"""The Wizard of Tasks protocol as data: the questions each role answers and the rules on them."""

import pytest

from turkflow.protocol import WIZARD_OF_TASKS, AnswerError, TurnContext, validate_answers

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
    with pytest.raises(AnswerError) as err:
        validate_answers(WIZARD_OF_TASKS, TEACHER_CTX, {**answers, **change})
    assert err.value.field == field


def test_student_danger_labels_only_items_shared_so_far():
    ctx = TurnContext(index=2, role="student", shared_so_far=("step-2",))
    base = {"relevant": "yes", "useful": "yes", "real_life": "cut it", "intent": "stop", "response": "Thanks!"}
    assert validate_answers(WIZARD_OF_TASKS, ctx, {**base, "danger": ["step-2"]})["danger"] == ["step-2"]
    with pytest.raises(AnswerError, match="danger"):
        validate_answers(WIZARD_OF_TASKS, ctx, {**base, "danger": ["step-3"]})
