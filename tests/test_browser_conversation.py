"""Students and teachers in real headless Chromium: whole conversations through the worker pages, with the
real Celery worker opening each next turn."""

from __future__ import annotations

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_pipeline import launch
from tests.test_worker_pages import count, invite, submitted_turns
from turkflow.db import session_scope
from turkflow.models import Conversation, Event, Hit, Rating

pytestmark = pytest.mark.browser


@pytest.fixture
def teacher_context(chromium):
    """A second browser with its own cookies, so student and teacher are different people."""
    context = chromium.new_context()
    yield context
    context.close()


def join(context, live_server, settings, role, name=None):
    worker, url = invite(settings, role, name, base_url=live_server.url)
    page = context.new_page()
    page.goto(url)
    assert page.url == f"{live_server.url}/queue"
    page.worker = worker
    return page


def take_next_turn(page, live_server):
    """Open the queue until a turn is waiting (Celery opens it), take it, land on the turn page."""

    def take_button():
        page.goto(f"{live_server.url}/queue")
        button = page.locator("#open-turns button").first
        return button if button.count() else None

    wait_until(take_button, interval=0.1).click()
    page.wait_for_url("**/turn/*")


def rate_previous(page):
    page.check("input[name=relevant][value=yes]")
    page.check("input[name=useful][value=yes]")


def student_turn(page, live_server, intent, text, *, real_life="", danger=()):
    take_next_turn(page, live_server)
    if real_life:
        rate_previous(page)
        page.fill("textarea[name=real_life]", real_life)
    for item in danger:
        page.check(f"input[name=danger][value={item}]")
    page.check(f"input[name=intent][value={intent}]")
    page.fill("textarea[name=response]", text)
    submit(page)


def teacher_turn(page, live_server, action, text, *, share=(), urls=""):
    take_next_turn(page, live_server)
    rate_previous(page)
    page.check(f"input[name=action][value={action}]")
    if urls:
        page.fill("textarea[name=urls]", urls)
    for item in share:
        page.check(f"input[name=shared][value={item}]")
    page.fill("textarea[name=response]", text)
    submit(page)


def submit(page):
    page.click("#submit-turn")
    page.wait_for_url("**/queue?submitted=*")
    assert "your turn is saved" in page.inner_text(".notice.success")


def the_conversation(settings):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation)).one()


def test_student_and_teacher_complete_a_six_turn_conversation_in_the_browser(
        live_server, browser_context, teacher_context, settings, providers, celery_worker):
    launch(settings, providers, max_turns=6)
    student = join(browser_context, live_server, settings, "student", name="Sam")
    teacher = join(teacher_context, live_server, settings, "teacher", name="Tia")

    student_turn(student, live_server, "request_items", "Hi! What do I need for pancakes?")
    teacher_turn(teacher, live_server, "return_items", "Flour, baking powder and buttermilk, see the list.",
                 share=("item-1", "item-2", "item-6"))
    student_turn(student, live_server, "request_step", "Got them all. How do I start?",
                 real_life="Put everything on the counter.")

    take_next_turn(teacher, live_server)
    urls = teacher.locator("#q-urls")
    assert urls.is_hidden()  # shown only for answers from external knowledge
    teacher.check("input[name=action][value=answer_external]")
    assert urls.is_visible()
    rate_previous(teacher)
    teacher.fill("textarea[name=urls]", "https://example.org/how-to-whisk")
    teacher.check("input[name=shared][value=step-1]")
    assert teacher.inner_text("[data-shared-count]") == "1 item selected."
    teacher.fill("textarea[name=response]", "Whisk the dry things together first, gently.")
    submit(teacher)

    take_next_turn(student, live_server)
    shared = student.locator("details.shared").first
    assert shared.locator("summary").inner_text() == "Shared (3)"
    assert not shared.locator("li").first.is_visible()
    shared.locator("summary").click()
    assert "250 g plain flour" in shared.inner_text()
    assert "Whisk the flour" not in student.inner_text("aside")  # students never see the document
    rate_previous(student)
    student.fill("textarea[name=real_life]", "Whisk flour and sugar in a bowl.")
    student.check("input[name=danger][value=step-1]")
    student.check("input[name=intent][value=question_step]")
    student.fill("textarea[name=response]", "How long should I whisk?")
    submit(student)

    teacher_turn(teacher, live_server, "answer_document", "Just until combined, then add the wet mix.",
                 share=("step-2",))

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("max_turns", 6)
    turns = submitted_turns(settings)
    assert [t.role for t in turns] == ["student", "teacher"] * 3
    assert [t.worker_id for t in turns] == [student.worker.id, teacher.worker.id] * 3
    assert turns[1].answers["shared"] == ["item-1", "item-2", "item-6"]
    assert turns[3].label == "answer_external"
    assert turns[3].answers["urls"] == ["https://example.org/how-to-whisk"]
    assert turns[4].answers["danger"] == ["step-1"]
    assert count(settings, Rating) == 5
    assert count(settings, Hit) == 6  # nothing opened after the last turn


