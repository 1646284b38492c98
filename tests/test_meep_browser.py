"""A MEEP dialog in real headless Chromium: a user types where they want to go; the agent, in another
browser, never types: it clicks the user's words and the start location into one API call (the slots show
the words and values they hold), makes a new template with "+" from clicked words and a blank, fills it with
a result's field and sends; the user agrees; the agent calls start_driving with the place's latitude and
longitude; the user sees the destination as a marker on a Leaflet map (no tiles, nothing fetched from
outside) and approves it. The log holds every click, and replays clean."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_meep_dialog import ASK, launch_meep
from tests.test_star_browser import join, sent, the_conversation
from tests.test_accessibility import serious_violations
from turkflow.db import session_scope
from turkflow.protocols.meep.dialog import replay
from turkflow.models import DialogEvent

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
    """Choose a slot (by the button that shows what it holds), then click what fills it (words of the
    user's message, a result field, or, for "+", words of the templates and blanks)."""
    page.click(slot)
    for ref in refs:
        page.click(f'[data-ref="{ref}"]')


def slot(page, scope, name):
    return f'{scope} button.slot-view[data-slot="{name}"]'


def test_the_agent_clicks_makes_a_template_drives_and_the_user_approves_on_the_map(
        live_server, browser_context, agent_context, settings, providers, celery_worker):
    launch_meep(settings, providers)
    user = join(browser_context, live_server, settings, "user")
    agent = join(agent_context, live_server, settings, "wizard")
    outside = []  # no request leaves this machine: no tiles are fetched without a tile URL
    for page in (user, agent):
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(live_server.url) else None)

    take_next_turn(user, live_server)
    assert "Bluebird Coffee, the one on Main Street" in user.inner_text("#goal")
    assert serious_violations(user) == []  # the user's page, for a screen reader (axe-core)
    user.fill("#user-text", ASK)
    user.click("#submit-turn")
    sent(user)

    take_next_turn(agent, live_server)
    assert agent.locator("textarea").count() == 0  # nowhere to type
    assert agent.is_disabled("#send")
    agent.click('details[data-api="find_place"] summary')
    api = 'details[data-api="find_place"]'
    fill(agent, slot(agent, api, "arg-query"), "u1_7", "u1_8", "u1_9", "u1_10", "u1_11")
    assert agent.inner_text(slot(agent, api, "arg-query")) == "Bluebird Coffee on Main Street"  # words, not u1_7
    fill(agent, slot(agent, api, "arg-latitude"), "source.latitude")
    assert agent.inner_text(slot(agent, api, "arg-latitude")) == "33.9803"  # the value, not source.latitude
    fill(agent, slot(agent, api, "arg-longitude"), "source.longitude")
    agent.click('button[data-call="find_place"]')
    agent.locator('[data-result="v1"]').wait_for()
    assert "2410 Main Street" in agent.inner_text('[data-result="v1"]')
    assert serious_violations(agent) == []  # the agent's page of clicks, with a call's result

    # "+": a new template from clicked words and a blank
    agent.click(slot(agent, "#composer", "words"))
    agent.click('#composer summary')
    for ref in ("u1_7", "u1_8", "t2.1", "{}", "t2.8"):
        agent.click(f'[data-ref="{ref}"]')
    assert agent.inner_text(slot(agent, "#composer", "words")) == "Bluebird Coffee is ___ ."
    agent.click("#add-template")
    new = 'form[data-template="t13"]'
    agent.locator(new).wait_for()
    assert agent.inner_text(f"{new} .template-text").strip().startswith("Bluebird Coffee is")
    fill(agent, slot(agent, new, "filler-0"), "v1.neighborhood")
    assert agent.inner_text(slot(agent, new, "filler-0")) == "Ocean Park"
    agent.click(f'{new} button[data-add="t13"]')
    agent.locator("#pending").wait_for()
    agent.click('form[data-template="t5"] button[data-add="t5"]')
    message = agent.inner_text("#pending")
    assert "Bluebird Coffee is Ocean Park." in message and "Shall we go?" in message
    agent.click("#send")
    sent(agent)

    take_next_turn(user, live_server)
    assert "Bluebird Coffee is Ocean Park. Shall we go?" in user.inner_text(".chat")
    # the user sees what the agent said, never the calls or their results (the page's
    # random CSRF token may contain "v1", so look at the text and the elements, not the HTML)
    assert "v1" not in user.inner_text("body") and "find_place" not in user.content()
    assert user.locator("[data-result], [data-call], [data-ref]").count() == 0
    user.fill("#user-text", "Yes, let's go.")
    user.click("#submit-turn")
    sent(user)

    take_next_turn(agent, live_server)
    agent.click('details[data-api="start_driving"] summary')
    drive = 'details[data-api="start_driving"]'
    fill(agent, slot(agent, drive, "arg-latitude"), "v1.latitude")
    fill(agent, slot(agent, drive, "arg-longitude"), "v1.longitude")
    agent.click('button[data-call="start_driving"]')
    agent.locator("#driving").wait_for()
    fill(agent, slot(agent, 'form[data-template="t11"]', "filler-0"), "v1.name")
    agent.click('form[data-template="t11"] button[data-add="t11"]')
    agent.locator("#pending").wait_for()
    agent.click("#send")
    sent(agent)

    take_next_turn(user, live_server)
    assert user.locator("#user-text").count() == 0  # the car is driving: the user only judges
    marker = user.locator("#map .leaflet-marker-icon")
    marker.wait_for()
    assert user.get_attribute("#map", "data-marker") == "34.0016,-118.4825"
    assert user.locator("#map .leaflet-tile").count() == 0
    assert "34.0016" in user.inner_text("#destination-point") and "Bluebird Coffee" in user.inner_text("#destination-point")
    user.click("#approve")
    sent(user)
    assert outside == []

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("user_complete", 5)
    with session_scope(settings.database_url) as s:
        events = list(s.exec(select(DialogEvent).order_by(DialogEvent.id)))
        agent_events = [e for e in events if e.agent == "Agent"]
        assert [e.action for e in agent_events] == ["call_api", "add_template", "pick_template", "pick_template",
                                                    "send", "call_api", "pick_template", "send"]
        assert agent_events[5].data["API"] == "start_driving"
        judge = next(e for e in events if e.action == "judge")
        assert (judge.data["Approved"], judge.data["Latitude"], judge.data["Longitude"]) == (True, 34.0016, -118.4825)
        assert replay(s, [done.id]) == (8, [])  # the template composed again, the destination driven again
