"""Frames and MEEP batches on Prolific as STAR's run (issue 26, item 4), against the fake Prolific that checks
every request and response against Prolific's OpenAPI description: launched through the same gate (each
role's onboarding study; the roles are STAR's), each role's own turn page reached through the study link
with its in-turn actions on the token-checked route (a Frames search and booking, MEEP's clicks), and the
end-of-dialog questions before the completion URL for the participant whose turn ends a Frames dialog."""

from __future__ import annotations

from sqlmodel import func, select

from turkflow import pipeline
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task, Turn
from turkflow.protocols.registry import load_tasks, parts
from turkflow.simulator.frames import search_of

from tests.fake_prolific import FakeProlific
from tests.test_frames_dialog import SAMPLE as FRAMES_SAMPLE
from tests.test_meep_dialog import ASK, FOUND, QUERY, SAMPLE as MEEP_SAMPLE
from tests.test_prolific_web import form_token
from tests.test_star_prolific import (  # noqa: F401 - fixtures
    JSON, arrive, completion, finish, path, qualified, set_up, settings, turkflow,
)

pytest_plugins = ["tests.fake_prolific"]

SAMPLES = {"frames": FRAMES_SAMPLE, "meep": MEEP_SAMPLE}


def launch(settings, providers, protocol: str) -> int:  # noqa: ANN001
    """One dialog of the protocol's sample on Prolific (a Frames goal that matches something), its user turn
    published."""
    with session_scope(settings.database_url) as s:
        load_tasks(s, parts(protocol).read_tasks(SAMPLES[protocol]))
        tasks = list(s.exec(select(Task).where(Task.protocol == protocol).order_by(Task.id)))
        options = {"success": 1.0} if protocol == "frames" else {}
        scenarios = parts(protocol).make_scenarios(tasks, 1, seed=1, **options)
        batch, hits = lifecycle.launch_batch(s, tasks, 1, name=protocol, protocol=protocol,
                                             provider="prolific", max_turns=20, scenarios=scenarios,
                                             reward_cents=50)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    return batch_id


def user_opens(client, fake: FakeProlific, settings, providers, batch_id: int,  # noqa: ANN001
               form: dict) -> int:
    """The user's first turn (its page's ``form``) through the study link, back to Prolific; the wizard's
    turn opened. The dialog."""
    link, page = arrive(client, fake, settings, batch_id, "user", "pu1")
    assert page.status_code == 200 and 'name="text"' in page.text, page.text
    sent = client.post(link, data={**form, "turkflow_form": form_token(page.text)})
    assert sent.status_code == 303 and sent.location == completion(providers, batch_id, "user")
    finish(fake, providers, link, batch_id, "user")
    with session_scope(settings.database_url) as s:
        conversation_id = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)).one()
    pipeline.open_next_turn(settings, providers, conversation_id)
    return conversation_id


def test_a_frames_wizard_on_prolific_searches_refines_books_and_answers_before_the_completion_url(
        qualified, settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, "frames")
    dialog = user_opens(client, fake_prolific, settings, providers, batch_id,
                        {"action": "utter", "text": "Hi, I need a trip."})
    link, page = arrive(client, fake_prolific, settings, batch_id, "wizard", "pw1")
    assert page.status_code == 200 and 'id="search-form"' in page.text
    assert 'id="wizard-instruction"' in page.text
    token = form_token(page.text)
    with session_scope(settings.database_url) as s:
        goal = s.get(Conversation, dialog).scenario
    action = link.replace("/turn?", "/turn/action?")
    found = client.post(action, json={"action": "search", "constraints": search_of(goal["constraints"]),
                                      "turkflow_form": token}, headers=JSON)
    assert found.status_code == 200, found.text
    first = found.get_json()["wizard"]["searches"][0]
    assert first["total"] > 0 and found.get_json()["wizard"]["instruction"] == goal["wizard_instruction"]
    refined = client.post(action, data={"action": "search", "kb-origin": "Boston", "flexible": "2",
                                        "turkflow_form": token})  # the page without scripts
    assert refined.status_code == 303 and path(refined.location).startswith("/prolific/turn?")
    shown = client.get(path(refined.location)).text
    assert 'name="kb-origin"' in shown and '<option value="Boston" selected>' in shown  # kept in the form
    before = client.get(link, headers=JSON).get_json()["frames"]["wizard"]
    refused = client.post(action, json={"action": "book", "id": "no-such-item", "turkflow_form": token},
                          headers=JSON)
    assert refused.status_code == 400 and refused.get_json()["field"] == "id"
    assert client.get(link, headers=JSON).get_json()["frames"]["wizard"] == before  # nothing stored
    item = first["items"][0]["id"]
    booked = client.post(action, data={"action": "book", "id": str(item), "turkflow_form": token})
    assert booked.status_code == 303 and 'id="booked"' in client.get(link).text

    ended = client.post(link, data={"action": "utter", "text": "Booked: have a good trip!",
                                    "turkflow_form": token})
    assert ended.status_code == 303 and path(ended.location).startswith("/prolific/survey?")  # first
    assert client.get(link).location == ended.location
    survey = client.get(path(ended.location))
    assert survey.status_code == 200 and goal["instructions"].splitlines()[0] in survey.text  # judged
    done = client.post(path(ended.location), data={"goal_reached": "yes",
                                                   "turkflow_form": form_token(survey.text)})
    assert done.status_code == 303 and done.location == completion(providers, batch_id, "wizard")
    pipeline.open_next_turn(settings, providers, dialog)  # as the Celery task does after a submission
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, dialog)
        assert conversation.end_reason == "wizard_booked"
        logged = [e.action for e in s.exec(select(DialogEvent).where(DialogEvent.conversation_id == dialog)
                                           .order_by(DialogEvent.id))]
        assert logged == ["utter", "search", "search_results", "search", "search_results", "book", "utter"]
        book = s.exec(select(DialogEvent).where(DialogEvent.action == "book")).one()
        assert book.data["id"] == item and book.data["item"]["id"] == item
        assert {(a.role, a.question): a.answer for a in s.exec(select(SurveyAnswer))} == {
            ("wizard", "goal_reached"): True}


