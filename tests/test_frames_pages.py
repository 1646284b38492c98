"""Frames' pages over HTTP, on both databases: the user's goal page and the wizard's search page (HTML without
scripts, and JSON), searches in the turn, submitting a turn, the end-of-dialog questions shown on the
dashboard, and everything refused: a 4xx naming the field, nothing stored."""

from __future__ import annotations

import pytest
from markupsafe import escape
from sqlmodel import select

from tests.test_dashboard import sign_in
from tests.test_frames_dialog import domain_copy, launch_frames
from tests.test_star_dialog import launch_star
from tests.test_star_pages import act, send, star_worker, stored, take
from tests.test_worker_pages import JSON
from turkflow.db import session_scope
from turkflow.models import Conversation, DialogEvent, Turn, TurnStatus
from turkflow.requesters import create_requester

CHEAP = {"constraints": {"origin": "Boston", "price": {"at_most": 300}}}  # nothing is that cheap


@pytest.fixture
def frames(app, settings, providers, tmp_path):
    """A Frames dialog (suggestions always shown) whose user opened it; a wizard holds the second turn."""
    launch_frames(settings, providers, domain=domain_copy(tmp_path), success=1.0)
    user, wizard = star_worker(app, settings, "user"), star_worker(app, settings, "wizard")
    send(user, take(user), settings, providers, action="utter", text="Hi, a trip from Boston, please.")
    return user, wizard, take(wizard)


def goal(settings):
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation)).first().scenario


# ---- the pages ----------------------------------------------------------------------------------------


def test_the_user_page_shows_the_goal_and_never_the_database(app, settings, providers, tmp_path):
    launch_frames(settings, providers, domain=domain_copy(tmp_path), success=0.0)
    user = star_worker(app, settings, "user")
    page = take(user)
    assert page.startswith("/frames/turn/")
    html = user.get(page).get_data(as_text=True)
    instructions = goal(settings)["instructions"]
    for line in instructions.splitlines():
        assert line in html
    assert 'id="search-form"' not in html and 'name="complete"' in html
    data = user.get(page, headers=JSON).get_json()
    assert data["frames"] == {"user": {"goal": {
        "instructions": instructions, "kind": goal(settings)["kind"], "character": goal(settings)["character"],
        "personality": goal(settings)["personality"]}}}


def test_the_wizard_page_has_a_search_form_over_every_searchable_field_and_the_sort(frames, settings):
    _, wizard, page = frames
    html = wizard.get(page).get_data(as_text=True)
    assert 'id="search-form"' in html and 'name="kb-origin"' in html and '<option value="Boston">' in html
    assert 'name="kb-price.at_least"' in html and 'name="kb-departure.at_most"' in html
    assert 'type="date" name="kb-departure.at_least"' in html and 'name="kb-breakfast"' in html
    assert 'name="kb-hotel"' not in html  # a column, not a search field
    assert '<option value="price" selected>' in html and "Hi, a trip from Boston, please." in html
    assert goal(settings)["instructions"].splitlines()[0] not in html  # the wizard does not see the goal
    data = wizard.get(page, headers=JSON).get_json()["frames"]["wizard"]
    assert [f["name"] for f in data["form"]] == [
        "origin", "destination", "departure", "return", "duration", "price", "seat", "category", "max_adults",
        "max_children", "breakfast", "wifi", "spa"]
    assert data["sort"] == {"field": "price", "descending": False} and data["searches"] == []


def test_a_search_without_scripts_shows_up_to_ten_results_sorted_as_asked(frames, settings):
    _, wizard, page = frames
    searched = wizard.post(f"{page}/action", data={"action": "search", "kb-origin": "Boston",
                                                   "kb-price.at_least": "", "kb-price.at_most": "",
                                                   "sort": "price", "descending": "yes"})
    assert searched.status_code == 303 and searched.headers["Location"].endswith(f"{page}#searches")
    data = wizard.get(page, headers=JSON).get_json()["frames"]["wizard"]
    (shown,) = data["searches"]
    assert shown["conditions"] == ["Origin is Boston"] and shown["total"] > 10 and len(shown["items"]) == 10
    prices = [item["price"] for item in shown["items"]]
    assert prices == sorted(prices, reverse=True) and {i["origin"] for i in shown["items"]} == {"Boston"}
    html = wizard.get(page).get_data(as_text=True)
    assert f"{shown['total']} items match; the first 10 are shown" in html
    assert f"<td>{shown['items'][0]['hotel']}</td>" in html
    assert data["this_turn"] == [{"action": "search", "text": "", "conditions": ["Origin is Boston"]}]


