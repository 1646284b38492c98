"""The worker pages over HTTP: joining, the queue, taking and submitting turns, and everything refused.

Tests whose submissions succeed use the real Celery worker, which opens the next turn as in production.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
import requests
from sqlmodel import func, select

from tests.conftest import wait_until
from tests.test_pipeline import TEACHER_ANSWERS, launch
from turkflow import invites, pipeline
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.models import Assignment, Event, Hit, Rating, Turn, TurnStatus, Worker, utcnow

JSON = {"Accept": "application/json"}
FIRST_STUDENT_ANSWERS = {"intent": "request_items", "response": "Hi! What do I need for this?"}


def invite(settings, role, name=None, base_url=None, onboarded=True):
    """A new local worker of the role (onboarded unless told otherwise) and their personal join URL."""
    with session_scope(settings.database_url) as s:
        worker, url = invites.invite_worker(s, settings.secret_key, base_url or settings.public_url, role,
                                            name=name, onboarded=onboarded)
    return worker, url


def joined(app, settings, role, name=None):
    """A browser-like client that opened a new worker's invite link; its POSTs carry the CSRF token the
    queue hands out, as the page's forms do."""
    worker, url = invite(settings, role, name)
    client = app.test_client()
    response = client.get(urlsplit(url).path)
    assert (response.status_code, response.headers["Location"]) == (303, "/queue")
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/queue", headers=JSON).get_json()["csrf_token"]
    client.worker = worker
    return client


def open_turns(client):
    return client.get("/queue", headers=JSON).get_json()["open"]


def take_first(client):
    """Take the first open turn; returns the turn page's path."""
    hit_id = wait_until(lambda: open_turns(client))[0]["hit_id"]
    response = client.post(f"/queue/take/{hit_id}", headers=JSON)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["turn_url"]


def submitted_turns(settings):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Turn).where(Turn.status == TurnStatus.submitted).order_by(Turn.index)).all()


def count(settings, model, *where):
    with session_scope(settings.database_url) as s:
        return s.exec(select(func.count()).select_from(model).where(*where)).one()


def answered_first_turn(settings, providers):
    """A conversation whose student opening is stored and whose teacher turn is open (no Celery needed)."""
    launch(settings, providers)
    with session_scope(settings.database_url) as s:
        student = Worker(external_id="opening-student", role="student", onboarded=True)
        s.add(student)
        s.flush()
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        turn = lifecycle.submit_turn(s, assignment.external_id, student, FIRST_STUDENT_ANSWERS).turn
    pipeline.open_next_turn(settings, providers, turn.conversation_id)


# ---- joining and the queue --------------------------------------------------------------------------


def test_invite_link_signs_the_worker_in_and_a_forged_link_is_refused(app, settings):
    student = joined(app, settings, "student", name="Ada")
    me = student.get("/queue", headers=JSON).get_json()["worker"]
    assert (me["external_id"], me["role"], me["name"]) == (student.worker.external_id, "student", "Ada")

    _, url = invite(settings, "teacher")
    forged = urlsplit(url).path[:-3] + "abc"
    stranger = app.test_client()
    refused = stranger.get(forged)
    assert refused.status_code == 403
    assert "invite link is not valid" in refused.get_data(as_text=True)
    assert stranger.get("/queue").status_code == 403
    assert stranger.get("/queue", headers=JSON).get_json() == {
        "error": "this browser has not joined yet: open the personal invite link you were given"}


def test_queue_lists_the_open_turns_of_the_workers_role_only(app, settings, providers):
    launch(settings, providers, conversations=2)
    student, teacher = joined(app, settings, "student"), joined(app, settings, "teacher")
    listed = open_turns(student)
    assert sorted((t["turn_index"], t["title"]) for t in listed) == [
        (0, "Fluffy buttermilk pancakes"), (0, "Roasted tomato soup")]
    assert open_turns(teacher) == []
    page = student.get("/queue").get_data(as_text=True)
    assert "Roasted tomato soup" in page and f'action="/queue/take/{listed[1]["hit_id"]}"' in page


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # a page's markup: storage is not the subject
def test_two_workers_queues_offer_the_same_turns_each_starting_on_another(app, settings, providers):
    launch(settings, providers, conversations=4)
    first, second = joined(app, settings, "student"), joined(app, settings, "student")
    pages = [[entry["hit_id"] for entry in open_turns(client)] for client in (first, second)]
    assert pages[0][0] != pages[1][0]
    assert sorted(pages[0]) == sorted(pages[1]) and len(pages[0]) == 4


