"""A Frames dialog in real headless Chromium: a user and a wizard, each in their own browser, take turns from
the queue (the real Celery worker opens each next one). The user reads their goal; the wizard searches the
database, finds nothing, sees a relaxed suggestion and offers it; the user ends the dialog, and both answer
the end-of-dialog questions."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_frames_dialog import domain_copy, launch_frames
from tests.test_star_browser import join, sent, the_conversation
from turkflow.db import session_scope
from turkflow.models import DialogEvent, SurveyAnswer

pytestmark = pytest.mark.browser


@pytest.fixture
def wizard_context(chromium):
    """A second browser with its own cookies: the wizard is another person."""
    context = chromium.new_context()
    yield context
    context.close()


def take_next_turn(page, live_server):
    """Open the queue until a turn is waiting (Celery opens it), take it, land on the Frames page."""

    def take_button():
        page.goto(f"{live_server.url}/queue")
        button = page.locator("#open-turns button").first
        return button if button.count() else None

    wait_until(take_button, interval=0.1).click()
    page.wait_for_url("**/frames/turn/*")


def test_a_wizard_finds_nothing_offers_the_relaxed_suggestion_and_both_answer_the_questions(
        live_server, browser_context, wizard_context, settings, providers, celery_worker, tmp_path):
    launch_frames(settings, providers, domain=domain_copy(tmp_path), success=0.0)
    goal = the_conversation(settings).scenario
    user = join(browser_context, live_server, settings, "user")
    wizard = join(wizard_context, live_server, settings, "wizard")

    take_next_turn(user, live_server)
    assert goal["instructions"].splitlines()[-1] in user.inner_text("#goal")
    user.fill("#user-text", "Hi! I'd like a trip from Boston for at most $300.")
    user.click("#submit-turn")
    sent(user)

    # The wizard searches with the form (the page reloads: no script needed), and nothing matches.
    take_next_turn(wizard, live_server)
    assert "at most $300" in wizard.inner_text(".chat") and goal["text"] not in wizard.content()
    wizard.select_option('select[name="kb-origin"]', "Boston")
    wizard.fill('input[name="kb-price.at_most"]', "300")
    wizard.click("#run-search")
    entry = wizard.locator("#searches .search-entry").first
    entry.wait_for()
    assert "origin is Boston; price at most 300" in entry.inner_text()
    assert "Nothing matches." in entry.inner_text()
    suggestion = entry.locator(".suggestion-line").first.inner_text()
    assert suggestion.startswith("price at most ") and " instead of 300: " in suggestion
    cheapest = entry.locator(".results tbody tr").first.locator("td").all_inner_texts()
    assert cheapest[1] == "Boston"
    wizard.fill("#wizard-text", f"Nothing for $300, sorry. The cheapest from Boston costs ${cheapest[7]}.")
    wizard.click("#send-reply")
    sent(wizard)

    # The user's page holds nothing of the database; the user ends the dialog and answers at once.
    take_next_turn(user, live_server)
    assert "search-form" not in user.content() and "The cheapest from Boston" in user.inner_text(".chat")
    user.fill("#user-text", "Too expensive for me. Thanks anyway, bye!")
    user.check("#complete")
    user.click("#submit-turn")
    user.wait_for_url("**/survey/*")
    user.check('input[name="cooperativity"][value="4"]')
    user.click("#submit-survey")
    assert "your answers are saved" in user.inner_text("#survey-done")

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("user_complete", 3)

    # The wizard finds the question at the top of the queue.
    wizard.goto(f"{live_server.url}/queue")
    wizard.click("#surveys-due a")
    wizard.check('input[name="goal_reached"][value="no"]')
    wizard.click("#submit-survey")
    assert "your answers are saved" in wizard.inner_text("#survey-done")

    with session_scope(settings.database_url) as s:
        logged = [(e.agent, e.action) for e in s.exec(select(DialogEvent).order_by(DialogEvent.id))]
        answers = {(a.role, a.question): a.answer for a in s.exec(select(SurveyAnswer))}
    assert logged == [("User", "utter"), ("Wizard", "search"), ("KnowledgeBase", "search_results"),
                      ("KnowledgeBase", "suggestions"), ("Wizard", "utter"), ("User", "utter"),
                      ("User", "complete")]
    assert answers == {("user", "cooperativity"): 4, ("wizard", "goal_reached"): False}
