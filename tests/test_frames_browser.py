"""A Frames dialog in real headless Chromium: a user and a wizard, each in their own browser, take turns from
the queue (the real Celery worker opens each next one). The user reads their goal; the wizard, shown this
dialog's instruction, searches the database, finds nothing, sees a relaxed suggestion, refines the search
without retyping it (the form keeps its values) with flexible dates, and books the package found, which ends
the dialog; both answer the end-of-dialog questions."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_frames_dialog import domain_copy, launch_frames
from tests.test_star_browser import join, sent, the_conversation
from tests.test_accessibility import serious_violations
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


def test_a_wizard_refines_a_search_without_retyping_with_flexible_dates_and_books_which_ends_the_dialog(
        live_server, browser_context, wizard_context, settings, providers, celery_worker, tmp_path):
    launch_frames(settings, providers, domain=domain_copy(tmp_path), success=0.0)
    goal = the_conversation(settings).scenario
    user = join(browser_context, live_server, settings, "user")
    wizard = join(wizard_context, live_server, settings, "wizard")

    take_next_turn(user, live_server)
    assert goal["instructions"].splitlines()[-1] in user.inner_text("#goal")
    assert serious_violations(user) == []  # the user's page, for a screen reader (axe-core)
    user.fill("#user-text", "Hi! I'd like a trip from Boston for at most $300.")
    user.click("#submit-turn")
    sent(user)

    # The wizard, told how to behave in this dialog, searches with the form (no script needed): nothing.
    take_next_turn(wizard, live_server)
    assert wizard.inner_text("#wizard-instruction p") == goal["wizard_instruction"]
    assert "at most $300" in wizard.inner_text(".chat") and goal["text"] not in wizard.content()
    wizard.select_option('select[name="kb-origin"]', "Boston")
    wizard.fill('input[name="kb-price.at_most"]', "300")
    wizard.click("#run-search")
    entry = wizard.locator("#searches .search-entry").first
    entry.wait_for()
    assert "Origin is Boston; Price ($) at most 300" in entry.inner_text()
    assert "Nothing matches." in entry.inner_text()
    assert serious_violations(wizard) == []  # the wizard's page with a search's results and suggestions
    suggestion = entry.locator(".suggestion-line").first.inner_text()
    assert suggestion.startswith("Price ($) at most ") and " instead of 300: " in suggestion
    cheapest = entry.locator(".results tbody tr").first.locator("td").all_inner_texts()
    assert cheapest[1] == "Boston" and len(cheapest) == 8  # the domain's 7 columns and the row's details
    fits = "[...document.querySelectorAll('#searches .table-wrap')].every(w => w.scrollWidth <= w.clientWidth)"
    assert wizard.evaluate(fits)  # no sideways scrolling in a 1280-pixel window
    leaving = date.fromisoformat(cheapest[2])

    # Refining: the form still holds the search; only the budget changes, and a departure a day after the
    # cheapest package's, flexible by 2 days, still finds it.
    assert wizard.input_value('select[name="kb-origin"]') == "Boston"
    assert wizard.input_value('input[name="kb-price.at_most"]') == "300"
    wizard.fill('input[name="kb-price.at_most"]', cheapest[4])
    wizard.fill('input[name="kb-departure.at_least"]', (leaving + timedelta(days=1)).isoformat())
    wizard.select_option("#flexible", "2")
    wizard.click("#run-search")
    entry = wizard.locator("#searches .search-entry").first
    wizard.wait_for_function("document.querySelectorAll('#searches .search-entry').length == 2")
    assert "Origin is Boston" in entry.inner_text() and "dates ± 2 days" in entry.inner_text()
    found = entry.locator(".results tbody tr").first
    assert found.locator("td").all_inner_texts()[:5] == cheapest[:5]
    assert wizard.input_value("#flexible") == "2"
    assert wizard.input_value('select[name="kb-origin"]') == "Boston"
    found.locator("summary").click()  # the other columns, on demand
    assert "Guest rating" in found.locator(".item-details").inner_text()

    # Booking ends the dialog with this turn: the wizard says so and answers at once.
    item = found.get_attribute("data-item")
    found.locator(f'button[data-book="{item}"]').click()
    wizard.locator("#booked").wait_for()
    assert "Send and end the dialog" in wizard.inner_text("#send-reply")
    wizard.fill("#wizard-text", f"Booked: the cheapest package from Boston, ${cheapest[4]}. Enjoy!")
    wizard.click("#send-reply")
    wizard.wait_for_url("**/survey/*")
    wizard.check('input[name="goal_reached"][value="no"]')
    wizard.click("#submit-survey")
    assert "your answers are saved" in wizard.inner_text("#survey-done")

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("wizard_booked", 2)

    # The user finds the question at the top of the queue.
    user.goto(f"{live_server.url}/queue")
    user.click("#surveys-due a")
    user.check('input[name="cooperativity"][value="4"]')
    user.click("#submit-survey")
    assert "your answers are saved" in user.inner_text("#survey-done")

    with session_scope(settings.database_url) as s:
        logged = [(e.agent, e.action) for e in s.exec(select(DialogEvent).order_by(DialogEvent.id))]
        answers = {(a.role, a.question): a.answer for a in s.exec(select(SurveyAnswer))}
        booked = s.exec(select(DialogEvent).where(DialogEvent.action == "book")).one().data
    assert logged == [("User", "utter"), ("Wizard", "search"), ("KnowledgeBase", "search_results"),
                      ("KnowledgeBase", "suggestions"), ("Wizard", "search"),
                      ("KnowledgeBase", "search_results"), ("Wizard", "book"), ("Wizard", "utter")]
    assert str(booked["id"]) == item and booked["item"]["departure"] == leaving.isoformat()
    assert answers == {("user", "cooperativity"): 4, ("wizard", "goal_reached"): False}
