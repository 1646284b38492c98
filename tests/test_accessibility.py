"""Every worker and dashboard page in headless Chromium, as a screen reader's and a phone's user meet it:
axe-core (vendored: tests/vendor/axe-core) finds no serious or critical violation, and on a 390-px-wide
phone no page is wider than the screen, a teacher's document and its checkboxes come before Submit, and the
time left on the turn stays in sight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.quality_factories import seed_dashboard
from tests.test_mturk import mturk_celery, mturk_client, mturk_providers, mturk_settings, stubber  # noqa: F401
from tests.test_worker_pages import invite
from turkflow.db import session_scope
from turkflow.models import Event

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
                 f"/admin/workers/{teacher.id}/received", f"/admin/workers/{students[1].id}/given",
                 "/admin/requesters"]:
        check(page, f"{live_server.url}{path}", problems, phone=phone)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_stars_staged_onboarding_passes_axe_from_the_tutorial_to_a_refused_quiz(viewport, chromium_context,
                                                                                live_server, settings):
    phone = viewport is PHONE
    problems: list[str] = []
    page = chromium_context(viewport).new_page()
    _, link = invite(settings, "user", "Ula", base_url=live_server.url, onboarded=False)
    check(page, link, problems, phone=phone)  # stage 1's tutorial and its start
    assert page.locator("#tutorial").is_visible() and page.locator("#start").is_visible()
    page.click("#start button[type=submit]")
    page.wait_for_selector("#quiz")
    check(page, page.url, problems, phone=phone)  # the quiz, ten questions with their hints
    page.locator("#quiz button[name=hint]").first.click()
    page.wait_for_selector(".hint")
    problems += [f"{page.url} with a hint: {v}" for v in serious_violations(page)]
    page.evaluate("document.getElementById('quiz').noValidate = true")  # as a browser without checks
    page.click("#quiz .actions button[type=submit]")  # nothing answered: the quiz again, with its errors
    page.wait_for_selector("#quiz .has-error, #quiz-result")
    problems += [f"{page.url} refused: {v}" for v in serious_violations(page)]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_agents_report_a_comparisons_report_and_an_annotations_page_pass_axe_and_fit_a_phone(
        viewport, chromium_context, live_server, settings, providers):
    from tests.test_agents_report import MEETS_GOAL, frames_batch, package_for, user_asks_the_agent_to_book
    from tests.test_annotate import FRAMES_SCHEME, collect, label
    from tests.test_annotate import frames_batch as played_frames
    from tests.test_compare import judge, launch, systems
    from turkflow.hits import lifecycle
    from turkflow.protocols.annotate import dialog as annotate
    from turkflow.quality.monitor import Policy
    from turkflow.models import Conversation
    from turkflow.requesters import create_requester

    agents_batch = frames_batch(settings, providers, 1)  # an agent books for a person: its report has figures
    with session_scope(settings.database_url) as s:
        conversation_id = s.exec(select(Conversation.id).where(Conversation.batch_id == agents_batch)).one()
        create_requester(s, "ada", "correct horse")
    user_asks_the_agent_to_book(settings, providers, conversation_id, package_for(settings, conversation_id, MEETS_GOAL))
    compared = launch(settings, providers, systems(settings, providers, n=2), judges=4)
    for n in range(4):  # votes: the ranking, its intervals and its plot
        judge(settings, providers, f"judge-{n}", lambda shown: "left")
    source, truth = played_frames(settings, providers)
    with session_scope(settings.database_url) as s:  # three annotators who never agree: turns for a person
        labelled, hits = annotate.launch(s, source, FRAMES_SCHEME, 3, name="labels",
                                         quality=Policy.parse("none").batch_fields())
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
    for annotator, act in (("careful", None), ("other", "negate"), ("third", "thankyou")):
        given = {t: collect([{"act": act}]) for t in truth} if act else {}
        for _ in truth:
            label(settings, providers, annotator, given, truth=truth)
    phone = viewport is PHONE
    page = chromium_context(viewport).new_page()
    page.goto(f"{live_server.url}/admin/login")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/batches")
    problems: list[str] = []
    for path in [f"/admin/batches/{agents_batch}/agents", f"/admin/compare/{compared}",
                 f"/admin/annotation/{labelled.id}", "/admin/requesters"]:
        check(page, f"{live_server.url}{path}", problems, phone=phone)
    assert problems == [], "\n".join(problems)


def test_an_mturk_workers_preview_turn_refused_submit_and_hand_back_pages_pass_axe(
        chromium_context, mturk_settings, mturk_providers, stubber, mturk_celery):
    """What a worker meets inside MTurk's frame: the preview, the accepted turn, the turn refused with its errors,
    and the page that hands the assignment back to MTurk (its script, which posts it at once, held back)."""
    from botocore.stub import ANY

    from tests.conftest import LiveServer
    from tests.test_mturk import expect_create_hit, hit_state, mturk_id, not_submitted, publish
    from tests.test_mturk import launch as launch_on_mturk
    from tests.test_mturk_web import ASG1, HIT1, accept_ids, page_url
    from tests.test_pipeline import STUDENT_ANSWERS
    from turkflow.web import create_app

    _, (hit_id,) = launch_on_mturk(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", HIT1)
    publish(mturk_settings, mturk_providers, hit_id)
    problems: list[str] = []
    page = chromium_context(DESKTOP).new_page()
    page.route("**/static/mturk.js", lambda route: route.abort())
    with LiveServer(create_app(mturk_settings, mturk_providers)) as server:
        preview = f"{server.url}{page_url(mturk_settings, hit_id, assignmentId='ASSIGNMENT_ID_NOT_AVAILABLE', hitId=HIT1)}"
        check(page, preview, problems, phone=False)
        assert page.locator("#submit-turn").count() == 0
        not_submitted(stubber, ASG1)
        hit_state(stubber, HIT1, pending=1)
        check(page, f"{server.url}{page_url(mturk_settings, hit_id, **accept_ids())}", problems, phone=False)
        not_submitted(stubber, ASG1)
        hit_state(stubber, HIT1, pending=1)
        page.evaluate("document.getElementById('turn-form').noValidate = true")
        page.click("#submit-turn")
        page.wait_for_selector("#error-summary")
        problems += [f"{page.url} with errors: {v}" for v in serious_violations(page)]
        assert "You have earned $0.00 so far" in page.inner_text("#turn-pay")  # the page again, as it was
        not_submitted(stubber, ASG1)
        hit_state(stubber, HIT1, pending=1)
        expect_create_hit(stubber, hit_id + 1, "teacher", mturk_id("3HIT", 2))  # Celery opens the next turn
        stubber.add_response("update_expiration_for_hit", {}, {"HITId": HIT1, "ExpireAt": ANY})
        page.check(f"input[name=intent][value={STUDENT_ANSWERS['intent']}]")
        page.fill("textarea[name=response]", STUDENT_ANSWERS["response"])
        page.click("#submit-turn")
        page.wait_for_selector("#mturk-submit")
        problems += [f"{page.url} handing back: {v}" for v in serious_violations(page)]

        def chained() -> bool:  # the next HIT created and the answered one ended, as MTurk was told
            with session_scope(mturk_settings.database_url) as s:
                return s.exec(select(Event).where(Event.kind == "hit_expired")).first() is not None

        assert wait_until(chained)
    stubber.assert_no_pending_responses()
    assert problems == [], "\n".join(problems)
