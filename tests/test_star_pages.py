"""STAR's pages over HTTP, on both databases: the wizard's and the user's turn pages, their in-turn actions,
submitting a turn (its answers read off its events), the flow-chart image, the end-of-dialog questions, and
everything refused: a 4xx naming the field, nothing stored."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from urllib.parse import urlsplit

import pytest
from sqlmodel import func, select

from tests.conftest import SHARED_DATA
from tests.test_star_dialog import SAMPLE, launch_star
from tests.test_worker_pages import JSON
from turkflow import invites, pipeline
from turkflow.db import session_scope
from turkflow.models import Conversation, DialogEvent, SurveyAnswer, Task, Turn, TurnStatus, Worker

_names = itertools.count(1)


def star_worker(app, settings, role, stage=1):
    """A local STAR worker of the role who passed the stage (2 unlocks multi-task dialogs), signed in; POSTs
    carry the CSRF token, as the pages' forms do."""
    with session_scope(settings.database_url) as s:
        worker = Worker(external_id=f"local-{role}-{next(_names)}", role=role, onboarded=True, stage=stage)
        s.add(worker)
        s.flush()
        url = invites.invite_url(settings.secret_key, settings.public_url, worker)
    client = app.test_client()
    assert client.get(urlsplit(url).path).status_code == 303
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/queue", headers=JSON).get_json()["csrf_token"]
    client.worker = worker
    return client


def take(client):
    """Take the first open turn; returns its STAR page's path (the queue's turn page sends it there)."""
    hit_id = client.get("/queue", headers=JSON).get_json()["open"][0]["hit_id"]
    turn_url = client.post(f"/queue/take/{hit_id}", headers=JSON).get_json()["turn_url"]
    moved = client.get(turn_url)
    assert moved.status_code == 303
    return moved.headers["Location"]


def act(client, page, action, **fields):
    return client.post(f"{page}/action", json={"action": action, **fields}, headers=JSON)


def send(client, page, settings, providers, **body):
    """Submit the turn (JSON) and open the next one, as the Celery task would."""
    response = client.post(page, json=body, headers=JSON)
    assert response.status_code == 200, response.get_data(as_text=True)
    with session_scope(settings.database_url) as s:
        conversation_id = s.get(Turn, response.get_json()["turn_id"]).conversation_id
    pipeline.open_next_turn(settings, providers, conversation_id)
    return response.get_json()


def events(settings):
    with session_scope(settings.database_url) as s:
        return [(e.agent, e.action) for e in s.exec(select(DialogEvent).order_by(DialogEvent.id))]


def stored(settings):
    """What a refused request must leave as it was."""
    with session_scope(settings.database_url) as s:
        return tuple(s.exec(select(func.count()).select_from(model)).one()
                     for model in (DialogEvent, SurveyAnswer)) + (
            s.exec(select(func.count()).select_from(Turn).where(Turn.status == TurnStatus.submitted)).one(),)


@pytest.fixture
def star(app, settings, providers):
    """A library dialog whose user opened it; a wizard holds the second turn."""
    launch_star(settings, providers)
    user, wizard = star_worker(app, settings, "user"), star_worker(app, settings, "wizard")
    send(user, take(user), settings, providers, action="utter", text="Hi, I'd like to borrow a novel.")
    return user, wizard, take(wizard)


NOVEL_QUERY = {"api": "library_search", "form": {"Genre": "Novel", "Language": "English"}}


# ---- the wizard's page --------------------------------------------------------------------------------


def test_the_wizard_page_shows_the_tasks_chart_knowledge_base_form_and_ranked_replies(star, settings):
    _, wizard, page = star
    html = wizard.get(page).get_data(as_text=True)
    assert 'id="kb-form"' in html and 'name="kb-Genre"' in html and '<option value="Poetry">' in html
    assert 'id="chart"' in html and "library ask genre" in html
    assert "Hello, this is the library desk." in html  # the chart's start is the first suggestion
    data = wizard.get(page, headers=JSON).get_json()["star"]["wizard"]
    assert [f["name"] for f in data["form"]] == ["Genre", "Language", "Title"]
    assert data["form"][0]["required"] and data["form"][0]["kind"] == "choice"
    assert data["suggestions"][0]["label"] == "hello" and data["kb_log"] == []
    assert data["chart"]["current"] is None and data["tasks"] == [
        {"name": "library_search", "title": "library_search", "open": True}]