def test_student_stop_and_the_teachers_closing_turn_end_the_conversation_in_the_browser(
        live_server, browser_context, teacher_context, settings, providers, celery_worker):
    launch(settings, providers, max_turns=20)
    student = join(browser_context, live_server, settings, "student")
    teacher = join(teacher_context, live_server, settings, "teacher")

    student_turn(student, live_server, "request_items", "Hello, what do I need?")
    teacher_turn(teacher, live_server, "return_items", "Everything in the list I shared.", share=("item-1",))
    student_turn(student, live_server, "stop", "That is all I needed, thank you!", real_life="Go shopping.")
    assert the_conversation(settings).status == "active"  # the teacher still closes
    teacher_turn(teacher, live_server, "chit_chat", "You are welcome, enjoy your pancakes!")

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("student_stop", 4)
    assert count(settings, Hit) == 4
    student.goto(f"{live_server.url}/queue")
    assert student.locator("#no-open-turns").is_visible()


def test_double_click_on_submit_stores_one_turn(live_server, browser_context, settings, providers,
                                                 celery_worker):
    launch(settings, providers)
    student = join(browser_context, live_server, settings, "student")
    take_next_turn(student, live_server)
    student.check("input[name=intent][value=request_items]")
    student.fill("textarea[name=response]", "Hi, what do I need?")
    student.dblclick("#submit-turn")
    student.wait_for_url("**/queue?submitted=*")
    assert [t.text for t in submitted_turns(settings)] == ["Hi, what do I need?"]
    assert count(settings, Event, Event.kind == "turn_submitted") == 1


def test_paste_into_the_teachers_response_box_is_blocked(
        live_server, browser_context, teacher_context, settings, providers, celery_worker):
    launch(settings, providers)
    student = join(browser_context, live_server, settings, "student")
    student_turn(student, live_server, "request_items", "Hi, what do I need?")
    teacher = join(teacher_context, live_server, settings, "teacher")
    take_next_turn(teacher, live_server)
    teacher_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    teacher.evaluate("navigator.clipboard.writeText('Whisk the flour, baking powder, baking soda')")

    teacher.check("input[name=action][value=answer_external]")
    teacher.focus("textarea[name=urls]")
    teacher.keyboard.press("Control+V")  # pasting works in other boxes: the clipboard is real
    assert teacher.input_value("textarea[name=urls]") == "Whisk the flour, baking powder, baking soda"

    teacher.focus("textarea[name=response]")
    teacher.keyboard.press("Control+V")
    assert teacher.input_value("textarea[name=response]") == ""
    teacher.keyboard.type("In my own words")
    assert teacher.input_value("textarea[name=response]") == "In my own words"


def assert_no_script_ran(page):
    assert page.evaluate("window.__pwned") is None
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("img[src='x']").count() == 0


def test_worker_text_with_script_renders_inert_on_the_queue_and_the_turn_page(
        live_server, browser_context, teacher_context, settings, providers, celery_worker):
    launch(settings, providers)
    hostile = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
    student = join(browser_context, live_server, settings, "student", name=hostile)
    assert hostile in student.inner_text("header")
    assert_no_script_ran(student)
    student_turn(student, live_server, "request_items", hostile)

    teacher = join(teacher_context, live_server, settings, "teacher")
    wait_until(lambda: teacher.goto(f"{live_server.url}/queue") and teacher.locator(".last-message").count(),
               interval=0.1)
    assert hostile in teacher.inner_text(".last-message")
    assert_no_script_ran(teacher)
    take_next_turn(teacher, live_server)
    assert teacher.inner_text(".message-text") == hostile
    assert_no_script_ran(teacher)


def test_a_waiting_worker_sees_a_turn_arrive_without_a_reload_and_the_tabs_title_says_so(
        live_server, browser_context, teacher_context, settings, providers, celery_worker):
    """The empty queue asks the server every second (fetch, not a reload: what the worker has on the page, and
    the page itself, stay); the turn the student's submission opens appears with its pay, and the title of
    the tab the teacher left changes."""
    settings.queue_refresh_seconds = 1
    launch(settings, providers)
    teacher = join(teacher_context, live_server, settings, "teacher")
    assert teacher.locator("#no-open-turns").is_visible()
    assert "writing one takes about" in teacher.locator("#what-next").inner_text()
    teacher.evaluate("window.stayed = true")  # a reload would forget it
    title = teacher.title()
    student = join(browser_context, live_server, settings, "student")
    student_turn(student, live_server, "request_items", "Hello, what do I need?")  # and submits it
    teacher.wait_for_selector("#open-turns button", timeout=60_000)
    assert teacher.evaluate("window.stayed") is True
    assert teacher.title() == f"(1) A turn is waiting · {title}"
    assert teacher.locator("#open-turns .pays").inner_text().startswith("Pays $0.20 · bonus $0.08 · about ")
    title_of_task = teacher.locator("#open-turns .task-title").inner_text()
    assert teacher.get_by_role("button", name=f"Take turn 2 of {title_of_task}", exact=True).count() == 1