def test_an_empty_queue_page_checks_again_as_often_as_the_requester_set_or_never(app, settings):
    teacher = joined(app, settings, "teacher")
    assert "data-refresh-seconds" not in teacher.get("/queue").get_data(as_text=True)  # 0: the worker checks
    settings.queue_refresh_seconds = 7
    page = teacher.get("/queue").get_data(as_text=True)
    assert 'id="no-open-turns" data-refresh-seconds="7"' in page and "shows it as soon as it opens" in page


def test_taking_a_turn_leases_it_for_the_configured_time_and_hides_it_from_others(app, settings, providers):
    settings.lease_seconds = 120
    launch(settings, providers)
    first, second = joined(app, settings, "student"), joined(app, settings, "student")
    hit_id = open_turns(first)[0]["hit_id"]
    before = utcnow()
    taken = first.post(f"/queue/take/{hit_id}")
    assert taken.status_code == 303 and taken.headers["Location"].startswith("/turn/L")
    with session_scope(settings.database_url) as s:
        lease = s.get(Hit, hit_id).lease_expires_at
    assert before + timedelta(seconds=120) <= lease <= utcnow() + timedelta(seconds=120)
    double_click = first.post(f"/queue/take/{hit_id}")
    assert double_click.headers["Location"] == taken.headers["Location"]
    assert open_turns(second) == []
    assert second.post(f"/queue/take/{hit_id}", headers=JSON).status_code == 409


def test_a_program_taking_a_turn_gets_the_turn_page_in_the_same_answer(app, settings, providers):
    launch(settings, providers)
    student = joined(app, settings, "student")
    hit_id = open_turns(student)[0]["hit_id"]
    taken = student.post(f"/queue/take/{hit_id}", headers=JSON).get_json()
    assert taken["turn"] == student.get(taken["turn_url"], headers=JSON).get_json()
    assert (taken["turn"]["assignment_id"], taken["turn"]["turn_index"]) == (taken["assignment_id"], 0)
    again = student.post(f"/queue/take/{hit_id}", headers=JSON).get_json()  # a double click: the same turn
    assert again == taken


# ---- submitting -------------------------------------------------------------------------------------


def test_submit_stores_the_turn_and_the_next_hit_opens_for_the_other_role(app, settings, providers, celery_worker):
    launch(settings, providers)
    student, teacher = joined(app, settings, "student"), joined(app, settings, "teacher")
    turn_url = take_first(student)
    response = student.post(turn_url, data=FIRST_STUDENT_ANSWERS)
    assert response.status_code == 303
    [stored] = submitted_turns(settings)
    assert response.headers["Location"] == f"/queue?submitted={stored.id}"
    assert (stored.text, stored.label) == (FIRST_STUDENT_ANSWERS["response"], "request_items")
    assert stored.worker_id == student.worker.id
    [opened] = wait_until(lambda: open_turns(teacher))
    assert (opened["conversation_id"], opened["turn_index"]) == (stored.conversation_id, 1)


def test_a_programs_submit_answers_with_the_queue_it_goes_back_to(app, settings, providers, celery_worker):
    launch(settings, providers, conversations=2)
    student = joined(app, settings, "student")
    turn_url = take_first(student)
    stored = student.post(turn_url, data=FIRST_STUDENT_ANSWERS, headers=JSON).get_json()
    [turn] = submitted_turns(settings)
    assert (stored["turn_id"], stored["created"]) == (turn.id, True)
    listed = student.get("/queue", headers=JSON).get_json()
    assert stored["queue"].pop("csrf_token") and listed.pop("csrf_token")  # signed with the time: each its own
    assert stored["queue"] == listed
    assert [entry["turn_index"] for entry in stored["queue"]["open"]] == [0]  # the other conversation's