def test_a_search_that_finds_nothing_offers_a_relaxed_suggestion(frames, settings):
    _, wizard, page = frames
    answered = act(wizard, page, "search", **CHEAP)
    assert answered.status_code == 200, answered.get_data(as_text=True)
    body = answered.get_json()
    assert [e["action"] for e in body["logged"]] == ["search", "search_results", "suggestions"]
    (shown,) = body["wizard"]["searches"]
    assert shown["total"] == 0 and shown["offered"]
    (suggestion,) = shown["suggestions"]
    assert suggestion["text"].startswith("Price ($) at most ") and " instead of 300: " in suggestion["text"]
    html = wizard.get(page).get_data(as_text=True)
    assert "Nothing matches." in html and "You could suggest instead:" in html and suggestion["text"] in html


def test_the_wizards_reply_closes_the_turn_once_however_often_it_is_sent(frames, settings, providers):
    _, wizard, page = frames
    act(wizard, page, "search", **CHEAP)
    first = wizard.post(page, json={"action": "utter", "text": "Nothing under $300, sorry."}, headers=JSON)
    assert first.status_code == 200 and first.get_json()["created"] and first.get_json()["survey_url"] is None
    again = wizard.post(page, json={"action": "utter", "text": "Nothing under $300, sorry."}, headers=JSON)
    assert again.status_code == 200 and not again.get_json()["created"]
    assert again.get_json()["turn_id"] == first.get_json()["turn_id"]
    with session_scope(settings.database_url) as s:
        said = s.exec(select(DialogEvent).where(DialogEvent.action == "utter")).all()
        assert len(said) == 2  # the user's and this reply, once
        turn = s.get(Turn, first.get_json()["turn_id"])
        assert (turn.label, turn.text, turn.answers["action"]) == ("utter", "Nothing under $300, sorry.", "utter")
    assert wizard.get(page).status_code == 303  # submitted: back to the queue


def test_the_generic_turn_route_sends_the_page_here_and_takes_answers_that_agree_with_the_log(
        app, settings, providers):
    launch_frames(settings, providers)
    user = star_worker(app, settings, "user")
    hit_id = user.get("/queue", headers=JSON).get_json()["open"][0]["hit_id"]
    turn_url = user.post(f"/queue/take/{hit_id}", headers=JSON).get_json()["turn_url"]
    assert user.get(turn_url).headers["Location"].endswith(turn_url.replace("/turn/", "/frames/turn/"))
    refused = user.post(turn_url, data={"intent": "utter", "response": "Hello"}, headers=JSON)
    assert refused.status_code == 400 and refused.get_json()["field"] == "intent"  # nothing said yet
    act(user, turn_url.replace("/turn/", "/frames/turn/"), "utter", text="Hello there")
    differs = user.post(turn_url, data={"intent": "utter", "response": "Something else"}, headers=JSON)
    assert differs.status_code == 400 and differs.get_json()["field"] == "response"
    done = user.post(turn_url, data={"intent": "utter", "response": "Hello there"}, headers=JSON)
    assert done.status_code == 200, done.get_data(as_text=True)


# ---- refused --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, field", [
    ({"action": "search", "constraints": {"colour": "red"}}, "colour"),
    ({"action": "search", "constraints": {"price": "cheap"}}, "price"),
    ({"action": "search", "constraints": {"origin": {"at_most": "Boston"}}}, "origin"),
    ({"action": "search", "constraints": {"origin": "Bos\x00ton"}}, "origin"),
    ({"action": "search", "constraints": {"origin": ["Boston", "Dallas"]}}, "constraints.origin"),
    ({"action": "search", "constraints": [["origin", "Boston"]]}, "constraints"),
    ({"action": "search", "form": {"price.at_most": "1000", "price": "900"}}, "price"),
    ({"action": "search", "form": {"price.about": "1000"}}, "price"),
    ({"action": "search", "form": "origin=Boston"}, "form"),
    ({"action": "search", "form": {}, "constraints": {}}, "constraints"),
    ({"action": "search", "sort": "colour"}, "colour"),
    ({"action": "search", "sort": "breakfast"}, "sort"),
    ({"action": "search", "descending": "perhaps"}, "descending"),
    ({"action": "search", "limit": 1000}, "limit"),
    ({"action": "complete"}, "action"),
    ({"action": "search_results"}, "action"),
    ({"action": ["search"]}, "action"),
    ({"action": "utter", "text": "\x07bell"}, "text"),
    ({"action": "utter", "text": "x" * 2001}, "text"),
    ({"action": "utter", "text": {"nested": [1]}}, "text"),
])
def test_a_bad_action_is_a_400_naming_the_field_and_stores_nothing(frames, settings, body, field):
    _, wizard, page = frames
    before = stored(settings)
    refused = wizard.post(f"{page}/action", json=body, headers=JSON)
    assert refused.status_code == 400, refused.get_data(as_text=True)
    assert refused.get_json()["field"] == field
    assert stored(settings) == before


