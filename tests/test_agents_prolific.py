"""An agent teacher on Prolific (issue 37, item 5): the student who talked to it answers its evaluation when they
next arrive at the study, before the turn held for them, against the fake Prolific."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.fake_prolific import FakeProlific
from tests.test_pipeline import STUDENT_ANSWERS
from tests.test_prolific_web import arrives, form_token, settings, study_of  # noqa: F401 - the fixture
from turkflow import pipeline
from turkflow.agents.registry import find_agents
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.hits.provider import AGENT
from turkflow.models import Assignment, AgentTurnStatus, Conversation, Hit, SurveyAnswer, Task, Turn
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path

pytest_plugins = ["tests.fake_prolific"]


def agent_answers(settings, providers, turn_id: int) -> None:
    """What the Celery tasks do after a person's turn: the agent teacher's turn opens, is answered, and the next
    student turn opens on Prolific with the answer."""
    opened = pipeline.opening_after(settings, providers, turn_id)
    assert opened is not None and opened.provider == AGENT
    assert pipeline.answer_agent_turn(settings, providers, opened.turn_id).status == AgentTurnStatus.answered


def test_a_prolific_student_answers_the_evaluation_of_an_agent_teacher_before_their_next_turn(
        settings, providers, client, fake_prolific: FakeProlific):
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task).order_by(Task.id)))[:1], 2,
                                             name="tutor on prolific", provider="prolific", max_turns=6,
                                             agents={"teacher": find_agents(s, ["sim-good"])})
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    study, code = study_of(settings, batch_id, "student"), providers.get("prolific").completion_code(batch_id,
                                                                                                   "student")

    def writes(who: str, answers: dict) -> Turn:
        """A participant's submission on the student study: the turn written, and the submission completed."""
        submission_id, link, page = arrives(client, fake_prolific, study, who)
        token = form_token(page.get_data(as_text=True))
        assert client.post(link, data={**answers, "turkflow_form": token}).status_code == 303
        fake_prolific.complete(submission_id, code)
        with session_scope(settings.database_url) as s:
            return s.exec(select(Turn).join(Hit, Hit.turn_id == Turn.id).join(Assignment, Assignment.hit_id == Hit.id)
                          .where(Assignment.external_id == submission_id)).one()

    first = writes("p1", {"intent": "request_items", "response": "What do I need?"})
    other = writes("p2", {"intent": "request_items", "response": "Where do I start?"})
    dialog = first.conversation_id
    for turn in (first, other):
        agent_answers(settings, providers, turn.id)
    stop = writes("p1", {**STUDENT_ANSWERS, "intent": "stop", "response": "That is all, thanks!"})
    assert stop.conversation_id == dialog
    agent_answers(settings, providers, stop.id)  # the agent's closing reply ends the dialog
    with session_scope(settings.database_url) as s:
        assert s.get(Conversation, dialog).status == "completed"

    # back on the study: a turn of the other dialog is held for them, and the questions come first
    submission_id, link, page = arrives(client, fake_prolific, study, "p1")
    assert page.status_code == 303 and "/prolific/survey" in page.location and f"c={dialog}" in page.location
    questions = client.get(page.location).get_data(as_text=True)
    assert "Did the teacher complete your task?" in questions and "sim-good" not in questions
    answered = client.post(page.location, data={
        "turkflow_form": form_token(questions), "completed": "yes", "understanding": "4", "appropriateness": "4",
        "satisfaction": "5", "reason": "It told me exactly what I needed."})
    assert answered.status_code == 303, answered.get_data(as_text=True)[-600:]
    assert "/prolific/turn" in answered.location  # on to the held turn
    with session_scope(settings.database_url) as s:
        stored = {a.question: a.answer for a in s.exec(select(SurveyAnswer).where(
            SurveyAnswer.conversation_id == dialog))}
    assert stored["completed"] is True and stored["satisfaction"] == 5
    assert 'id="submit-turn"' in client.get(answered.location).get_data(as_text=True)


@pytest.fixture
def client(app):  # noqa: ANN001, ANN201
    return app.test_client()