def test_double_submit_of_one_assignment_stores_one_turn(app, settings, providers, celery_worker):
    launch(settings, providers)
    student = joined(app, settings, "student")
    turn_url = take_first(student)
    first = student.post(turn_url, data=FIRST_STUDENT_ANSWERS)
    again = student.post(turn_url, data=FIRST_STUDENT_ANSWERS)  # other text is a 409: test_error_paths
    assert (first.status_code, again.status_code) == (303, 303)
    assert first.headers["Location"] == again.headers["Location"]
    assert student.post(turn_url, data=FIRST_STUDENT_ANSWERS, headers=JSON).get_json()["created"] is False
    assert [t.text for t in submitted_turns(settings)] == [FIRST_STUDENT_ANSWERS["response"]]
    assert count(settings, Event, Event.kind == "turn_submitted") == 1


def test_concurrent_submits_of_one_assignment_store_one_turn(live_server, settings, providers, celery_worker):
    launch(settings, providers)
    _, url = invite(settings, "student", base_url=live_server.url)
    browser = requests.Session()
    browser.get(url)
    queue = browser.get(f"{live_server.url}/queue", headers=JSON).json()
    browser.headers["X-CSRFToken"] = queue["csrf_token"]
    hit_id = queue["open"][0]["hit_id"]
    taken = browser.post(f"{live_server.url}/queue/take/{hit_id}", headers=JSON).json()
    turn_url = live_server.url + taken["turn_url"]
    start = threading.Barrier(2)
    replies = []

    def submit():
        start.wait()
        replies.append(browser.post(turn_url, data=FIRST_STUDENT_ANSWERS, headers=JSON))

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(r.status_code for r in replies) == [200, 200]
    assert sorted(r.json()["created"] for r in replies) == [False, True]
    assert len({r.json()["turn_id"] for r in replies}) == 1
    assert len(submitted_turns(settings)) == 1
    assert count(settings, Event, Event.kind == "turn_submitted") == 1


# ---- who may open what ------------------------------------------------------------------------------


def test_teacher_cannot_take_or_open_a_students_turn(app, settings, providers):
    launch(settings, providers)
    student, teacher = joined(app, settings, "student"), joined(app, settings, "teacher")
    hit_id = open_turns(student)[0]["hit_id"]
    refused = teacher.post(f"/queue/take/{hit_id}", headers=JSON)
    assert refused.status_code == 403 and "this turn is for a student" in refused.get_json()["error"]

    turn_url = take_first(student)
    page = teacher.get(turn_url)
    assert page.status_code == 403 and "Fluffy buttermilk" not in page.get_data(as_text=True)
    assert teacher.get(turn_url, headers=JSON).status_code == 403
    assert teacher.post(turn_url, data=FIRST_STUDENT_ANSWERS).status_code == 403
    assert submitted_turns(settings) == []


def test_worker_cannot_open_or_submit_another_workers_assignment(app, settings, providers):
    launch(settings, providers)
    holder, other = joined(app, settings, "student"), joined(app, settings, "student")
    turn_url = take_first(holder)
    assert other.get(turn_url).status_code == 403
    refused = other.post(turn_url, data=FIRST_STUDENT_ANSWERS, headers=JSON)
    assert refused.status_code == 403
    assert refused.get_json() == {"error": "this turn was assigned to another worker"}
    assert other.get("/turn/Lnot-an-assignment").status_code == 404
    assert submitted_turns(settings) == []
    assert count(settings, Event, Event.kind == "turn_submitted") == 0


