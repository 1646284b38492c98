"""The MTurk entry to the turn page, ``/mturk/turn``, as MTurk's iframe calls it: preview, a verified submit
that posts MTurk's externalSubmit form and chains to the next HIT through the real Celery worker, and
forged submissions refused with nothing stored."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urlencode

import pytest
from botocore.stub import ANY
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_mturk import (  # noqa: F401 - fixtures
    SANDBOX_SITE,
    expect_create_hit,
    hit_state,
    launch,
    mturk_celery,
    mturk_client,
    mturk_id,
    mturk_providers,
    mturk_settings,
    not_submitted,
    publish,
    stubber,
)
from tests.test_error_paths import read_only
from tests.test_pipeline import STUDENT_ANSWERS
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.hits.mturk.pages import hit_token
from turkflow.models import Assignment, AssignmentStatus, Event, Hit, HitStatus, Turn, TurnStatus, Worker
from turkflow.web import create_app

HIT1, ASG1, WORKER1 = mturk_id("3HIT", 1), mturk_id("3ASG", 1), "AWORKER1"


@pytest.fixture
def mturk_web(mturk_settings, mturk_providers):  # noqa: ANN001, ANN201
    app = create_app(mturk_settings, mturk_providers)
    app.config["TESTING"] = True
    return app.test_client()


@pytest.fixture
def published(mturk_settings, mturk_providers, stubber):  # noqa: ANN001, ANN201
    """One conversation whose first (student) turn is HIT1 on the MTurk sandbox."""
    _, (hit_id,) = launch(mturk_settings)
    expect_create_hit(stubber, hit_id, "student", HIT1)
    publish(mturk_settings, mturk_providers, hit_id)
    return hit_id


def page_url(settings, hit_id: int, **ids: str) -> str:  # noqa: ANN001
    """The ExternalURL of the HIT plus what MTurk appends to it."""
    return f"/mturk/turn?{urlencode({'h': hit_token(settings.secret_key, hit_id), **ids})}"


def accept_ids(assignment: str = ASG1, worker: str = WORKER1) -> dict[str, str]:
    return {"assignmentId": assignment, "hitId": HIT1, "workerId": worker, "turkSubmitTo": SANDBOX_SITE}


def form_token(page: str) -> str:
    return html.unescape(re.search(r'name="turkflow_form" value="([^"]+)"', page).group(1))


def stored(settings) -> tuple[list[Assignment], list[Turn], list[Worker]]:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return (s.exec(select(Assignment)).all(), s.exec(select(Turn).where(Turn.status == TurnStatus.submitted)).all(),
                s.exec(select(Worker)).all())


def test_preview_shows_the_turn_read_only_and_only_mturk_may_frame_it(mturk_settings, mturk_web, published, stubber):
    for ids in ({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": HIT1}, {}):
        page = mturk_web.get(page_url(mturk_settings, published, **ids))
        assert page.status_code == 200
        text = page.get_data(as_text=True)
        assert "This is a preview" in text and 'id="submit-turn"' not in text
        assert re.search(r"<fieldset class=\"layout\" disabled", text)
        csp = page.headers["Content-Security-Policy"]
        assert "frame-ancestors https://workersandbox.mturk.com https://worker.mturk.com" in csp
        assert "X-Frame-Options" not in page.headers and "Set-Cookie" not in page.headers
    assert stored(mturk_settings) == ([], [], [])
    stubber.assert_no_pending_responses()


def test_a_verified_submit_stores_the_turn_posts_externalsubmit_and_opens_the_next_hit(
        mturk_settings, mturk_web, published, stubber, mturk_celery):
    url = page_url(mturk_settings, published, **accept_ids())
    not_submitted(stubber, ASG1)
    hit_state(stubber, HIT1, pending=1)
    page = mturk_web.get(url)
    assert page.status_code == 200 and 'id="submit-turn"' in page.get_data(as_text=True)
    assert "You have earned $0.00 so far" in page.get_data(as_text=True)  # beside the turn's pay, in USD

    not_submitted(stubber, ASG1)
    hit_state(stubber, HIT1, pending=1)
    expect_create_hit(stubber, published + 1, "teacher", mturk_id("3HIT", 2))  # Celery opens the next turn
    stubber.add_response("update_expiration_for_hit", {}, {"HITId": HIT1, "ExpireAt": ANY})  # ends the answered HIT
    done = mturk_web.post(url, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.get_data(as_text=True))})
    assert done.status_code == 200
    text = done.get_data(as_text=True)
    assert f'action="{SANDBOX_SITE}/mturk/externalSubmit"' in text
    assert f'name="assignmentId" value="{ASG1}"' in text
    copy = json.loads(html.unescape(re.search(r'name="turkflow_answers" value="([^"]+)"', text).group(1)))
    assert copy == {"intent": "request_step", "response": "What comes next?"}
    assignments, turns, workers = stored(mturk_settings)
    assert [(a.external_id, a.status) for a in assignments] == [(ASG1, AssignmentStatus.submitted)]
    assert [t.text for t in turns] == ["What comes next?"] and [w.external_id for w in workers] == [WORKER1]

    def next_hit_open_and_answered_hit_ended():
        with session_scope(mturk_settings.database_url) as s:
            teacher = s.get(Hit, published + 1)
            ended = s.exec(select(Event).where(Event.kind == "hit_expired")).first()
            return teacher is not None and teacher.status == HitStatus.open and ended is not None

    assert wait_until(next_hit_open_and_answered_hit_ended)
    stubber.assert_no_pending_responses()


def test_submitting_twice_stores_one_turn_and_finishes_on_mturk_again(mturk_settings, mturk_web, published, stubber,
                                                                      mturk_celery):
    url = page_url(mturk_settings, published, **accept_ids())
    not_submitted(stubber, ASG1)
    hit_state(stubber, HIT1, pending=1)
    token = form_token(mturk_web.get(url).get_data(as_text=True))
    not_submitted(stubber, ASG1)
    hit_state(stubber, HIT1, pending=1)
    expect_create_hit(stubber, published + 1, "teacher", mturk_id("3HIT", 2))
    stubber.add_response("update_expiration_for_hit", {}, {"HITId": HIT1, "ExpireAt": ANY})
    first = mturk_web.post(url, data={**STUDENT_ANSWERS, "turkflow_form": token})
    assert first.status_code == 200

    def chained():
        with session_scope(mturk_settings.database_url) as s:
            return s.exec(select(Event).where(Event.kind == "hit_expired")).first() is not None

    assert wait_until(chained)
    stubber.add_response("get_assignment", {"Assignment": {  # by now the worker finished on MTurk too
        "AssignmentId": ASG1, "WorkerId": WORKER1, "HITId": HIT1, "AssignmentStatus": "Submitted"}},
        {"AssignmentId": ASG1})
    second = mturk_web.post(url, data={**STUDENT_ANSWERS, "turkflow_form": token})  # other text: a 409
    assert second.status_code == 200 and "externalSubmit" in second.get_data(as_text=True)
    assert [t.text for t in stored(mturk_settings)[1]] == ["What comes next?"]
    with session_scope(mturk_settings.database_url) as s:
        assert len(s.exec(select(Hit)).all()) == 2  # the next turn opened once
    stubber.assert_no_pending_responses()


def test_a_forged_assignment_for_a_hit_nobody_holds_is_refused_and_nothing_is_stored(mturk_settings, mturk_web,
                                                                                    published, stubber):
    forged = accept_ids(assignment=mturk_id("3FORGED", 1), worker="AFORGER")
    not_submitted(stubber, mturk_id("3FORGED", 1))
    hit_state(stubber, HIT1, pending=0)
    page = mturk_web.get(page_url(mturk_settings, published, **forged))
    assert page.status_code == 403 and "no assignment in progress" in page.get_data(as_text=True)
    post = mturk_web.post(page_url(mturk_settings, published, **forged), data={**STUDENT_ANSWERS, "turkflow_form": "x"})
    assert post.status_code == 403  # no form token of ours: refused before asking MTurk
    assert stored(mturk_settings) == ([], [], [])
    stubber.assert_no_pending_responses()


def test_a_form_issued_to_one_worker_cannot_submit_as_another(mturk_settings, mturk_web, published, stubber):
    not_submitted(stubber, ASG1)
    hit_state(stubber, HIT1, pending=1)
    token = form_token(mturk_web.get(page_url(mturk_settings, published, **accept_ids())).get_data(as_text=True))
    for ids in (accept_ids(worker="AOTHERWORKER"), accept_ids(assignment=mturk_id("3ASG", 9))):
        post = mturk_web.post(page_url(mturk_settings, published, **ids),
                              data={**STUDENT_ANSWERS, "turkflow_form": token})
        assert post.status_code == 403 and "another assignment or worker" in post.get_data(as_text=True)
    tampered = dict(accept_ids(), hitId=mturk_id("3HIT", 5))
    assert mturk_web.post(page_url(mturk_settings, published, **tampered),
                          data={**STUDENT_ANSWERS, "turkflow_form": token}).status_code == 403
    assignments, turns, workers = stored(mturk_settings)
    assert [a.external_id for a in assignments] == [ASG1] and turns == []
    assert [w.external_id for w in workers] == [WORKER1]
    stubber.assert_no_pending_responses()


def test_answers_go_to_mturk_sites_only(mturk_settings, mturk_web, published, stubber):
    elsewhere = dict(accept_ids(), turkSubmitTo="https://collector.example.com")
    page = mturk_web.get(page_url(mturk_settings, published, **elsewhere))
    assert page.status_code == 403 and "turkSubmitTo" in page.get_data(as_text=True)
    assert stored(mturk_settings) == ([], [], [])
    stubber.assert_no_pending_responses()


def test_a_refused_answer_names_the_field_and_stores_nothing(mturk_settings, mturk_web, published, stubber):
    url = page_url(mturk_settings, published, **accept_ids())
    for _ in range(2):
        not_submitted(stubber, ASG1)
        hit_state(stubber, HIT1, pending=1)
    token = form_token(mturk_web.get(url).get_data(as_text=True))
    refused = mturk_web.post(url, data={"intent": "shout", "response": "Hello", "turkflow_form": token})
    assert refused.status_code == 400
    text = refused.get_data(as_text=True)
    assert 'data-error-field="intent"' in text and form_token(text) == token  # the worker can fix and resubmit
    assignments, turns, _ = stored(mturk_settings)
    assert [a.status for a in assignments] == [AssignmentStatus.accepted] and turns == []
    stubber.assert_no_pending_responses()


def test_a_database_taking_no_writes_answers_503_keeps_the_typed_text_and_stores_it_on_the_next_submit(
        mturk_settings, mturk_web, published, stubber):
    url = page_url(mturk_settings, published, **accept_ids())
    for _ in range(3):
        not_submitted(stubber, ASG1)
        hit_state(stubber, HIT1, pending=1)
    token = form_token(mturk_web.get(url).get_data(as_text=True))
    form = {**STUDENT_ANSWERS, "response": "What comes <next> & after?", "turkflow_form": token}
    with read_only(mturk_settings):
        shown = mturk_web.post(url, data=form)
        assert shown.status_code == 503 and int(shown.headers["Retry-After"]) > 0
        text = shown.get_data(as_text=True)
        assert "What comes &lt;next&gt; &amp; after?" in text and form_token(text) == token  # sent again as it is
    assert [t.text for t in stored(mturk_settings)[1]] == []

    done = mturk_web.post(url, data=form)
    assert done.status_code == 200 and "/mturk/externalSubmit" in done.get_data(as_text=True)
    assert [t.text for t in stored(mturk_settings)[1]] == ["What comes <next> & after?"]
    stubber.assert_no_pending_responses()


def test_a_forged_page_link_is_refused(mturk_web, published, stubber):
    assert mturk_web.get("/mturk/turn?h=forged&assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE").status_code == 403
    stubber.assert_no_pending_responses()


def test_a_returned_assignment_cannot_come_back_to_the_turn(mturk_settings, mturk_web, published, stubber):
    url = page_url(mturk_settings, published, **accept_ids())
    not_submitted(stubber, ASG1)
    hit_state(stubber, HIT1, pending=1)
    assert mturk_web.get(url).status_code == 200
    with session_scope(mturk_settings.database_url) as s:
        lifecycle.abandon_assignment(s, s.exec(select(Assignment)).one(), "returned on MTurk")
    page = mturk_web.get(url)  # known and closed: refused without asking MTurk
    assert page.status_code == 409 and "return the HIT" in page.get_data(as_text=True)
    stubber.assert_no_pending_responses()