def test_a_query_is_answered_at_once_and_fills_the_suggestions_with_the_item(star, settings):
    _, wizard, page = star
    answered = act(wizard, page, "query", **NOVEL_QUERY)
    assert answered.status_code == 200, answered.get_data(as_text=True)
    body = answered.get_json()
    query, returned = body["logged"]
    assert query["Constraints"] == [{"Genre": '"Novel"'}, {"Language": '"English"'}]
    item = returned["Item"]
    assert item["Genre"] == "Novel" and returned["TotalItems"] >= 1
    inform = next(s for s in body["wizard"]["suggestions"] if s["label"] == "library_inform_book")
    assert inform["text"] == f"{item['Title']} by {item['Author']} is on floor {item['Floor']}."
    assert body["wizard"]["kb_log"][0]["item"]["Title"] == item["Title"]
    html = wizard.get(page).get_data(as_text=True)
    assert item["Author"] in html and "Item 1 of" in html

    picked = send(wizard, page, *_sp(settings), action="pick_suggestion", label="library_inform_book",
                  options=["library_inform_book", "anything_else"])
    assert picked["created"] and picked["survey_url"] is None
    assert picked["text"] == inform["text"]  # a pick sent without text: the client learns what was stored
    with session_scope(settings.database_url) as s:
        turn = s.get(Turn, picked["turn_id"])
        assert (turn.label, turn.text) == ("pick_suggestion", inform["text"])
        pick = s.exec(select(DialogEvent).where(DialogEvent.action == "pick_suggestion")).one()
        assert pick.data["ActionLabelOptions"] == ["library_inform_book", "anything_else"]


def test_the_wizard_sees_three_suggestions_as_star_did_unless_the_batch_asks_for_more_and_the_shown_are_exported(
        star, settings):
    from turkflow.models import Batch

    _, wizard, page = star
    suggested = act(wizard, page, "request_suggestions", text="which genre")
    assert suggested.status_code == 200, suggested.get_data(as_text=True)
    shown = [s["label"] for s in suggested.get_json()["wizard"]["suggestions"]]
    assert len(shown) == 3
    assert len(re.findall(r'name="label" value=', wizard.get(page).get_data(as_text=True))) == 3
    with session_scope(settings.database_url) as s:
        batch = s.exec(select(Batch)).one()
        assert batch.suggestions_shown == 3 == settings.star_suggestions
        batch.suggestions_shown = 5
        s.add(batch)
    again = act(wizard, page, "request_suggestions", text="which genre")
    five = [s["label"] for s in again.get_json()["wizard"]["suggestions"]]
    assert len(five) == 5 and five[:3] == shown  # the same ranking, more of it
    picked = send(wizard, page, *_sp(settings), action="pick_suggestion", label=five[0])
    with session_scope(settings.database_url) as s:
        pick = s.get(DialogEvent, s.exec(select(func.max(DialogEvent.id)).where(
            DialogEvent.action == "pick_suggestion")).one())
        assert pick.data["ActionLabelOptions"] == five and picked["created"]


def _sp(settings):
    from turkflow.hits import registry

    return settings, registry.providers(settings)


def test_the_no_script_forms_query_suggest_and_send_a_custom_reply(star, settings, providers):
    _, wizard, page = star
    queried = wizard.post(f"{page}/action", data={"action": "query", "api": "library_search",
                                                  "kb-Genre": "Poetry", "kb-Language": "", "kb-Title": ""})
    assert queried.status_code == 303 and queried.headers["Location"].startswith(page)
    assert events(settings)[-2:] == [("Wizard", "query"), ("KnowledgeBase", "return_item")]
    suggested = wizard.post(f"{page}/action", data={"action": "request_suggestions", "text": "which language"})
    assert suggested.status_code == 303 and "draft=which+language" in suggested.headers["Location"]
    html = wizard.get(suggested.headers["Location"]).get_data(as_text=True)
    assert html.index("In which language would you like") < html.index("Enjoy your reading")
    sent = wizard.post(page, data={"action": "utter", "text": "We have poems; in which language?"})
    assert sent.status_code == 303 and "/queue?submitted=" in sent.headers["Location"]
    with session_scope(settings.database_url) as s:
        utter = s.exec(select(DialogEvent).where(DialogEvent.agent == "Wizard",
                                                 DialogEvent.action == "utter")).one()
        assert utter.data == {"Text": "We have poems; in which language?"}