def test_abandoned_lease_returns_the_turn_to_the_pool_and_the_late_submit_is_refused(
        app, settings, providers, celery_worker):
    launch(settings, providers)
    slow, quick = joined(app, settings, "student"), joined(app, settings, "student")
    with session_scope(settings.database_url) as s:  # the slow worker took the turn a lease ago
        hit = lifecycle.open_hits_for(s, slow.worker)[0]
        taken_at = utcnow() - timedelta(seconds=settings.lease_seconds + 1)
        lease = lifecycle.take_turn(s, slow.worker, hit.id, settings.lease_seconds, now=taken_at)
        slow_url = f"/turn/{lease.external_id}"
    assert slow.get(slow_url).status_code == 200  # nobody wanted it yet: still theirs to finish

    quick_url = take_first(quick)
    assert slow.get(slow_url).status_code == 409
    late = slow.post(slow_url, data=FIRST_STUDENT_ANSWERS, headers=JSON)
    assert late.status_code == 409 and "ran out" in late.get_json()["error"]
    assert submitted_turns(settings) == []

    quicker = dict(FIRST_STUDENT_ANSWERS, response="I was quicker")
    assert quick.post(quick_url, data=quicker).status_code == 303
    [stored] = submitted_turns(settings)
    assert (stored.text, stored.worker_id) == ("I was quicker", quick.worker.id)
    with session_scope(settings.database_url) as s:
        statuses = sorted(a.status for a in s.exec(select(Assignment)))
    assert statuses == ["abandoned", "submitted"]


# ---- invalid answers --------------------------------------------------------------------------------

TEACHER_REPLY = dict(TEACHER_ANSWERS, action="return_items", shared=["item-1"],
                     response="You need flour and eggs.")


@pytest.mark.parametrize(("role", "answers", "field", "reason"), [
    ("student", {"intent": "request_items", "response": "  "}, "response", "this answer is required"),
    ("teacher", dict(TEACHER_REPLY, action="dance"), "action", "choose one of"),
    ("teacher", dict(TEACHER_REPLY, action="answer_external", urls=""), "urls", "this answer is required"),
    ("teacher", dict(TEACHER_REPLY, shared=["item-1", "step-99"]), "shared", "unknown item(s): step-99"),
], ids=["missing response", "bad action", "external knowledge without URL", "unknown shared item"])
def test_invalid_answers_get_400_naming_the_field_and_store_nothing(app, settings, providers, role, answers,
                                                                    field, reason):
    if role == "teacher":
        answered_first_turn(settings, providers)
    else:
        launch(settings, providers)
    worker = joined(app, settings, role)
    turn_url = take_first(worker)
    stored_before = [t.id for t in submitted_turns(settings)]

    refused = worker.post(turn_url, data=answers, headers=JSON)
    assert refused.status_code == 400
    assert refused.get_json()["field"] == field and reason in refused.get_json()["error"]
    assert refused.get_json()["error"].startswith(f"{field}: ")

    page = worker.post(turn_url, data=answers)
    html = page.get_data(as_text=True)
    assert page.status_code == 400
    assert f'data-error-field="{field}"' in html and 'href="#q-' + field in html
    assert (answers["response"].strip() or "<textarea") in html  # the worker's text is kept

    assert [t.id for t in submitted_turns(settings)] == stored_before
    assert count(settings, Assignment, Assignment.status != "accepted") == len(stored_before)
    assert count(settings, Rating) == 0
    assert count(settings, Event, Event.kind == "turn_submitted") == len(stored_before)


# ---- what the page shows ----------------------------------------------------------------------------


def test_students_see_the_task_title_only_and_teachers_the_whole_document(app, settings, providers):
    answered_first_turn(settings, providers)
    teacher = joined(app, settings, "teacher")
    turn_url = take_first(teacher)
    view = teacher.get(turn_url, headers=JSON).get_json()
    asked = [q["name"] for q in view["questions"]]
    assert asked == ["relevant", "useful", "action", "urls", "shared", "response"]
    assert "step-1" in view["shareable"] and view["history"][0]["text"] == FIRST_STUDENT_ANSWERS["response"]
    html = teacher.get(turn_url).get_data(as_text=True)
    assert "Whisk the flour, baking powder" in html and 'name="shared" value="step-1"' in html
    assert "data-no-paste" in html

    launch(settings, providers)  # a second conversation whose opening turn a student takes
    student = joined(app, settings, "student")
    student_url = take_first(student)
    student_view = student.get(student_url, headers=JSON).get_json()
    assert student_view["task"] == {"title": student_view["task"]["title"], "image_url": None}
    assert student_view["shareable"] == []
    assert [q["name"] for q in student_view["questions"]] == ["intent", "response"]
    assert "Whisk the flour" not in student.get(student_url).get_data(as_text=True)


