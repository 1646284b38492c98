"""A MEEP dialog in real headless Chromium: a user types where they want to go; the agent, in another
browser, never types: it clicks the user's words and the start location into one API call, clicks the
result's fields into templates and sends them; the user ends the dialog and confirms success. The log holds
every click, and replays clean."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_meep_dialog import ASK, launch_meep
from tests.test_star_browser import join, sent, the_conversation
from turkflow.db import session_scope
from turkflow.protocols.meep.dialog import replay
from turkflow.models import DialogEvent, Turn

pytestmark = pytest.mark.browser


@pytest.fixture
def agent_context(chromium):
    """A second browser with its own cookies: the agent is another person."""
    context = chromium.new_context()
    yield context
    context.close()


def take_next_turn(page, live_server):
    """Open the queue until a turn is waiting (Celery opens it), take it, land on the MEEP page."""

    def take_button():
        page.goto(f"{live_server.url}/queue")
        button = page.locator("#open-turns button").first
        return button if button.count() else None

    wait_until(take_button, interval=0.1).click()
    page.wait_for_url("**/meep/turn/*")


def fill(page, slot, *refs):
    """Choose a slot, then click what fills it (words of the user's message, or a result field)."""
    page.click(slot)
    for ref in refs:
        page.click(f'[data-ref="{ref}"]')


def test_the_agent_answers_by_clicks_only_in_the_browser(
        live_server, browser_context, agent_context, settings, providers, celery_worker):
    launch_meep(settings, providers)
    user = join(browser_context, live_server, settings, "user")
    agent = join(agent_context, live_server, settings, "wizard")

    take_next_turn(user, live_server)
    assert "Bluebird Coffee, the one on Main Street" in user.inner_text("#goal")
    user.fill("#user-text", ASK)
    user.click("#submit-turn")
    sent(user)

    take_next_turn(agent, live_server)
    assert agent.locator("textarea").count() == 0  # nowhere to type
    assert agent.is_disabled("#send")
    agent.click('details[data-api="find_place"] summary')
    fill(agent, 'input[name="arg-query"]', "u1_7", "u1_8", "u1_9", "u1_10", "u1_11")
    assert agent.input_value('input[name="arg-query"]') == "u1_7 u1_8 u1_9 u1_10 u1_11"
    fill(agent, 'input[name="arg-latitude"]', "source.latitude")
    fill(agent, 'input[name="arg-longitude"]', "source.longitude")
    agent.click('button[data-call="find_place"]')
    agent.locator('[data-result="v1"]').wait_for()
    assert "2410 Main Street" in agent.inner_text('[data-result="v1"]')

    found = 'form[data-template="t8"]'
    for n, field in enumerate(("name", "street_name", "duration_minutes", "distance_miles")):
        fill(agent, f'{found} input[name="filler-{n}"]', f"v1.{field}")
    agent.click(f'{found} button[data-add="t8"]')
    agent.locator("#pending").wait_for()
    agent.click('form[data-template="t5"] button[data-add="t5"]')
    message = agent.inner_text("#pending")
    assert "I found Bluebird Coffee on Main Street." in message and "Shall we go?" in message
    agent.click("#send")
    sent(agent)

    take_next_turn(user, live_server)
    assert "I found Bluebird Coffee on Main Street. It is" in user.inner_text(".chat")
    assert "v1" not in user.content() and "find_place" not in user.content()
    user.fill("#user-text", "Yes, let's go. Thanks!")
    user.check("#complete")
    user.click("#submit-turn")
    user.wait_for_url("**/survey/*")
    user.check('input[name="succeeded"][value="yes"]')
    user.click("#submit-survey")
    assert "your answers are saved" in user.inner_text("#survey-done")

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("user_complete", 3)
    with session_scope(settings.database_url) as s:
        agent_events = [e for e in s.exec(select(DialogEvent).order_by(DialogEvent.id)) if e.agent == "Agent"]
        reply = s.exec(select(Turn).where(Turn.role == "wizard")).one()
        assert [e.action for e in agent_events] == ["call_api", "pick_template", "pick_template", "send"]
        assert agent_events[0].data["Arguments"]["query"]["value"] == "Bluebird Coffee on Main Street"
        assert reply.text == agent_events[-1].data["Text"] == message.replace("\n", " ")
        assert replay(s, [done.id]) == (4, [])