def test_tabs_switch_the_open_task_of_a_multi_task_dialog(app, settings, providers):
    launch_star(settings, providers, tasks_per_dialog=2)
    user, wizard = star_worker(app, settings, "user", stage=2), star_worker(app, settings, "wizard", stage=2)
    send(user, take(user), settings, providers, action="utter", text="A book, then a film.")
    page = take(wizard)
    data = wizard.get(page, headers=JSON).get_json()["star"]["wizard"]
    assert [(t["name"], t["open"]) for t in data["tasks"]] == [("library_search", True),
                                                               ("cinema_search", False)]
    switched = act(wizard, page, "select_task", task="cinema_search")
    assert switched.status_code == 200
    data = switched.get_json()["wizard"]
    assert data["task"]["api"] == "cinema_search" and [t["open"] for t in data["tasks"]] == [False, True]
    html = wizard.get(page).get_data(as_text=True)
    assert 'data-task="cinema_search" aria-current="true"' in html and 'value="cinema_search"' in html


# ---- submitting: the answers are the events' ------------------------------------------------------------


def test_a_turn_without_its_reply_or_with_answers_that_disagree_is_refused(star, settings):
    _, wizard, page = star
    before = stored(settings)
    empty = wizard.post(page, json={}, headers=JSON)
    assert empty.status_code == 400 and empty.get_json()["field"] == "action"
    act(wizard, page, "utter", text="Which genre?")
    plain = wizard.post(page.replace("/star/turn/", "/turn/"), json={"action": "pick_suggestion",
                                                                       "response": "Which genre?"},
                        headers=JSON)
    assert plain.status_code == 400 and plain.get_json()["field"] == "action"
    other = wizard.post(page.replace("/star/turn/", "/turn/"), json={"action": "utter", "response": "Hello"},
                        headers=JSON)
    assert other.status_code == 400 and other.get_json()["field"] == "response"
    twice = wizard.post(page, json={"action": "utter", "text": "And a second reply"}, headers=JSON)
    assert twice.status_code == 400 and twice.get_json()["field"] == "action"
    assert stored(settings)[2] == before[2]  # no turn submitted
    done = wizard.post(page.replace("/star/turn/", "/turn/"), json={"action": "utter",
                                                                     "response": "Which genre?"},
                       headers=JSON)
    assert done.status_code == 200 and done.get_json()["created"]
    again = wizard.post(page, json={}, headers=JSON)
    assert again.status_code == 200 and again.get_json()["created"] is False


@pytest.mark.parametrize("body, field", [
    ({"action": "query", "api": "library_search", "form": {"Genre": "Sci-fi"}}, "Genre"),
    ({"action": "query", "api": "library_search", "form": {"Language": "English"}}, "Genre"),
    ({"action": "query", "api": "library_search", "form": {"Colour": "Red"}}, "Colour"),
    ({"action": "query", "api": "library_search", "form": {"Genre": ["Novel", "Poetry"]}}, "Genre"),
    ({"action": "query", "api": "library_search", "form": "Genre=Novel"}, "form"),
    ({"action": "query", "api": "weather", "form": {}}, "api"),
    ({"action": "query", "api": "library_search", "form": {"Genre": "Novel"}, "constraints": []},
     "constraints"),
    ({"action": "pick_suggestion", "label": "library_inform_book"}, "label"),  # no item to fill it yet
    ({"action": "pick_suggestion", "label": "no_such_reply", "text": "hi"}, "label"),
    ({"action": "utter", "text": "\x07bell"}, "text"),
    ({"action": "utter", "text": "x" * 2001}, "text"),
    ({"action": "utter", "text": 7}, "text"),
    ({"action": "select_task", "task": "../../etc"}, "task"),
    ({"action": "complete"}, "action"),
    ({"action": "return_item"}, "action"),
    ({"action": ["query"]}, "action"),
    ({"action": "query", "api": "library_search", "form": {"Genre": "No\x00vel"}}, "Genre"),
    ({"action": "request_suggestions", "text": {"nested": [1]}}, "text"),
    ({"action": "utter", "text": "hi", "mood": "grumpy"}, "mood"),
])
def test_a_bad_action_is_a_400_naming_the_field_and_stores_nothing(star, settings, body, field):
    _, wizard, page = star
    before = stored(settings)
    refused = wizard.post(f"{page}/action", json=body, headers=JSON)
    assert refused.status_code == 400, refused.get_data(as_text=True)
    assert refused.get_json()["field"] == field
    assert stored(settings) == before


