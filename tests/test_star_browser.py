"""A STAR dialog in real headless Chromium: a user and a wizard, each in their own browser, take turns from
the queue (the real Celery worker opens each next one), the wizard queries the knowledge base and sees what
the user's page never shows, picks a suggested reply and writes one of their own, the user is nudged, both
answer the end-of-dialog questions, and the STAR export holds all of it."""

from __future__ import annotations

import itertools
import json

import pytest
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_star_dialog import command, launch_star
from tests.test_accessibility import serious_violations
from turkflow import invites
from turkflow.db import session_scope
from turkflow.models import Conversation, Worker

pytestmark = pytest.mark.browser
_names = itertools.count(1)


@pytest.fixture
def wizard_context(chromium):
    """A second browser with its own cookies: the wizard is another person."""
    context = chromium.new_context()
    yield context
    context.close()


def join(context, live_server, settings, role):
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id=f"local-{role}-{next(_names)}", role=role, onboarded=True, stage=1)
        s.add(worker)
        s.flush()
        url = invites.invite_url(settings.secret_key, live_server.url, worker)
    page = context.new_page()
    page.goto(url)
    assert page.url == f"{live_server.url}/queue"
    return page


def take_next_turn(page, live_server):
    """Open the queue until a turn is waiting (Celery opens it), take it, land on the STAR page."""

    def take_button():
        page.goto(f"{live_server.url}/queue")
        button = page.locator("#open-turns button").first
        return button if button.count() else None

    wait_until(take_button, interval=0.1).click()
    page.wait_for_url("**/star/turn/*")


def sent(page):
    page.wait_for_url("**/queue?submitted=*")
    assert "your turn is saved" in page.inner_text(".notice.success")


def the_conversation(settings):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation)).one()


def test_a_user_and_a_wizard_complete_a_star_dialog_in_the_browser(
        live_server, browser_context, wizard_context, settings, providers, celery_worker, tmp_path):
    launch_star(settings, providers)
    user = join(browser_context, live_server, settings, "user")
    wizard = join(wizard_context, live_server, settings, "wizard")

    take_next_turn(user, live_server)
    assert "borrow a novel from the city library" in user.inner_text("#scenario-task")
    assert serious_violations(user) == []  # the user's page, for a screen reader (axe-core)
    user.fill("#user-text", "Hi, I'd like to borrow a novel.")
    user.click("#submit-turn")
    sent(user)

    # The wizard asks the suggestions for a draft (in place), then one click sends the one that fits.
    take_next_turn(wizard, live_server)
    assert "Hi, I'd like to borrow a novel." in wizard.inner_text(".chat")
    assert wizard.locator("#chart .node").first.inner_text() == "hello"
    wizard.fill("#wizard-text", "which language")
    wizard.click("#suggest")
    language = wizard.locator('button.suggestion[data-label="library_ask_language"]')
    language.wait_for()
    assert wizard.locator("#wizard-text").input_value() == "which language"  # still on the page
    language.click()
    sent(wizard)

    # The task file's own nudge is due at turn 3 (index 2); the greeting stays listed.
    take_next_turn(user, live_server)
    nudge = user.locator("#nudges .nudge.new")
    assert "only have time on weekday mornings" in nudge.inner_text()
    assert "In which language would you like to read it?" in user.inner_text(".chat")
    user.fill("#user-text", "English, please. I only have weekday mornings.")
    user.click("#submit-turn")
    sent(user)

    # The wizard queries the knowledge base (in place), sees the item, and writes their own reply.
    take_next_turn(wizard, live_server)
    assert wizard.locator("#chart .node.current").inner_text() == "library ask language"
    wizard.select_option('select[name="kb-Genre"]', "Novel")
    wizard.select_option('select[name="kb-Language"]', "English")
    wizard.click("#run-query")
    item = wizard.locator("#kb-results .kb-item").first
    item.wait_for()
    assert serious_violations(wizard) == []  # the wizard's page with its chart, form and results
    shown = dict(zip(item.locator("dt").all_inner_texts(), item.locator("dd").all_inner_texts()))
    assert shown["Genre"] == "Novel" and shown["Language"] == "English"
    inform = wizard.locator('button.suggestion[data-label="library_inform_book"]')
    assert inform.inner_text() == f"{shown['Title']} by {shown['Author']} is on floor {shown['Floor']}."
    wizard.fill("#wizard-text", "I found an English novel for you. Shall I tell you where it is?")
    wizard.click("#send-own")
    sent(wizard)

    # The user's page holds nothing of the knowledge base; the user ends the dialog and answers at once.
    take_next_turn(user, live_server)
    html = user.content()
    assert shown["Title"] not in html and shown["Author"] not in html
    assert "kb-results" not in html and "Knowledge base" not in html
    assert "Shall I tell you where it is?" in user.inner_text(".chat")
    user.fill("#user-text", "No need, I will ask at the desk. Thanks, bye!")
    user.check("#complete")
    user.click("#submit-turn")
    user.wait_for_url("**/survey/*")
    assert serious_violations(user) == []
    user.check('input[name="task_done"][value="yes"]')
    user.check('input[name="calm"][value="yes"]')
    user.click("#submit-survey")
    assert "your answers are saved" in user.inner_text("#survey-done")

    done = wait_until(lambda: the_conversation(settings).status == "completed" and the_conversation(settings))
    assert (done.end_reason, done.turn_count) == ("user_complete", 5)

    # The wizard finds the questions at the top of the queue.
    wizard.goto(f"{live_server.url}/queue")
    wizard.click("#surveys-due a")
    wizard.check('input[name="changed_mind"][value="no"]')
    wizard.check('input[name="aggressive"][value="no"]')
    wizard.check('input[name="unsure"][value="no"]')
    wizard.click("#submit-survey")
    assert "your answers are saved" in wizard.inner_text("#survey-done")
    wizard.goto(f"{live_server.url}/queue")
    assert wizard.locator("#surveys-due").count() == 0

    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "star"))
    assert exported.returncode == 0, exported.stderr
    doc = json.loads((tmp_path / "star" / "dialogues" / f"{done.id}.json").read_text())
    assert [(e["Agent"], e["Action"]) for e in doc["Events"]] == [
        ("UserGuide", "instruct"), ("User", "utter"),
        ("Wizard", "request_suggestions"), ("Wizard", "pick_suggestion"),
        ("UserGuide", "instruct"), ("User", "utter"),
        ("Wizard", "query"), ("KnowledgeBase", "return_item"), ("Wizard", "utter"),
        ("UserGuide", "instruct"), ("User", "utter"), ("User", "complete"),
    ]  # the user guide greets, gives the task file's nudge at its turn, asks to refer back after an answer
    events = [e for e in doc["Events"] if e["Agent"] != "UserGuide"]
    assert events[1]["Text"] == "which language"
    assert events[2]["ActionLabel"] == "library_ask_language"
    assert "library_ask_language" in events[2]["ActionLabelOptions"]
    assert events[4]["Constraints"] == [{"Genre": '"Novel"'}, {"Language": '"English"'}]
    assert {k: str(v) for k, v in events[5]["Item"].items() if k in shown} == shown
    assert events[6]["Text"] == "I found an English novel for you. Shall I tell you where it is?"
    assert doc["CompletionLevel"] == "Complete"
    assert doc["UserQuestionnaire"] == [
        {"Answer": True, "Question": "Did the assistant get your task done?"},
        {"Answer": True, "Question": "Did the assistant stay calm and helpful throughout the dialogue?"}]
    assert [q["Answer"] for q in doc["WizardQuestionnaire"]] == [False, False, False]
    assert doc["WizardQuestionnaire"][0]["Question"].startswith("Did the user change his/her mind")


