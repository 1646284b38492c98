"""A STAR dialog in real headless Chromium: a user and a wizard, each in their own browser, take turns from
the queue (the real Celery worker opens each next one), the wizard queries the knowledge base and sees what
the user's page never shows, picks a suggested reply and writes one of their own, the user is nudged, both
answer the end-of-dialog questions, and the STAR export holds all of it."""

from __future__ import annotations

import itertools
import json

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_star_dialog import command, launch_star
from turkflow import invites
from turkflow.db import session_scope
from turkflow.models import Conversation, Worker

pytestmark = pytest.mark.browser
_names = itertools.count(1)


@pytest.fixture
def wizard_context(chromium):
    """A second browser with its own cookies: the wizard is another person."""
    context = chromium.new_context()
    yield context
    context.close()


def join(context, live_server, settings, role):
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id=f"local-{role}-{next(_names)}", role=role, onboarded=True, stage=1)
        s.add(worker)
        s.flush()
        url = invites.invite_url(settings.secret_key, live_server.url, worker)
    page = context.new_page()
    page.goto(url)
    assert page.url == f"{live_server.url}/queue"
    return page


def take_next_turn(page, live_server):
    """Open the queue until a turn is waiting (Celery opens it), take it, land on the STAR page."""

    def take_button():
        page.goto(f"{live_server.url}/queue")
        button = page.locator("#open-turns button").first
        return button if button.count() else None

    wait_until(take_button, interval=0.1).click()
    page.wait_for_url("**/star/turn/*")


def sent(page):
    page.wait_for_url("**/queue?submitted=*")
    assert "your turn is saved" in page.inner_text(".notice.success")


def the_conversation(settings):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation)).one()


def test_a_user_and_a_wizard_complete_a_star_dialog_in_the_browser(
        live_server, browser_context, wizard_context, settings, providers, celery_worker, tmp_path):
    launch_star(settings, providers)
    user = join(browser_context, live_server, settings, "user")
    wizard = join(wizard_context, live_server, settings, "wizard")

    take_next_turn(user, live_server)
    assert "borrow a novel from the city library" in user.inner_text("#scenario-task")
    user.fill("#user-text", "Hi, I'd like to borrow a novel.")
    user.click("#submit-turn")
    sent(user)

    # The wizard asks the suggestions for a draft (in place), then one click sends the one that fits.
    take_next_turn(wizard, live_server)
    assert "Hi, I'd like to borrow a novel." in wizard.inner_text(".chat")
    assert wizard.locator("#chart .node").first.inner_text() == "hello"
    wizard.fill("#wizard-text", "which language")
    wizard.click("#suggest")
    language = wizard.locator('button.suggestion[data-label="library_ask_language"]')
    language.wait_for()
    assert wizard.locator("#wizard-text").input_value() == "which language"  # still on the page
    language.click()
    sent(wizard)

    # The user guide's nudge is due at turn 3 (index 2).
    take_next_turn(user, live_server)
    nudge = user.locator("#nudges .nudge.new")
    assert "only have time on weekday mornings" in nudge.inner_text()
    assert "In which language would you like to read it?" in user.inner_text(".chat")
    user.fill("#user-text", "English, please. I only have weekday mornings.")
    user.click("#submit-turn")
    sent(user)

    # The wizard queries the knowledge base (in place), sees the item, and writes their own reply.
    take_next_turn(wizard, live_server)
    assert wizard.locator("#chart .node.current").inner_text() == "library ask language"
    wizard.select_option('select[name="kb-Genre"]', "Novel")
    wizard.select_option('select[name="kb-Language"]', "English")
    wizard.click("#run-query")
    item = wizard.locator("#kb-results .kb-item").first
    item.wait_for()
    shown = dict(zip(item.locator("dt").all_inner_texts(), item.locator("dd").all_inner_texts()))
    assert shown["Genre"] == "Novel" and shown["Language"] == "English"
    inform = wizard.locator('button.suggestion[data-label="library_inform_book"]')
    assert inform.inner_text() == f"{shown['Title']} by {shown['Author']} is on floor {shown['Floor']}."
    wizard.fill("#wizard-text", "I found an English novel for you. Shall I tell you where it is?")
    wizard.click("#send-own")
    sent(wizard)

    # The user's page holds nothing of the knowledge base; the user ends the dialog and answers at once.
    take_next_turn(user, live_server)
    html = user.content()
    assert shown["Title"] not in html and shown["Author"] not in html
    assert "kb-results" not in html and "Knowledge base" not in html
    assert "Shall I tell you where it is?" in user.inner_text(".chat")
    user.fill("#user-text", "No need, I will ask at the desk. Thanks, bye!")
    user.check("#complete")
    user.click("#submit-turn")
    user.wait_for_url("**/survey/*")
    user.check('input[name="task_done"][value="yes"]')
    user.check('input[name="calm"][value="yes"]')
    user.click("#submit-survey")
    assert "your answers are saved" in user.inner_text("#survey-done")

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("user_complete", 5)

    # The wizard finds the questions at the top of the queue.
    wizard.goto(f"{live_server.url}/queue")
    wizard.click("#surveys-due a")
    wizard.check('input[name="changed_mind"][value="no"]')
    wizard.check('input[name="aggressive"][value="no"]')
    wizard.check('input[name="unsure"][value="no"]')
    wizard.click("#submit-survey")
    assert "your answers are saved" in wizard.inner_text("#survey-done")
    wizard.goto(f"{live_server.url}/queue")
    assert wizard.locator("#surveys-due").count() == 0

    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "star"))
    assert exported.returncode == 0, exported.stderr
    doc = json.loads((tmp_path / "star" / "dialogues" / f"{done.id}.json").read_text())
    assert [(e["Agent"], e["Action"]) for e in doc["Events"]] == [
        ("User", "utter"),
        ("Wizard", "request_suggestions"), ("Wizard", "pick_suggestion"),
        ("UserGuide", "instruct"), ("User", "utter"),
        ("Wizard", "query"), ("KnowledgeBase", "return_item"), ("Wizard", "utter"),
        ("User", "utter"), ("User", "complete"),
    ]
    events = doc["Events"]
    assert events[1]["Text"] == "which language"
    assert events[2]["ActionLabel"] == "library_ask_language"
    assert "library_ask_language" in events[2]["ActionLabelOptions"]
    assert events[5]["Constraints"] == [{"Genre": '"Novel"'}, {"Language": '"English"'}]
    assert {k: str(v) for k, v in events[6]["Item"].items() if k in shown} == shown
    assert events[7]["Text"] == "I found an English novel for you. Shall I tell you where it is?"
    assert doc["CompletionLevel"] == "Complete"
    assert doc["UserQuestionnaire"] == [
        {"Answer": True, "Question": "Did the assistant get your task done?"},
        {"Answer": True, "Question": "Did the assistant stay calm and helpful throughout the dialogue?"}]
    assert [q["Answer"] for q in doc["WizardQuestionnaire"]] == [False, False, False]
    assert doc["WizardQuestionnaire"][0]["Question"].startswith("Did the user change his/her mind")