@pytest.mark.parametrize("body, field", [
    ({"action": "query", "api": "library_search"}, "action"),
    ({"action": "utter", "text": ""}, "text"),
    ({"action": "utter", "text": "hello", "complete": "yes"}, "complete"),
    ({"action": "utter", "text": "hello", "colour": "red"}, "colour"),
    ({"label": "hello"}, "label"),
    ({"action": "pick_suggestion", "label": "query", "text": "Query"}, "label"),
])
def test_a_bad_submit_is_a_400_naming_the_field_and_stores_nothing(star, settings, body, field):
    _, wizard, page = star
    before = stored(settings)
    refused = wizard.post(page, json=body, headers=JSON)
    assert refused.status_code == 400, refused.get_data(as_text=True)
    assert refused.get_json()["field"] == field
    assert stored(settings) == before


def test_a_body_that_is_not_one_json_object_is_a_400_naming_it(star, settings):
    _, wizard, page = star
    before = stored(settings)
    for url in (f"{page}/action", page):
        for raw in ("[1, 2]", "not json", "[" * 5000):
            refused = wizard.post(url, data=raw, content_type="application/json", headers=JSON)
            assert refused.status_code == 400 and refused.get_json()["field"] == "body"
    repeated = wizard.post(page, data={"action": ["utter", "utter"], "text": "hi"}, headers=JSON)
    assert repeated.status_code == 400 and repeated.get_json()["field"] == "action"
    assert stored(settings) == before


def test_a_refused_form_shows_the_page_again_with_the_reason_and_the_text(star, settings):
    _, wizard, page = star
    refused = wizard.post(f"{page}/action", data={"action": "query", "api": "library_search",
                                                  "kb-Genre": "", "kb-Language": "English"})
    assert refused.status_code == 400
    html = refused.get_data(as_text=True)
    assert "Genre: required but not provided" in html and 'id="kb-form"' in html
    refused = wizard.post(page, data={"action": "utter", "text": "\x07 not stored"})
    assert refused.status_code == 400 and "control character" in refused.get_data(as_text=True)


def test_foreign_forged_and_other_protocol_assignments_are_refused(star, app, settings, providers):
    user, wizard, page = star
    other_wizard = star_worker(app, settings, "wizard")
    before = stored(settings)
    for client in (other_wizard, user):
        assert client.get(page, headers=JSON).status_code == 403
        assert act(client, page, "utter", text="hijack").status_code == 403
        assert client.post(page, json={"action": "utter", "text": "hijack"}, headers=JSON).status_code == 403
    assert wizard.get("/star/turn/Lforged", headers=JSON).status_code == 404
    assert act(wizard, "/star/turn/Lforged", "utter", text="x").status_code == 404
    stranger = app.test_client()
    assert stranger.get(page, headers=JSON).status_code == 403
    no_token = app.test_client()
    no_token.set_cookie("worker", wizard.get_cookie("worker").value)
    refused = no_token.post(f"{page}/action", json={"action": "utter", "text": "x"}, headers=JSON)
    assert refused.status_code == 400 and "CSRF" in refused.get_json()["error"]
    assert stored(settings) == before


def test_a_wizard_whose_lease_ran_out_leaves_nothing_in_the_next_wizards_turn_or_the_export(
        star, app, settings, tmp_path):
    from datetime import timedelta

    from turkflow.dataset.export import ExportFilters
    from turkflow.models import Hit, utcnow
    from turkflow.protocols.star.dialog import star_documents

    _, first, page = star
    act(first, page, "query", **NOVEL_QUERY)
    act(first, page, "utter", text="Never sent, my time ran out.")
    with session_scope(settings.database_url) as s:
        hit = s.exec(select(Hit).where(Hit.status == "open")).one()
        hit.lease_expires_at = utcnow() - timedelta(seconds=1)
        s.add(hit)
    second = star_worker(app, settings, "wizard")
    taken = take(second)
    assert first.post(page, json={}, headers=JSON).status_code == 409  # the turn went to someone else
    assert second.get(taken, headers=JSON).get_json()["star"]["wizard"]["this_turn"] == []
    assert second.post(taken, json={"action": "utter", "text": "Which genre?"}, headers=JSON).status_code == 200
    with session_scope(settings.database_url) as s:
        doc = next(star_documents(s, settings.worker_hash_key, ExportFilters()))
    said = [e for e in doc["Events"] if e["Agent"] != "UserGuide"]  # the user guide's greeting nudge
    assert [(e["Agent"], e["Action"]) for e in said] == [("User", "utter"), ("Wizard", "utter")]
    assert said[1]["Text"] == "Which genre?"



