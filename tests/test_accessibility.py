"""Every worker and dashboard page in headless Chromium, as a screen reader's and a phone's user meet it:
axe-core (vendored: tests/vendor/axe-core) finds no serious or critical violation, and on a 390-px-wide
phone no page is wider than the screen, a teacher's document and its checkboxes come before Submit, and the
time left on the turn stays in sight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.quality_factories import seed_dashboard
from tests.test_worker_pages import invite

pytestmark = pytest.mark.browser

AXE = (Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js").read_text()
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture
def seeded(settings, providers):
    return seed_dashboard(settings, providers)


@pytest.fixture
def chromium_context(chromium):
    """axe is evaluated into each page, which the pages' own policy (scripts from the site only) would refuse
    to a script tag: the context runs it past the policy, as a browser extension's checker does."""
    made = []

    def new(viewport: dict) -> object:
        context = chromium.new_context(viewport=viewport, bypass_csp=True)
        made.append(context)
        return context

    yield new
    for context in made:
        context.close()


def serious_violations(page) -> list[str]:  # noqa: ANN001
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE)
    found = page.evaluate("async () => (await axe.run(document)).violations.map(v => ({id: v.id, impact: v.impact, "
                          "help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))")
    return [json.dumps(v) for v in found if v["impact"] in ("serious", "critical")]


def fits(page) -> bool:  # noqa: ANN001
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def check(page, url: str, problems: list[str], *, phone: bool) -> None:  # noqa: ANN001
    page.goto(url)
    problems += [f"{url}: {v}" for v in serious_violations(page)]
    if phone and not fits(page):
        problems.append(f"{url}: {page.evaluate('document.documentElement.scrollWidth')} px wide on a 390-px phone")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_worker_pages_pass_axe_and_a_teachers_turn_fits_a_phone_with_the_document_before_submit(
        viewport, chromium_context, live_server, seeded, settings):
    phone = viewport is PHONE
    problems: list[str] = []
    student = chromium_context(viewport).new_page()
    _, link = invite(settings, "student", "Sol", base_url=live_server.url)
    check(student, link, problems, phone=phone)  # the queue, with open turns
    check(student, f"{live_server.url}/", problems, phone=phone)
    student.goto(f"{live_server.url}/queue")
    student.locator("#open-turns button").first.click()
    student.wait_for_url("**/turn/*")
    turn = student.url
    check(student, turn, problems, phone=phone)
    student.evaluate("document.getElementById('turn-form').noValidate = true")  # as a browser without checks
    student.click("#submit-turn")  # nothing answered: the page again, with its errors
    student.wait_for_selector("#error-summary")
    problems += [f"{turn} with errors: {v}" for v in serious_violations(student)]
    check(student, f"{live_server.url}/turn/no-such-turn", problems, phone=phone)

    newcomer = chromium_context(viewport).new_page()
    _, link = invite(settings, "teacher", "Nia", base_url=live_server.url, onboarded=False)
    check(newcomer, link, problems, phone=phone)  # the role's quiz comes first
    assert "/onboarding" in newcomer.url

    waiting = chromium_context(viewport).new_page()
    _, link = invite(settings, "user", "Uli", base_url=live_server.url)
    check(waiting, link, problems, phone=phone)  # no STAR batch: the waiting screen
    assert waiting.locator("#no-open-turns").is_visible()

    teacher = chromium_context(viewport).new_page()
    _, link = invite(settings, "teacher", "Tom", base_url=live_server.url)
    teacher.goto(link)
    teacher.locator("#open-turns button").first.click()
    teacher.wait_for_url("**/turn/*")
    check(teacher, teacher.url, problems, phone=phone)
    assert problems == [], "\n".join(problems)
    if phone:
        first_checkbox = teacher.locator(".task-panel input[type=checkbox]").first.bounding_box()
        submit = teacher.locator("#submit-turn")
        assert first_checkbox["y"] < submit.bounding_box()["y"]  # read the document, tick, then Submit
        submit.scroll_into_view_if_needed()
        timer = teacher.locator(".lease").bounding_box()
        assert 0 <= timer["y"] and timer["y"] + timer["height"] <= PHONE["height"]  # the time left in sight
        assert teacher.locator("textarea[name=response]").evaluate("box => box.labels.length === 0")
        assert teacher.get_by_role("textbox", name="Your response to the student").count() == 1  # it has a name


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_dashboard_pages_pass_axe_and_none_is_wider_than_a_phone(viewport, chromium_context, live_server, seeded,
                                                                 settings):
    phone = viewport is PHONE
    page = chromium_context(viewport).new_page()
    problems: list[str] = []
    check(page, f"{live_server.url}/admin/login", problems, phone=phone)
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/batches")
    teacher, students, batch = seeded["teacher"], seeded["students"], seeded["crowd"].batch_id
    for path in ["/admin/batches", f"/admin/batches/{batch}", f"/admin/batches/{batch}/conversations",
                 f"/admin/conversations/{seeded['conversation']}", "/admin/review", "/admin/workers",
                 f"/admin/workers/{teacher.id}", f"/admin/workers/{teacher.id}/turns",
                 f"/admin/workers/{teacher.id}/received", f"/admin/workers/{students[1].id}/given"]:
        check(page, f"{live_server.url}{path}", problems, phone=phone)
    assert problems == [], "\n".join(problems)
