"""Gold turns at onboarding in real headless Chromium: a worker rates them on the quiz page, and the review
page shows the rater their answers identified, with the evidence (issue 25)."""

from __future__ import annotations

import pytest

from tests.test_worker_pages import invite
from turkflow.db import session_scope
from turkflow.hits import onboarding
from turkflow.quality import gold, review
from turkflow.requesters import create_requester

pytestmark = pytest.mark.browser


def test_a_worker_rates_the_gold_turns_in_chromium_and_the_review_page_shows_them_harsh(
        settings, browser_context, live_server, tmp_path):
    worker, url = invite(settings, "teacher", "Hal", base_url=live_server.url, onboarded=False)
    page = browser_context.new_page()
    page.goto(url)
    page.goto(f"{live_server.url}/queue")
    page.wait_for_url(f"{live_server.url}/onboarding")
    turns = page.locator("#gold fieldset.gold-turn")
    assert page.locator("#gold h2").is_visible() and turns.count() == len(gold.gold_for("teacher"))
    assert "ok ok ok ok" in turns.nth(1).inner_text() and "Teacher:" in turns.nth(1).inner_text()
    page.screenshot(path=str(tmp_path / "onboarding.png"), full_page=True)
    for question in onboarding.quiz_for("teacher").questions:
        page.check(f"input[name={question.name}][value={question.answer}]")
    for item in gold.gold_for("teacher"):  # no/no to every turn, the good ones too: a harsh rater
        page.check(f"input[name={gold.field(item, 'relevant')}][value=no]")
        page.check(f"input[name={gold.field(item, 'useful')}][value=no]")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/queue")  # passed: gold never fails anyone

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
        review.daily_review(s, review.ReviewPolicy())
    page.goto(f"{live_server.url}/admin/review")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/review")
    row = page.locator("#identified-raters tbody tr")
    assert row.count() == 1
    text = row.inner_text()
    assert "Hal" in text and "harsh" in text and "0 and 6 gold turns at onboarding" in text
