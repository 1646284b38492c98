"""Side by side in real headless Chromium (issue 38): a judge compares two finished dialogs on a desktop, where
they stand in two columns, and on a phone, where one stands above the other; the choice and the reason are
stored, and nothing the page loads or sends names a system."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.test_accessibility import serious_violations
from tests.test_compare import QUESTION, launch, systems
from tests.test_star_browser import join, sent
from turkflow.db import session_scope
from turkflow.models import Batch, DialogEvent, Turn, TurnStatus

pytestmark = pytest.mark.browser

SCREENS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("screen", sorted(SCREENS))
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_judge_compares_two_dialogs_side_by_side_on_a_desktop_and_one_above_the_other_on_a_phone(
        live_server, browser_context, settings, providers, screen):
    of = systems(settings, providers, n=2)
    launch(settings, providers, of, judges=1)
    with session_scope(settings.database_url) as s:
        leaks = [s.get(Batch, b).name for b in of] + ["people of batch"]
    page = join(browser_context, live_server, settings, "judge")
    page.set_viewport_size(SCREENS[screen])
    seen = []
    page.on("request", lambda request: seen.append(f"{request.url} {request.post_data or ''}"))
    page.reload()
    assert "Two dialogs to compare" in page.inner_text("main")
    seen.append(page.content())
    page.locator("#open-turns button").first.click()
    page.wait_for_url("**/compare/turn/*")
    seen.append(page.content())
    assert page.inner_text("#question") == QUESTION
    assert page.inner_text("#turn-pay").startswith("Pays $")  # what the vote pays, as every turn page says it
    assert "You have earned $0.00 so far" in page.inner_text("#turn-pay")
    assert serious_violations(page) == []  # the judge's page, for a screen reader (axe-core)
    left, right = page.locator("#left-dialog"), page.locator("#right-dialog")
    assert "What do I need for this?" in left.inner_text() and "What do I need for this?" in right.inner_text()
    a, b = left.bounding_box(), right.bounding_box()
    if screen == "desktop":  # two columns, side by side
        assert b["x"] >= a["x"] + a["width"] and abs(a["y"] - b["y"]) < 2
    else:  # one above the other, each the page's width
        assert b["y"] >= a["y"] + a["height"] and abs(a["x"] - b["x"]) < 2 and a["width"] > 300
        assert page.evaluate("document.documentElement.scrollWidth") <= SCREENS["phone"]["width"]
    page.get_by_role("radio", name="Dialog B").check()
    page.fill("#response", "It says goodbye kindly.")
    page.click("#submit-turn")
    sent(page)
    with session_scope(settings.database_url) as s:
        judged = s.exec(select(Turn).where(Turn.role == "judge", Turn.status == TurnStatus.submitted)).one()
        assert (judged.answers["choice"], judged.text) == ("right", "It says goodbye kindly.")
        shown = s.exec(select(DialogEvent).where(DialogEvent.turn_id == judged.id)).one()
        assert shown.data["left"]["system"] != shown.data["right"]["system"]
    assert not [leak for leak in leaks for said in seen if leak in said]