def test_a_wizard_queries_a_range_and_a_one_of_browses_and_selects_items_in_the_browser(
        live_server, browser_context, wizard_context, settings, providers, celery_worker, tmp_path):
    """STAR's own apartment search: the wizard asks for a price range and balcony sides one of two, browses
    to the second match, makes it the primary item and the first the secondary; the page shows both, and
    the export carries them on the wizard's reply as STAR's wizard events do."""
    import shutil

    from tests.conftest import SHARED_DATA

    copy = tmp_path / "star"
    shutil.copytree(SHARED_DATA / "star" / "apis", copy / "apis")
    shutil.copytree(SHARED_DATA / "star" / "tasks" / "apartment_search", copy / "tasks" / "apartment_search")
    launch_star(settings, providers, tasks_dir=copy / "tasks")
    user = join(browser_context, live_server, settings, "user")
    wizard = join(wizard_context, live_server, settings, "wizard")
    take_next_turn(user, live_server)
    user.fill("#user-text", "Hi, I need a flat with a balcony facing east or south, at most 3000 a month.")
    user.click("#submit-turn")
    sent(user)

    take_next_turn(wizard, live_server)
    assert wizard.locator('select[name="kb-Price.op"] option').all_inner_texts()[:3] == ["is", "at least", "at most"]
    wizard.select_option('select[name="kb-Price.op"]', "between")
    assert wizard.locator('input[name="kb-Price.to"]').is_visible()  # "between" asks for its end
    wizard.fill('input[name="kb-Price"]', "1000")
    wizard.fill('input[name="kb-Price.to"]', "3000")
    wizard.select_option('select[name="kb-BalconySide.op"]', "is_one_of")
    wizard.select_option('select[name="kb-BalconySide"]', ["east", "south"])
    wizard.select_option('select[name="kb-HasBalcony"]', "yes")
    wizard.click("#run-query")
    position = wizard.locator("#kb-results .kb-entry").first.locator(".kb-position")
    position.wait_for()
    total = int(position.inner_text().rsplit(" ", 1)[1])
    assert position.inner_text() == f"Item 1 of {total}" and total >= 2

    def shown(where):
        item = wizard.locator(where).first
        return dict(zip(item.locator("dt").all_inner_texts(), item.locator("dd").all_inner_texts()))

    first = shown("#kb-results .kb-item")
    assert first["BalconySide"] in ("east", "south") and 1000 <= int(first["Price"]) <= 3000
    wizard.click('#kb-results a[rel="next"]')
    wait_until(lambda: position.inner_text() == f"Item 2 of {total}")
    second = shown("#kb-results .kb-item")
    assert second["id"] != first["id"] and second["BalconySide"] in ("east", "south")
    wizard.click('#kb-results button[value="select_primary"]')
    wait_until(lambda: shown("#kb-primary .kb-item").get("id") == second["id"])
    assert position.inner_text() == f"Item 2 of {total}"  # still browsing there
    wizard.click('#kb-results a[rel="prev"]')
    wait_until(lambda: position.inner_text() == f"Item 1 of {total}")
    wizard.click('#kb-results button[value="select_secondary"]')
    wait_until(lambda: shown("#kb-secondary .kb-item").get("id") == first["id"])
    assert shown("#kb-primary .kb-item") == second and shown("#kb-secondary .kb-item") == first
    wizard.screenshot(path=str(tmp_path / "wizard-items.png"), full_page=True)
    wizard.fill("#wizard-text", "I found two flats with a balcony in your range.")
    wizard.click("#send-own")
    sent(wizard)

    exported = command(settings, "export", "--format", "star", "--out", str(tmp_path / "export"))
    assert exported.returncode == 0, exported.stderr
    conversation = the_conversation(settings)
    doc = json.loads((tmp_path / "export" / "dialogues" / f"{conversation.id}.json").read_text())
    wizard_events = [e for e in doc["Events"] if e["Agent"] == "Wizard"]
    assert [e["Action"] for e in wizard_events] == ["query", "select_primary", "select_secondary", "utter"]
    assert wizard_events[0]["Constraints"] == [{"HasBalcony": "True"},
                                               {"BalconySide": 'api.is_one_of(["east","south"])'},
                                               {"Price": "api.is_at_least(1000)"}, {"Price": "api.is_at_most(3000)"}]
    reply = wizard_events[-1]
    for field, item in (("PrimaryItem", second), ("SecondaryItem", first)):
        assert (reply[field]["id"], reply[field]["Price"], reply[field]["BalconySide"]) == (
            int(item["id"]), int(item["Price"]), item["BalconySide"])