def test_the_wizard_page_shows_the_dialogs_queries_a_page_at_a_time_newest_first(star, settings):
    """A turn of many queries made the next wizard's page huge (issue 35): the results show 20 queries at a
    time, newest first, with links both ways, and a query browsed on an older page is shown on its page."""
    _, wizard, page = star
    queries = [act(wizard, page, "query", **NOVEL_QUERY).get_json()["wizard"]["kb_log"][0]["event_id"]
               for _ in range(23)]
    shown = wizard.get(page, headers=JSON).get_json()["star"]["wizard"]
    assert [e["event_id"] for e in shown["kb_log"]] == queries[:2:-1]
    assert (shown["kb_total"], shown["older_queries"], shown["newer_queries"]) == (23, 20, None)
    html = wizard.get(page).get_data(as_text=True)
    assert html.count('class="kb-entry"') == 20 and f'href="{page}?older=20#kb-results">Older queries' in html
    assert "<span data-kb-more>3</span> more" in html and "data-kb-newer hidden" in html
    older = wizard.get(f"{page}?older=20", headers=JSON).get_json()["star"]["wizard"]
    assert [e["event_id"] for e in older["kb_log"]] == queries[2::-1]
    assert (older["older_queries"], older["newer_queries"]) == (None, 0)
    browsed = wizard.get(f"{page}?query={queries[0]}&position=0", headers=JSON).get_json()["star"]["wizard"]
    assert [e["event_id"] for e in browsed["kb_log"]] == queries[2::-1]
    assert wizard.get(f"{page}?older=x", headers=JSON).get_json()["field"] == "older"


# ---- the user's page ----------------------------------------------------------------------------------


def test_the_user_page_shows_the_scenario_and_the_nudge_due_and_never_the_knowledge_base(star, settings,
                                                                                         providers):
    user, wizard, page = star
    item = act(wizard, page, "query", **NOVEL_QUERY).get_json()["logged"][1]["Item"]
    send(wizard, page, settings, providers, action="pick_suggestion", label="library_ask_language")
    user_page = take(user)
    html = user.get(user_page).get_data(as_text=True)
    data = user.get(user_page, headers=JSON).get_json()
    assert "borrow a novel from the city library" in html
    with session_scope(settings.database_url) as s:
        planned = s.exec(select(Conversation)).one().scenario["nudges"]
    of = f"of {len(planned)}]"
    nudge = f"Mention that you only have time on weekday mornings. [instruction 2 {of}"  # the task file's own
    greeting = f"{next(n['text'] for n in planned if n.get('when') == 'start')} [instruction 1 {of}"
    assert data["star"]["user"]["nudges"] == [{"text": greeting, "turn_index": 0, "new": False},
                                              {"text": nudge, "turn_index": 2, "new": True}]
    assert nudge in html
    said = json.dumps(data["history"]) + data["star"]["user"]["scenario"]["task"]  # the user's own values
    secrets = [str(v) for k, v in item.items() if k != "APIName" and str(v) not in said and len(str(v)) > 3]
    assert secrets  # the title and author at least
    for shown in (html, json.dumps(data)):
        assert not any(value in shown for value in secrets)
        assert "kb_log" not in shown and "Constraints" not in shown
    assert events(settings).count(("UserGuide", "instruct")) == 2
    user.get(user_page)
    assert events(settings).count(("UserGuide", "instruct")) == 2  # given once