def test_preview_mode_renders_the_turn_read_only(app, settings, providers):
    """What an MTurk worker sees before accepting: the whole page, nothing to submit."""
    from turkflow.web.worker import render_turn

    answered_first_turn(settings, providers)
    with session_scope(settings.database_url) as s:
        teacher_turn = s.exec(select(Turn).where(Turn.status == TurnStatus.open)).one()
        view = lifecycle.turn_view(s, teacher_turn)
    with app.test_request_context():
        response = render_turn(view, mode="preview", hidden={"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"})
    html = response.get_data(as_text=True)
    assert '<fieldset class="layout" disabled>' in html and 'id="submit-turn"' not in html
    assert FIRST_STUDENT_ANSWERS["response"] in html and "Whisk the flour" in html
    assert 'name="assignmentId" value="ASSIGNMENT_ID_NOT_AVAILABLE"' in html
    assert "frame-ancestors" in response.headers["Content-Security-Policy"]


def test_a_page_submit_with_a_choice_given_twice_shows_the_error_at_that_question(app, settings, providers):
    answered_first_turn(settings, providers)
    teacher = joined(app, settings, "teacher")
    turn_url = take_first(teacher)
    page = teacher.post(turn_url, data=dict(TEACHER_REPLY, action=["return_items", "chit_chat"]))
    html = page.get_data(as_text=True)
    assert page.status_code == 400 and 'data-error-field="action"' in html and "Answer once" in html
    assert TEACHER_REPLY["response"] in html  # the worker's text is kept
    assert [t.index for t in submitted_turns(settings)] == [0]


def test_a_refusal_is_a_page_for_people_and_json_for_programs(app, settings):
    student = joined(app, settings, "student")
    page = student.get("/turn/no-such-assignment")
    assert page.status_code == 404 and page.mimetype == "text/html" and "This turn does not exist." in page.text
    refused = student.get("/turn/no-such-assignment", headers=JSON)
    assert refused.status_code == 404 and refused.get_json() == {"error": "this turn does not exist"}


def test_a_worker_holds_at_most_max_held_turns_at_once_and_one_more_take_is_a_409(app, settings, providers):
    """A local worker could lease every open turn of their role at once (issue 35): now at most
    ``TURKFLOW_MAX_HELD_TURNS`` (2), and a turn submitted, or whose lease ran out, makes room again."""
    launch(settings, providers, conversations=4)
    greedy = joined(app, settings, "student")
    hits = [entry["hit_id"] for entry in open_turns(greedy)]
    assert len(hits) == 4 and settings.max_held_turns == 2
    taken = [greedy.post(f"/queue/take/{hit}", headers=JSON) for hit in hits[:2]]
    assert [t.status_code for t in taken] == [200, 200]
    refused = greedy.post(f"/queue/take/{hits[2]}", headers=JSON)
    assert refused.status_code == 409 and "2 turns" in refused.get_json()["error"]
    assert greedy.post(f"/queue/take/{hits[0]}", headers=JSON).status_code == 200  # a turn held already: its lease
    page = greedy.post(f"/queue/take/{hits[2]}")
    assert page.status_code == 409 and "2 turns" in page.get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        assert s.get(Hit, hits[2]).lease_expires_at is None  # nothing of the refused take is stored
    sent = greedy.post(taken[0].get_json()["turn_url"], json=FIRST_STUDENT_ANSWERS, headers=JSON)
    assert sent.status_code == 200
    assert greedy.post(f"/queue/take/{hits[2]}", headers=JSON).status_code == 200
    with session_scope(settings.database_url) as s:  # a lease that ran out holds nothing
        held = s.get(Hit, hits[1])
        held.lease_expires_at = utcnow() - timedelta(seconds=1)
        s.add(held)
    assert greedy.post(f"/queue/take/{hits[3]}", headers=JSON).status_code == 200