def test_a_batch_of_stars_own_tasks_shows_the_user_what_the_knowledge_base_holds_and_nudges_in_the_browser(
        live_server, browser_context, wizard_context, settings, providers, celery_worker, tmp_path):
    """Loaded from STAR's own 24 task files, a user's scenario names a doctor, a day and an hour the
    knowledge base holds, the user guide greets with a nudge from our templates, and the wizard is told the
    dialog's day and hour. Screenshots of both pages are taken and what they show is checked."""
    from tests.conftest import SHARED_DATA
    from turkflow.hits import lifecycle
    from turkflow.models import Task
    from turkflow.protocols.registry import load_tasks
    from turkflow.protocols.star.dialog import knowledge_base, make_scenarios, read_tasks

    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(SHARED_DATA / "star" / "tasks"))
        tasks = list(s.exec(select(Task).where(Task.protocol == "star").order_by(Task.key)))
        assert len(tasks) == 24
        doctor = next(t for t in tasks if t.star["task"] == "doctor_schedule")
        scenarios = make_scenarios([doctor], 1, unhappy=1.0, seed=11)
        _, hits = lifecycle.launch_batch(s, [doctor], 1, name="star's own", max_turns=20, protocol="star",
                                         scenarios=scenarios)
        lifecycle.publish_hit(s, providers.get("local"), hits[0].id)
        kb_dir = doctor.star["kb_dir"]
    scenario = scenarios[0][1]
    doctors = set(knowledge_base(kb_dir).api("doctor_schedule").inputs["Name"].categories)
    values = scenario["plans"][0]["values"]

    user = join(browser_context, live_server, settings, "user")
    wizard = join(wizard_context, live_server, settings, "wizard")
    take_next_turn(user, live_server)
    shot = tmp_path / "user.png"
    user.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    task = user.inner_text("#scenario-task")
    assert [d for d in doctors if d in task] == [values["Name"]]  # one doctor, one the knowledge base has
    assert values["Day"] in task and values["StartTimeHour"] in task and "Dr. Smith" not in task
    assert "You want help with this" not in task
    assert scenario["user_details"]["name"] in user.inner_text("#scenario-details")
    greeting = user.locator("#nudges .nudge.new")
    assert greeting.count() == 1 and "Greet the assistant" in greeting.inner_text()
    assert "[instruction 1 of" in greeting.inner_text()
    user.fill("#user-text", f"Hello, I would like to see {values['Name']} on {values['Day']}.")
    user.click("#submit-turn")
    sent(user)

    take_next_turn(wizard, live_server)
    shot = tmp_path / "wizard.png"
    wizard.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    page_text = wizard.inner_text("body")
    assert scenario["wizard_facts"][0] in page_text  # "It is Thursday, 1 pm."
    assert f"see {values['Name']} on {values['Day']}" in wizard.inner_text(".chat")
    assert "Greet the assistant" not in page_text  # the user's nudges are the user's
    wizard.fill("#wizard-text", "Of course. At what time would you like to come?")
    wizard.click("#send-own")
    sent(wizard)

    take_next_turn(user, live_server)
    assert "At what time would you like to come?" in user.inner_text(".chat")
    listed = user.locator("#nudges .nudge")
    assert listed.count() >= 1 and "Greet the assistant" in listed.first.inner_text()
    assert user.locator("#nudges .nudge.new").count() == 0  # nothing due: no answer yet, one message said


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_knowledge_base_form_keeps_the_last_querys_values_for_the_next_wizard_in_the_browser(
        live_server, browser_context, wizard_context, chromium, settings, providers, celery_worker, tmp_path):
    """STAR's single wizard's form kept what they had typed: a Book after a Check changes only the request
    type. Here the next wizard turn is another person's, and the form still holds the dialog's last query."""
    import shutil

    from tests.conftest import SHARED_DATA
    from turkflow.models import DialogEvent

    copy = tmp_path / "star"
    shutil.copytree(SHARED_DATA / "star" / "apis", copy / "apis")
    shutil.copytree(SHARED_DATA / "star" / "tasks" / "doctor_schedule", copy / "tasks" / "doctor_schedule")
    launch_star(settings, providers, tasks_dir=copy / "tasks")
    user = join(browser_context, live_server, settings, "user")
    first = join(wizard_context, live_server, settings, "wizard")
    take_next_turn(user, live_server)
    user.fill("#user-text", "Hi, I'm Alexis and I'd like to see Dr. Morgan on Monday at 10 for a sore throat.")
    user.click("#submit-turn")
    sent(user)

    take_next_turn(first, live_server)
    picked = {"Name": first.locator('select[name="kb-Name"] option').first.get_attribute("value"),
              "Day": "Monday", "StartTimeHour": first.locator('select[name="kb-StartTimeHour"] option')
              .nth(2).get_attribute("value"), "RequestType": "Check"}
    for name, value in picked.items():
        first.select_option(f'select[name="kb-{name}"]', value)
    first.fill('input[name="kb-PatientName"]', "Alexis")
    first.fill('input[name="kb-Symptoms"]', "a sore throat")
    first.click("#run-query")
    first.locator("#kb-results .kb-entry").first.wait_for()
    first.fill("#wizard-text", "That slot is free. Shall I book it?")
    first.click("#send-own")
    sent(first)

    take_next_turn(user, live_server)
    user.fill("#user-text", "Yes, please book it.")
    user.click("#submit-turn")
    sent(user)

    other_context = chromium.new_context()
    try:
        second = join(other_context, live_server, settings, "wizard")
        take_next_turn(second, live_server)
        for name, value in picked.items():
            assert second.locator(f'select[name="kb-{name}"]').evaluate(
                "s => Array.from(s.selectedOptions).map(o => o.value)") == [value], name
        assert second.locator('input[name="kb-PatientName"]').input_value() == "Alexis"
        assert second.locator('input[name="kb-Symptoms"]').input_value() == "a sore throat"
        second.select_option('select[name="kb-RequestType"]', "Book")  # the one thing that differs
        second.click("#run-query")
        wait_until(lambda: second.locator("#kb-results .kb-entry").count() == 2)
    finally:
        other_context.close()
    with session_scope(settings.database_url) as s:
        queries = [e.data["Constraints"] for e in s.exec(select(DialogEvent).where(DialogEvent.action == "query")
                                                         .order_by(DialogEvent.id))]
    assert len(queries) == 2
    assert [c for c in queries[1] if "RequestType" not in c] == [c for c in queries[0] if "RequestType" not in c]
    assert {"RequestType": '"Book"'} in queries[1] and {"RequestType": '"Check"'} in queries[0]
    assert len(queries[1]) == 6