def test_the_user_ends_the_dialog_and_answers_at_once_the_wizard_finds_the_questions_in_the_queue(
        star, settings, providers):
    user, wizard, page = star
    send(wizard, page, settings, providers, action="pick_suggestion", label="library_ask_language")
    ended = send(user, take(user), settings, providers, action="utter", text="Thanks, bye!",
                 complete="yes")
    survey = ended["survey_url"]
    assert survey and events(settings)[-2:] == [("User", "utter"), ("User", "complete")]
    with session_scope(settings.database_url) as s:
        assert s.get(Conversation, s.get(Turn, ended["turn_id"]).conversation_id).status == "completed"

    questions = user.get(survey, headers=JSON).get_json()
    assert [q["name"] for q in questions["questions"]] == ["task_done", "calm"]
    assert user.post(survey, json={"task_done": "yes"}, headers=JSON).get_json()["field"] == "calm"
    assert user.post(survey, json={"task_done": "yes", "calm": "no", "x": "y"},
                     headers=JSON).get_json()["field"] == "x"
    assert stored(settings)[1] == 0
    assert user.post(survey, json={"task_done": "yes", "calm": True}, headers=JSON).get_json() == {"stored": True}
    assert user.post(survey, json={"task_done": "no", "calm": "no"}, headers=JSON).get_json() == {"stored": False}
    assert user.get(survey, headers=JSON).get_json()["answered"] == {"task_done": True, "calm": True}

    due = wizard.get("/queue", headers=JSON).get_json()["surveys"]
    assert [entry["conversation_id"] for entry in due] == [int(survey.rsplit("/", 1)[1])]
    assert "Questions about dialogs you took part in" in wizard.get("/queue").get_data(as_text=True)
    form = wizard.get(survey).get_data(as_text=True)
    assert "Did the user change his/her mind" in form
    answered = wizard.post(survey, data={"changed_mind": "no", "aggressive": "no", "unsure": "yes"})
    assert answered.status_code == 200 and "your answers are saved" in answered.get_data(as_text=True)
    assert wizard.get("/queue", headers=JSON).get_json()["surveys"] == []
    with session_scope(settings.database_url) as s:
        rows = s.exec(select(SurveyAnswer).order_by(SurveyAnswer.id)).all()
    assert [(r.role, r.question, r.answer) for r in rows] == [
        ("user", "task_done", True), ("user", "calm", True),
        ("wizard", "changed_mind", False), ("wizard", "aggressive", False), ("wizard", "unsure", True)]


def test_the_questions_are_for_the_dialogs_last_workers_once_it_is_over(star, app, settings, providers):
    user, wizard, page = star
    with session_scope(settings.database_url) as s:
        conversation_id = s.exec(select(Conversation.id)).one()
    survey = f"/survey/{conversation_id}"
    assert user.get(survey, headers=JSON).status_code == 409  # not over yet
    assert user.post(survey, json={"task_done": "yes", "calm": "yes"}, headers=JSON).status_code == 409
    send(wizard, page, settings, providers, action="utter", text="Which genre?")
    send(user, take(user), settings, providers, action="utter", text="Bye", complete="on")
    stranger = star_worker(app, settings, "wizard")
    assert stranger.get(survey, headers=JSON).status_code == 403
    assert stranger.post(survey, json={"changed_mind": "no", "aggressive": "no", "unsure": "no"},
                         headers=JSON).status_code == 403
    assert user.get("/survey/999999", headers=JSON).status_code == 404
    assert app.test_client().get(survey, headers=JSON).status_code == 403
    assert stored(settings)[1] == 0


# ---- the flow chart's image ------------------------------------------------------------------------------


def test_the_flow_chart_image_is_served_from_the_tasks_folder_and_nothing_else(app, settings, tmp_path):
    copy = tmp_path / "star"
    shutil.copytree(SHARED_DATA / "star" / "apis", copy / "apis")
    shutil.copytree(SHARED_DATA / "star" / "tasks" / "bank_balance", copy / "tasks" / "bank_balance")
    from turkflow.protocols.registry import load_tasks
    from turkflow.protocols.star.dialog import read_tasks

    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(copy / "tasks"))
        task = s.exec(select(Task).where(Task.key == "star:bank_balance")).one()
        task_id = task.id
        task.star = {**task.star, "image": "../../apis/apis/bank_balance.json"}
        s.add(task)
        s.flush()
        sneaky_id = task.id
    client = app.test_client()
    assert client.get(f"/star/image/{sneaky_id}").status_code == 404
    with session_scope(settings.database_url) as s:
        task = s.get(Task, task_id)
        task.star = {**task.star, "image": "bank_balance.jpg"}
        s.add(task)
    shown = client.get(f"/star/image/{task_id}")
    assert shown.status_code == 200 and shown.mimetype == "image/jpeg"
    assert shown.data == (copy / "tasks" / "bank_balance" / "bank_balance.jpg").read_bytes()
    assert client.get("/star/image/99999").status_code == 404
    assert re.search(r"frame-ancestors", shown.headers["Content-Security-Policy"])
    assert SAMPLE.is_dir()


def test_the_queue_names_the_role_with_its_article(app, settings, providers):
    launch_star(settings, providers)
    user, wizard = star_worker(app, settings, "user"), star_worker(app, settings, "wizard")
    assert "Waiting for a user" in user.get("/queue").get_data(as_text=True)
    assert "No turn is waiting for a wizard" in wizard.get("/queue").get_data(as_text=True)
