"""MEEP's pages over HTTP, on both databases: the user's and the agent's turn pages, every click a POST (JSON,
and the forms' slots in MEEP's names), sending the message, and everything refused: a 4xx naming the field,
nothing stored."""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from tests.test_meep_dialog import ASK, FOUND, QUERY, launch_meep
from tests.test_star_pages import send, star_worker, take
from tests.test_worker_pages import JSON
from turkflow.db import session_scope
from turkflow.models import DialogEvent, SurveyAnswer, Turn, TurnStatus


def stored(settings):
    """What a refused request must leave as it was."""
    with session_scope(settings.database_url) as s:
        return (s.exec(select(func.count()).select_from(DialogEvent)).one(),
                s.exec(select(func.count()).select_from(Turn).where(Turn.status == TurnStatus.submitted)).one())


def click(client, page, action, **fields):
    return client.post(f"{page}/action", json={"action": action, **fields}, headers=JSON)


@pytest.fixture
def meep(app, settings, providers):
    """A trip whose user asked for the café; an agent holds the second turn."""
    launch_meep(settings, providers)
    user, agent = star_worker(app, settings, "user"), star_worker(app, settings, "wizard")
    page = take(user)
    assert page.startswith("/meep/turn/")  # the queue's turn page sends a MEEP turn to MEEP's page
    send(user, page, settings, providers, text=ASK)
    return user, agent, take(agent)


def test_the_user_page_shows_the_goal_and_never_the_knowledge_base(app, settings, providers):
    launch_meep(settings, providers)
    user = star_worker(app, settings, "user")
    page = take(user)
    html = user.get(page).get_data(as_text=True)
    assert "You want a coffee at Bluebird Coffee" in html and 'name="text"' in html and 'name="complete"' in html
    data = user.get(page, headers=JSON).get_json()
    assert data["meep"] == {"user": {"goal": "You want a coffee at Bluebird Coffee, the one on Main Street in "
                                             "Santa Monica.", "start": data["meep"]["user"]["start"],
                                     "destination": None}, "tiles": ""}
    assert "find_place" not in html and "agent" not in data["meep"]


def test_the_agent_page_shows_clickable_words_apis_results_and_templates(meep):
    _, agent, page = meep
    html = agent.get(page).get_data(as_text=True)
    assert 'data-ref="u1_7"' in html and ">Bluebird</button>" in html  # the user's words, clickable
    assert 'name="arg-query"' in html and 'data-ref="source.latitude"' in html  # API slots and the start
    assert 'name="filler-3"' in html and 'id="send"' in html and "disabled" in html  # nothing picked yet
    data = agent.get(page, headers=JSON).get_json()["meep"]["agent"]
    assert data["last_message"] == 1 and data["messages"][0]["tokens"][7] == {"index": 7, "text": "Bluebird"}
    assert [a["name"] for a in data["apis"]][:2] == ["find_place", "places_nearby"]
    assert [r["id"] for r in data["panel"]] == ["source"] and data["pending"] == [] and not data["sent"]
    assert data["templates"][1] == {"id": "t2", "text": "There is a {} in {}.", "parts": ["There is a ", " in ", "."],
                                    "words": [{"index": 0, "text": "There"}, {"index": 1, "text": "is"},
                                              {"index": 2, "text": "a"}, {"index": 5, "text": "in"},
                                              {"index": 8, "text": "."}]}


def test_the_agent_clicks_an_api_call_and_templates_and_sends_them(meep, settings, providers):
    _, agent, page = meep
    called = click(agent, page, "call_api", api="find_place", arguments=QUERY)
    assert called.status_code == 200, called.get_data(as_text=True)
    call, answer = called.get_json()["logged"]
    assert call["Arguments"]["query"]["value"] == "Bluebird Coffee on Main Street"
    assert answer["Results"][0]["fields"]["address"] == "2410 Main Street"
    assert called.get_json()["agent"]["panel"][1]["id"] == "v1"
    picked = click(agent, page, "pick_template", **FOUND).get_json()
    assert picked["agent"]["message"].startswith("I found Bluebird Coffee on Main Street. It is")
    sent = send(agent, page, settings, providers, action="send")
    assert sent["created"] and sent["text"] == picked["agent"]["message"] and sent["survey_url"] is None
    again = agent.post(page, json={"action": "send"}, headers=JSON)  # a double send stores once
    assert again.status_code == 200 and not again.get_json()["created"]
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(DialogEvent).where(DialogEvent.action == "send")).one() == 1
        assert s.get(Turn, sent["turn_id"]).label == "send"


def test_the_forms_post_clicks_in_meep_names_and_come_back_to_the_page(meep, settings, providers):
    _, agent, page = meep
    form = {"action": "call_api", "api": "find_place", "arg-query": "u1_7 u1_8", "arg-latitude": "source.latitude",
            "arg-longitude": "source.longitude"}
    called = agent.post(f"{page}/action", data=form)
    assert called.status_code == 303 and called.headers["Location"].endswith("#message")
    picked = agent.post(f"{page}/action", data={"action": "pick_template", "template": "t6", "filler-0": "v1.name"})
    assert picked.status_code == 303
    html = agent.get(page).get_data(as_text=True)
    assert "Do you mean Bluebird Coffee?" in html and 'data-ref="v1.address"' in html
    refused = agent.post(f"{page}/action", data={"action": "pick_template", "template": "t2",
                                                  "filler-0": "u1_7", "filler-1": "Santa Monica"})
    assert refused.status_code == 400 and "fillers[1]" in refused.get_data(as_text=True)
    sent = agent.post(page, data={"action": "send"})
    assert sent.status_code == 303 and "/queue" in sent.headers["Location"]
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Turn.text).where(Turn.status == TurnStatus.submitted, Turn.role == "wizard")).one() \
            == "Do you mean Bluebird Coffee?"


