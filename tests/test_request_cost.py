"""What the turn pages' cheaper requests must still do: the signed-in worker is read afresh on every request
(a block or a finished quiz counts at once, an unknown or expired cookie is refused), and every submitted
turn is queued for Celery once, each message through the same broker client."""

from __future__ import annotations

import base64
import json

from redis import Redis

from tests.test_worker_pages import FIRST_STUDENT_ANSWERS, JSON, joined, open_turns, take_first
from tests.test_pipeline import launch
from turkflow.db import session_scope
from turkflow.models import Worker
from turkflow.quality import monitor


def test_a_worker_blocked_after_signing_in_is_refused_the_next_take_and_sees_it_on_the_queue(app, settings,
                                                                                          providers):
    launch(settings, providers, conversations=2)
    student = joined(app, settings, "student")
    hit_id = open_turns(student)[0]["hit_id"]
    with session_scope(settings.database_url) as s:
        monitor.block_worker(s, s.get(Worker, student.worker.id), permanent=False, actor="requester", reason="test")

    refused = student.post(f"/queue/take/{hit_id}", headers=JSON)
    assert refused.status_code == 403
    assert "blocked" in refused.get_json()["error"]
    listing = student.get("/queue", headers=JSON).get_json()
    assert (listing["worker"]["status"], listing["open"]) == ("temporarily_blocked", [])


def test_a_worker_onboarded_after_signing_in_may_take_turns_at_once(app, settings, providers):
    launch(settings, providers)
    student = joined(app, settings, "student")
    with session_scope(settings.database_url) as s:
        s.get(Worker, student.worker.id).onboarded = False
    assert student.get("/queue", headers=JSON).get_json()["worker"]["onboarded"] is False
    assert open_turns(student) == []

    with session_scope(settings.database_url) as s:
        s.get(Worker, student.worker.id).onboarded = True
    assert student.get("/queue", headers=JSON).get_json()["worker"]["onboarded"] is True
    assert take_first(student).startswith("/turn/")


def test_a_worker_cookie_naming_nobody_or_altered_is_refused_on_every_turn_route(app, settings, providers):
    launch(settings, providers)
    student = joined(app, settings, "student")
    hit_id = open_turns(student)[0]["hit_id"]
    cookie = app.config["WORKER_COOKIE"]
    token = student.get_cookie(cookie).value
    with session_scope(settings.database_url) as s:
        s.get(Worker, student.worker.id).external_id = "local-somebody-else"
    gone = student.post(f"/queue/take/{hit_id}", headers=JSON)
    assert (gone.status_code, gone.get_json()["error"]) == (
        403, "this browser has not joined yet: open the personal invite link you were given")

    other = joined(app, settings, "student")
    other.set_cookie(cookie, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    for response in (other.get("/queue", headers=JSON), other.post(f"/queue/take/{hit_id}", headers=JSON),
                     other.post("/turn/nothing", json={}, headers=JSON)):
        assert response.status_code == 403, response.get_data(as_text=True)


def test_every_submitted_turn_is_queued_once_for_the_next_turn(app, settings, providers, redis_url):
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    launch(settings, providers, conversations=3)
    student = joined(app, settings, "student")
    submitted = []
    for _ in range(3):
        answer = student.post(take_first(student), json=FIRST_STUDENT_ANSWERS, headers=JSON)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        submitted.append(answer.get_json()["turn_id"])

    messages = [json.loads(raw) for raw in broker.lrange("turns", 0, -1)]
    assert {message["headers"]["task"] for message in messages} == {"workers.tasks.turn_submitted"}
    assert sorted(json.loads(base64.b64decode(message["body"]))[0][0] for message in messages) == sorted(submitted)
    broker.flushdb()
    broker.close()