@pytest.mark.parametrize("body, field", [
    ({"action": "search"}, "action"),
    ({"action": "utter", "text": ""}, "text"),
    ({"action": "utter", "text": "bye", "complete": "yes"}, "complete"),
    ({"action": "utter", "text": "bye", "colour": "red"}, "colour"),
    ({"text": "no action"}, "text"),
    ({}, "action"),
])
def test_a_bad_submit_is_a_400_naming_the_field_and_stores_nothing(frames, settings, body, field):
    _, wizard, page = frames
    before = stored(settings)
    refused = wizard.post(page, json=body, headers=JSON)
    assert refused.status_code == 400, refused.get_data(as_text=True)
    assert refused.get_json()["field"] == field
    assert stored(settings) == before


def test_a_refused_form_shows_the_page_again_with_the_reason(frames, settings):
    _, wizard, page = frames
    refused = wizard.post(f"{page}/action", data={"action": "search", "kb-price.at_most": "cheap"})
    assert refused.status_code == 400
    html = refused.get_data(as_text=True)
    assert "price: expected a whole number" in html and 'id="search-form"' in html
    refused = wizard.post(page, data={"action": "utter", "text": "\x07 not stored"})
    assert refused.status_code == 400 and "control character" in refused.get_data(as_text=True)


def test_someone_elses_turn_forged_and_other_protocol_assignments_are_refused(frames, app, settings,
                                                                              providers):
    user, wizard, page = frames
    other_wizard = star_worker(app, settings, "wizard")
    before = stored(settings)
    for client in (other_wizard, user):
        assert client.get(page, headers=JSON).status_code == 403
        assert act(client, page, "search", **CHEAP).status_code == 403
        assert client.post(page, json={"action": "utter", "text": "hijack"}, headers=JSON).status_code == 403
    assert wizard.get("/frames/turn/Lforged", headers=JSON).status_code == 404
    assert app.test_client().get(page, headers=JSON).status_code == 403
    assert stored(settings) == before

    launch_star(settings, providers)  # a STAR turn is not shown on Frames' pages
    star_user = star_worker(app, settings, "user")
    star_page = take(star_user)
    assert star_page.startswith("/star/turn/")
    assert star_user.get(star_page.replace("/star/", "/frames/"), headers=JSON).status_code == 404


# ---- the end of the dialog ------------------------------------------------------------------------------


def test_the_user_ends_the_dialog_both_answer_the_questions_and_the_dashboard_shows_them(
        frames, app, settings, providers, client):
    user, wizard, page = frames
    act(wizard, page, "search", constraints={"origin": "Boston"})
    send(wizard, page, settings, providers, action="utter", text="I have trips from Boston from $900.")
    ended = send(user, take(user), settings, providers, action="utter", text="Perfect, bye!", complete="yes")
    conversation_id = goal_conversation(settings)
    assert ended["survey_url"] == f"/survey/{conversation_id}"

    asked = user.get(ended["survey_url"], headers=JSON).get_json()
    assert [(q["name"], q["kind"], q["options"]) for q in asked["questions"]] == [
        ("cooperativity", "rating", ["1", "2", "3", "4", "5"])]
    assert asked["shown"] is None  # the goal is the wizard's to judge
    assert 'id="survey-shown"' not in user.get(ended["survey_url"]).get_data(as_text=True)
    bad = user.post(ended["survey_url"], json={"cooperativity": "6"}, headers=JSON)
    assert bad.status_code == 400 and bad.get_json()["field"] == "cooperativity"
    assert user.post(ended["survey_url"], json={"cooperativity": "4"}, headers=JSON).get_json()["stored"]
    assert not user.post(ended["survey_url"], json={"cooperativity": "2"}, headers=JSON).get_json()["stored"]

    owed = wizard.get("/queue", headers=JSON).get_json()["surveys"]
    assert [s["conversation_id"] for s in owed] == [conversation_id]
    reached = wizard.get(f"/survey/{conversation_id}", headers=JSON).get_json()
    assert [q["name"] for q in reached["questions"]] == ["goal_reached"]
    with session_scope(settings.database_url) as s:
        goal = s.get(Conversation, conversation_id).scenario["instructions"]
    assert reached["shown"] == goal  # Frames showed the wizard the user's goal beside the question
    shown = wizard.get(f"/survey/{conversation_id}").get_data(as_text=True)
    assert escape(goal) in shown[shown.index('id="survey-shown"'):]
    assert wizard.post(f"/survey/{conversation_id}", data={"goal_reached": "yes"}, headers=JSON).get_json()[
        "stored"]

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    assert sign_in(client).status_code == 302
    html = client.get(f"/admin/conversations/{conversation_id}").get_data(as_text=True)
    answers = html[html.index('id="survey-answers"'):]
    assert "How cooperative was the assistant? (1: not at all, 5: very)</dt><dd>4" in answers
    assert "Do you think the user reached it?</dt><dd>yes" in answers
    with session_scope(settings.database_url) as s:
        conversation = s.get(Conversation, conversation_id)
        assert (conversation.status, conversation.end_reason) == ("completed", "user_complete")
        assert s.exec(select(Turn).where(Turn.status == TurnStatus.submitted)).all()[-1].label == "complete"