@pytest.mark.parametrize(("action", "fields", "field"), [
    ("pick_template", {"template": "t6", "fillers": ["Bluebird Coffee"]}, "fillers[0]"),  # free text
    ("pick_template", {"template": "t2", "fillers": [{"tokens": [7]}, {"tokens": [400]}]}, "fillers[1]"),
    ("pick_template", {"template": "t2", "fillers": [{"tokens": [7]}]}, "fillers"),
    ("pick_template", {"template": {"$ne": 1}, "fillers": []}, "template"),
    ("call_api", {"api": "find_place", "arguments": {**QUERY, "query": "Bluebird"}}, "arguments.query"),
    ("call_api", {"api": "find_place", "arguments": {**QUERY, "latitude": {"result": "v9", "field": "x"}}},
     "arguments.latitude"),
    ("call_api", {"api": "rm -rf", "arguments": QUERY}, "api"),
    ("utter", {"text": "I would rather type"}, "action"),
    ("send", {"text": "typed"}, "text"),
])
def test_hostile_clicks_are_refused_naming_the_field_and_store_nothing(meep, settings, action, fields, field):
    _, agent, page = meep
    before = stored(settings)
    refused = click(agent, page, action, **fields)
    assert refused.status_code == 400, refused.get_data(as_text=True)
    assert refused.get_json()["field"] == field
    assert stored(settings) == before


def test_free_text_from_the_agent_is_refused_at_submit_too(meep, settings):
    _, agent, page = meep
    before = stored(settings)
    for body in ({"action": "utter", "text": "Here you go"}, {"text": "Here you go"}, {"response": "hi"}):
        refused = agent.post(page, json=body, headers=JSON)
        assert refused.status_code == 400 and refused.get_json()["field"] in ("action", "text", "response")
    assert agent.post(page, json={"action": "send"}, headers=JSON).get_json()["field"] == "template"
    assert agent.post(page, data="[1, 2]", content_type="application/json", headers=JSON).status_code == 400
    assert stored(settings) == before


def test_someone_elses_turn_is_forbidden(meep, app, settings):
    user, _, page = meep
    stranger = star_worker(app, settings, "wizard")
    before = stored(settings)
    for client in (user, stranger):
        assert client.get(page, headers=JSON).status_code == 403
        assert click(client, page, "call_api", api="find_place", arguments=QUERY).status_code == 403
        assert client.post(page, json={"action": "send"}, headers=JSON).status_code == 403
    assert stored(settings) == before


def test_the_user_who_ends_the_dialog_without_a_drive_goes_back_to_the_queue(meep, settings, providers):
    user, agent, page = meep
    click(agent, page, "call_api", api="find_place", arguments=QUERY)
    click(agent, page, "pick_template", **FOUND)
    send(agent, page, settings, providers, action="send")
    last = take(user)
    ended = send(user, last, settings, providers, text="Never mind, thanks!", complete="yes")
    assert ended["survey_url"] is None  # MEEP asks no end-of-dialog question: the verdict is on the map
    with session_scope(settings.database_url) as s:
        assert s.exec(select(SurveyAnswer.answer)).all() == []


def test_after_start_driving_the_user_page_shows_the_map_and_the_verdict_ends_the_dialog(
        meep, app, settings, providers):
    user, agent, page = meep
    click(agent, page, "call_api", api="find_place", arguments=QUERY)
    click(agent, page, "call_api", api="start_driving", arguments={
        "latitude": {"result": "v1", "field": "latitude"}, "longitude": {"result": "v1", "field": "longitude"}})
    shown = agent.get(page, headers=JSON).get_json()["meep"]["agent"]
    assert shown["driving"] == {"latitude": 34.0016, "longitude": -118.4825}
    assert click(agent, page, "add_template", words=[{"message": 1, "token": 7}]).status_code == 400  # driving
    click(agent, page, "pick_template", template="t11", fillers=[{"result": "v1", "field": "name"}])
    send(agent, page, settings, providers, action="send")
    last = take(user)
    response = user.get(last)
    html = response.get_data(as_text=True)
    assert 'id="map"' in html and 'data-lat="34.0016"' in html and 'data-lng="-118.4825"' in html
    assert "vendor/leaflet/leaflet.js" in html and 'name="text"' not in html
    policy = response.headers["Content-Security-Policy"]
    assert "img-src 'self' data:;" in policy and "script-src 'self'" in policy and "default-src 'self'" in policy
    assert user.post(last, json={"text": "hello"}, headers=JSON).status_code == 400  # only a verdict now
    ended = send(user, last, settings, providers, approved="yes")
    assert ended["survey_url"] is None and ended["text"] == "Approved the destination"


def test_the_tile_url_is_the_only_other_origin_the_page_may_load_images_from():
    from turkflow.web.protocols.meep import content_security_policy
    assert "img-src 'self' data: https://*.tile.example.org;" in content_security_policy(
        "https://{s}.tile.example.org/{z}/{x}/{y}.png")
    assert "img-src 'self' data: https://tiles.example.org;" in content_security_policy(
        "https://tiles.example.org/{z}/{x}/{y}.png")


def _conversation(settings) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Turn.conversation_id)).first()