def test_a_meep_agent_on_prolific_clicks_and_sends_and_goes_back_to_prolific(
        qualified, settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, "meep")
    user_opens(client, fake_prolific, settings, providers, batch_id, {"text": ASK})
    link, page = arrive(client, fake_prolific, settings, batch_id, "wizard", "pw1")
    assert page.status_code == 200 and 'id="send"' in page.text
    assert "img-src 'self' data:" in page.headers["Content-Security-Policy"]  # MEEP's own page policy
    token = form_token(page.text)
    action = link.replace("/turn?", "/turn/action?")
    called = client.post(action, json={"action": "call_api", "api": "find_place", "arguments": QUERY,
                                       "turkflow_form": token}, headers=JSON)
    assert called.status_code == 200, called.text
    assert called.get_json()["logged"][1]["Results"][0]["fields"]["address"] == "2410 Main Street"
    picked = client.post(action, json={"action": "pick_template", **FOUND, "turkflow_form": token},
                         headers=JSON)
    message = picked.get_json()["agent"]["message"]
    assert message.startswith("I found Bluebird Coffee on Main Street.")
    sent = client.post(link, json={"action": "send", "turkflow_form": token}, headers=JSON)
    assert sent.status_code == 200, sent.text  # what was stored, as the queue answers, and on to Prolific
    assert sent.get_json()["text"] == message and sent.get_json()["survey_url"] is None
    assert sent.get_json()["completion_url"] == completion(providers, batch_id, "wizard")
    with session_scope(settings.database_url) as s:
        said = s.exec(select(DialogEvent).where(DialogEvent.action == "send")).one()
        assert said.data["Text"] == message


def test_frames_and_meep_launch_on_prolific_once_each_roles_onboarding_is_set_up(
        turkflow, settings, providers, fake_prolific):
    for protocol in ("frames", "meep"):
        loaded = turkflow("tasks", "load", "--protocol", protocol, str(SAMPLES[protocol]))
        assert loaded.exit_code == 0, loaded.stderr
    args = ("batch", "launch", "--all", "-n", "1", "--reward", "3.00", "--yes", "--provider", "prolific")
    missing = turkflow(*args, "--protocol", "frames")
    assert missing.exit_code == 1 and "user stage 1, wizard stage 1" in missing.stderr
    set_up(turkflow, settings, "user"), set_up(turkflow, settings, "wizard")
    for protocol in ("frames", "meep"):
        launched = turkflow(*args, "--protocol", protocol)
        assert launched.exit_code == 0, launched.stderr
        assert "1 user turn open on Prolific (real studies)" in launched.stdout
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(Conversation)).one() == 2
    active = [st for st in fake_prolific.studies.values() if st.status == "ACTIVE"]
    assert len(active) == 4  # the roles' onboarding studies and each batch's user study


def test_a_frames_turn_sent_again_on_prolific_must_repeat_its_text(qualified, settings, providers, client,
                                                                    fake_prolific):
    """A retried or double-clicked submit from the study's page changes nothing; one with other text is a 409
    naming what was stored, as on the local queue, never a 200 that silently keeps the first text."""
    batch_id = launch(settings, providers, "frames")
    link, page = arrive(client, fake_prolific, settings, batch_id, "user", "pu1")
    sent = {"action": "utter", "text": "Hi, I need a trip.", "turkflow_form": form_token(page.text)}
    first = client.post(link, json=sent, headers=JSON)
    assert first.status_code == 200 and first.get_json()["created"], first.text
    again = client.post(link, json=sent, headers=JSON)
    assert again.status_code == 200 and not again.get_json()["created"]
    other = client.post(link, json={**sent, "text": "Actually, a cruise."}, headers=JSON)
    assert other.status_code == 409 and "Hi, I need a trip." in other.get_json()["error"], other.text
    assert other.get_json()["field"] == "text"
    with session_scope(settings.database_url) as s:
        assert [t.text for t in s.exec(select(Turn))] == ["Hi, I need a trip."]