def goal_conversation(settings) -> int:
    with session_scope(settings.database_url) as s:
        return s.exec(select(Conversation.id)).first()


def test_a_wizard_whose_lease_ran_out_leaves_nothing_in_the_next_wizards_turn_or_the_export(frames, app,
                                                                                           settings):
    from datetime import timedelta

    from turkflow.dataset.export import ExportFilters
    from turkflow.protocols.frames.dialog import sgd_dialogues
    from turkflow.models import Hit, utcnow

    _, first, page = frames
    act(first, page, "search", **CHEAP)
    act(first, page, "utter", text="Never sent, my time ran out.")
    with session_scope(settings.database_url) as s:
        hit = s.exec(select(Hit).where(Hit.status == "open")).one()
        hit.lease_expires_at = utcnow() - timedelta(seconds=1)
        s.add(hit)
    second = star_worker(app, settings, "wizard")
    taken = take(second)
    assert first.post(page, json={}, headers=JSON).status_code == 409  # the turn went to someone else
    shown = second.get(taken, headers=JSON).get_json()["frames"]["wizard"]
    assert shown["this_turn"] == [] and len(shown["searches"]) == 1  # the dialog's searches stay visible
    act(second, taken, "search", constraints={"destination": "Lisbon"})
    assert second.post(taken, json={"action": "utter", "text": "Lisbon?"}, headers=JSON).status_code == 200
    with session_scope(settings.database_url) as s:
        (dialogue,) = list(sgd_dialogues(s, settings.worker_hash_key, ExportFilters()))
    assert [t["utterance"] for t in dialogue["turns"]] == ["Hi, a trip from Boston, please.", "Lisbon?"]
    assert dialogue["turns"][1]["frames"][0]["service_call"]["parameters"] == {"destination": "Lisbon"}


def test_a_turn_takes_at_most_frames_max_actions_searches_and_the_page_shows_the_searches_a_page_at_a_time(
        frames, settings):
    """600 searches in one turn made each answer 1.65 MB and the next wizard's page 8.2 MB (issue 35): one more
    than ``TURKFLOW_FRAMES_MAX_ACTIONS`` is a 400 naming the action, storing nothing, and the page shows the
    dialog's searches 20 at a time, newest first, with a link to the older ones."""
    _, wizard, page = frames
    settings.frames_max_actions = 23
    searches = [{"action": "search", "constraints": {"max_adults": {"at_least": n % 4 + 1}}} for n in range(23)]
    for search in searches:
        assert wizard.post(f"{page}/action", json=search, headers=JSON).status_code == 200
    before = stored(settings)
    refused = wizard.post(f"{page}/action", json=searches[0], headers=JSON)
    assert refused.status_code == 400 and refused.get_json()["field"] == "action", refused.get_json()
    assert "23 actions" in refused.get_json()["error"] and stored(settings) == before
    shown = wizard.get(page, headers=JSON).get_json()["frames"]["wizard"]
    assert len(shown["searches"]) == 20 and shown["searches_total"] == 23 and shown["older_searches"] == 20
    html = wizard.get(page).get_data(as_text=True)
    assert html.count('class="search-entry"') == 20 and f'href="{page}?older=20#searches"' in html
    older = wizard.get(f"{page}?older=20", headers=JSON).get_json()["frames"]["wizard"]
    assert len(older["searches"]) == 3 and older["older_searches"] is None and older["newer_searches"] == 0
    assert [s["event_id"] for s in shown["searches"] + older["searches"]] == sorted(
        [s["event_id"] for s in shown["searches"] + older["searches"]], reverse=True)
    assert wizard.post(page, json={"action": "utter", "text": "I found rooms for you."}, headers=JSON).status_code == 200
