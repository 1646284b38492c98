"""The review dashboard in real headless Chromium: sign in, look at the queue, decide with one click, and
worker text that carries markup stays text on every page that shows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from tests.quality_factories import seed_dashboard
from turkflow.db import session_scope
from turkflow.models import Event, Worker, WorkerStatus

pytestmark = pytest.mark.browser


@pytest.fixture
def seeded(settings, providers):
    return seed_dashboard(settings, providers)


@pytest.fixture
def signed_in(browser_context, live_server, seeded):
    page = browser_context.new_page()
    page.goto(f"{live_server.url}/admin/review")
    assert "/admin/login" in page.url  # anonymous visitors are sent to sign in first
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/review")
    return page


def test_worker_text_with_markup_renders_inert_on_every_dashboard_page(signed_in, live_server, seeded):
    page = signed_in
    teacher, students = seeded["teacher"], seeded["students"]
    paths = ["/admin/review", f"/admin/workers/{teacher.id}", f"/admin/workers/{teacher.id}/turns",
             f"/admin/workers/{teacher.id}/received", f"/admin/workers/{students[1].id}/given",
             f"/admin/workers/{students[0].id}", f"/admin/conversations/{seeded['conversation']}",
             f"/admin/conversations/{seeded['crowd'].conversations()[6]}"]
    for path in paths:
        page.goto(live_server.url + path)
        assert page.evaluate("window.__pwned === undefined"), path
        assert page.locator("#pwned").count() == 0, path
        assert page.locator("main img[src=x]").count() == 0, path
        assert "<script>window.__pwned = 1</script>" in page.inner_text("main"), path


def test_review_queue_screenshot_shows_the_blocked_worker_in_context(signed_in, seeded, tmp_path: Path):
    page = signed_in
    page.set_viewport_size({"width": 1280, "height": 900})
    card = page.locator(f"article#worker-{seeded['teacher'].id}")
    assert card.locator("h2").inner_text().startswith("Terry")
    assert card.get_by_text("mean relevance 0.20").is_visible()
    assert card.get_by_role("button", name="Block permanently").is_visible()
    assert card.get_by_role("button", name="Unblock").is_visible()
    assert card.locator(".utt.focus").count() == 5  # the sampled turns, each between its neighbours
    assert card.locator(".utt.focus .yn.no").first.is_visible()
    assert card.locator(".flag", has_text="copied document").first.is_visible()
    assert page.get_by_role("heading", name="Raters who disagree with everyone else").is_visible()
    shot = tmp_path / "review-queue.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000


def test_one_click_unblock_in_the_browser_lets_the_worker_back_in(signed_in, seeded, settings):
    page = signed_in
    card = page.locator(f"article#worker-{seeded['teacher'].id}")
    card.get_by_label("Note").fill("ratings were harsh")
    card.get_by_role("button", name="Unblock").click()
    assert page.get_by_role("status").inner_text() == "Terry is unblocked and can take turns again."
    assert page.get_by_text("Nobody is waiting for review").is_visible()
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, seeded["teacher"].id).status == WorkerStatus.active
        audit = s.exec(select(Event).where(Event.kind == "worker_unblocked")).one()
        assert (audit.actor, audit.data["note"]) == ("requester:ada", "ratings were harsh")


def test_batch_page_draws_its_charts_without_scripts(signed_in, live_server, seeded):
    page = signed_in
    page.goto(f"{live_server.url}/admin/batches/{seeded['crowd'].batch_id}")
    for name in ("Turns per hour", "Quality over time", "student labels", "teacher labels"):
        chart = page.locator(f"svg[aria-label='{name}']")
        assert chart.is_visible() and chart.bounding_box()["height"] > 20, name
    assert page.locator("svg[aria-label='Turns per hour'] rect.bar").count() == 48
