"""STAR batches on Prolific, against the fake Prolific (every request and response checked against
Prolific's OpenAPI description) on both databases: each role's staged onboarding studies (tutorial, quiz,
hints counted on the server, graded once, the passing code adding to the stage's group), STAR's user and
wizard pages reached through the study link with their actions on a token-checked route, the end-of-dialog
questions (the participant who ends the dialog before the completion URL, the other role's last one when
they next arrive), multi-task turns only for stage-2 participants, launching, and stage-aware stalls."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from sqlmodel import func, select

from turkflow import pipeline
from turkflow.access import OPERATOR
from turkflow.cli.main import App, main
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.protocols.star import stages
from turkflow.hits.prolific import api
from turkflow.models import (
    Conversation,
    DialogEvent,
    ProlificOnboarding,
    StageAttempt,
    StageHint,
    SurveyAnswer,
    Task,
    Turn,
    TurnStatus,
    Worker,
    utcnow,
)
from turkflow.quality import stall
from turkflow.protocols.registry import load_tasks
from turkflow.protocols.star.dialog import make_scenarios, read_tasks

from tests.fake_prolific import FakeProlific, Refused
from tests.test_prolific_web import form_token, prolific_settings, study_link, study_of
from tests.test_star_dialog import SAMPLE

pytest_plugins = ["tests.fake_prolific"]

JSON = {"Accept": "application/json"}
USER_SURVEY = {"task_done": "yes", "calm": "yes"}
WIZARD_SURVEY = {"changed_mind": "no", "aggressive": "no", "unsure": "yes"}


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str, fake_prolific: FakeProlific) -> Settings:
    """No hand-made role groups: the onboarding studies make them."""
    return prolific_settings(tmp_path, database_url, redis_url, fake_prolific, vouched=())


@pytest.fixture
def turkflow(settings, providers):  # noqa: ANN001, ANN201
    def run(*args: str):  # noqa: ANN202
        return CliRunner().invoke(main, list(args), obj=App(settings_=settings, providers_=providers),
                                  catch_exceptions=False)

    return run


def set_up(turkflow, settings, role: str, stage: int = 1) -> ProlificOnboarding:  # noqa: ANN001
    result = turkflow("prolific", "onboarding", "--role", role, "--stage", str(stage), "--reward", "0.50")
    assert result.exit_code == 0, result.stderr
    with session_scope(settings.database_url) as s:
        return s.exec(select(ProlificOnboarding).where(ProlificOnboarding.role == role,
                                                       ProlificOnboarding.stage == stage)).one()


def right(stage: stages.Stage) -> dict[str, str]:
    return {q.name: q.answer for q in stage.questions}


def code(providers, role: str, passed: bool, stage: int) -> str:  # noqa: ANN001
    return providers.get("prolific").onboarding_code(role, passed, stage)


def path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def takes_stage(client, fake: FakeProlific, row: ProlificOnboarding, participant_id: str,  # noqa: ANN001
                answers: dict, hints: tuple[str, ...] = ()):  # noqa: ANN201
    """The participant starts the stage's onboarding study on Prolific, reads the tutorial, starts the quiz,
    takes ``hints`` and sends ``answers``: (submission id, link, the grading's response)."""
    submission_id = fake.start(row.study_id, participant_id)
    link = study_link(fake, row.study_id, participant_id, submission_id)
    page = client.get(link)
    assert page.status_code == 200 and 'id="tutorial"' in page.text and 'id="start"' in page.text, page.text
    token = form_token(page.text)
    started = client.post(link.replace("/onboarding?", "/onboarding/start?"), data={"turkflow_form": token})
    assert started.status_code == 303
    quiz = client.get(link)
    assert 'id="quiz"' in quiz.text
    attempt = quiz.text.split('name="attempt" value="')[1].split('"')[0]
    for name in hints:
        shown = client.post(link.replace("/onboarding?", "/onboarding/hint?"),
                            data={"turkflow_form": token, "attempt": attempt, "hint": name})
        assert shown.status_code == 200 and f'id="hint-{name}"' in shown.text
    return submission_id, link, client.post(link, data={**answers, "attempt": attempt, "turkflow_form": token})


def qualify(client, fake: FakeProlific, providers, row: ProlificOnboarding,  # noqa: ANN001
            participant_id: str) -> None:
    """Pass the stage and come back to Prolific with its code (which adds them to the stage's group)."""
    stage = stages.stage_for(row.role, row.stage)
    submission_id, _, done = takes_stage(client, fake, row, participant_id, right(stage))
    assert done.location == api.completion_url(code(providers, row.role, True, row.stage))
    fake.complete(submission_id, code(providers, row.role, True, row.stage))


def launch(settings, providers, conversations: int = 1, tasks_per_dialog: int = 1) -> int:  # noqa: ANN001
    """A STAR batch on Prolific over the sample tasks (the library first), its user turns published."""
    with session_scope(settings.database_url) as s:
        load_tasks(s, read_tasks(SAMPLE))
        tasks = list(s.exec(select(Task).where(Task.protocol == "star").order_by(Task.key.desc())))
        scenarios = make_scenarios(tasks, conversations, tasks_per_dialog=tasks_per_dialog)
        batch, hits = lifecycle.launch_batch(s, tasks, conversations, name="star", protocol="star",
                                             provider="prolific", max_turns=20, scenarios=scenarios,
                                             reward_cents=50)
        batch_id, hit_ids = batch.id, [h.id for h in hits]
    for hit_id in hit_ids:
        pipeline.publish(settings, providers, hit_id, "prolific")
    return batch_id


def arrive(client, fake: FakeProlific, settings, batch_id: int, role: str, participant_id: str):  # noqa: ANN001, ANN201
    """The participant starts the batch role's study and opens its link: (link, response)."""
    study_id = study_of(settings, batch_id, role)
    submission_id = fake.start(study_id, participant_id)
    link = study_link(fake, study_id, participant_id, submission_id)
    return link, client.get(link)


def next_turn(settings, providers, batch_id: int) -> None:  # noqa: ANN001
    """Open each conversation's next turn, as the Celery task does after a submission."""
    with session_scope(settings.database_url) as s:
        ids = list(s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)))
    for conversation_id in ids:
        pipeline.open_next_turn(settings, providers, conversation_id)


def completion(providers, batch_id: int, role: str) -> str:  # noqa: ANN001
    return api.completion_url(providers.get("prolific").completion_code(batch_id, role))


def finish(fake: FakeProlific, providers, link: str, batch_id: int, role: str) -> None:  # noqa: ANN001
    """The participant, sent to the completion URL, ends the submission on Prolific with its code."""
    submission_id = link.split("SESSION_ID=")[1].split("&")[0]
    fake.complete(submission_id, providers.get("prolific").completion_code(batch_id, role))


def counts(settings) -> tuple[int, int, int]:  # noqa: ANN001
    """Events, survey answers and submitted turns: what a refused request must leave as it was."""
    with session_scope(settings.database_url) as s:
        return (s.exec(select(func.count()).select_from(DialogEvent)).one(),
                s.exec(select(func.count()).select_from(SurveyAnswer)).one(),
                s.exec(select(func.count()).select_from(Turn).where(Turn.status == TurnStatus.submitted)).one())


@pytest.fixture
def qualified(turkflow, settings, providers, client, fake_prolific):  # noqa: ANN001, ANN201
    """Stage-1 onboarding studies for users and wizards, passed by users pu1, pu2 and wizard pw1."""
    user, wizard = set_up(turkflow, settings, "user"), set_up(turkflow, settings, "wizard")
    for row, participant_id in ((user, "pu1"), (user, "pu2"), (wizard, "pw1")):
        qualify(client, fake_prolific, providers, row, participant_id)
    return user, wizard


# ---- a dialog through the study links ----------------------------------------------------------------


def test_a_star_dialog_on_prolific_through_the_pages_with_both_questionnaires(
        qualified, settings, providers, client, fake_prolific):
    user_group, wizard_group = qualified[0].group_id, qualified[1].group_id
    batch_id = launch(settings, providers, conversations=2)
    assert {"filter_id": "participant_group_allowlist", "selected_values": [user_group]} in \
        fake_prolific.studies[study_of(settings, batch_id, "user")].fields["filters"]

    link, page = arrive(client, fake_prolific, settings, batch_id, "user", "pu1")  # dialog A's first turn
    assert page.status_code == 200 and 'id="user-text"' in page.text and 'id="kb-form"' not in page.text
    sent = client.post(link, data={"action": "utter", "text": "Hi, I'd like to borrow a novel.",
                                   "turkflow_form": form_token(page.text)})
    assert sent.status_code == 303 and sent.location == completion(providers, batch_id, "user")
    finish(fake_prolific, providers, link, batch_id, "user")
    link_b, page_b = arrive(client, fake_prolific, settings, batch_id, "user", "pu2")  # dialog B's
    client.post(link_b, data={"action": "utter", "text": "Hello, I need a book.",
                              "turkflow_form": form_token(page_b.text)})
    with session_scope(settings.database_url) as s:
        dialog_a, dialog_b = s.exec(select(Conversation.id).where(Conversation.batch_id == batch_id)
                                    .order_by(Conversation.id)).all()
    pipeline.open_next_turn(settings, providers, dialog_a)
    assert {"filter_id": "participant_group_allowlist", "selected_values": [wizard_group]} in \
        fake_prolific.studies[study_of(settings, batch_id, "wizard")].fields["filters"]

    link, page = arrive(client, fake_prolific, settings, batch_id, "wizard", "pw1")
    assert page.status_code == 200 and 'id="kb-form"' in page.text
    token = form_token(page.text)
    data = client.get(link, headers=JSON).get_json()  # programs get the same page as JSON
    assert data["turkflow_form"] == token and data["star"]["wizard"]["form"][0]["name"] == "Genre"
    action = link.replace("/turn?", "/turn/action?")
    queried = client.post(action, json={"action": "query", "api": "library_search", "turkflow_form": token,
                                        "form": {"Genre": "Novel", "Language": "English"}}, headers=JSON)
    assert queried.status_code == 200, queried.text
    item = queried.get_json()["logged"][1]["Item"]
    by_form = client.post(action, data={"action": "request_suggestions", "text": "It is on floor",
                                        "turkflow_form": token})
    assert by_form.status_code == 303 and path(by_form.location).startswith("/prolific/turn?")
    assert "draft=" in by_form.location and "It is on floor" in client.get(path(by_form.location)).text
    reply = f"{item['Title']} by {item['Author']} is on floor {item['Floor']}."
    sent = client.post(link, data={"action": "utter", "text": reply, "turkflow_form": token})
    assert sent.location == completion(providers, batch_id, "wizard")
    finish(fake_prolific, providers, link, batch_id, "wizard")
    pipeline.open_next_turn(settings, providers, dialog_a)

    link, page = arrive(client, fake_prolific, settings, batch_id, "user", "pu1")  # a new submission
    assert reply in page.text and "this is the first" not in page.text  # said, never the knowledge base
    ended = client.post(link, data={"action": "utter", "text": "Great, thanks, bye!", "complete": "yes",
                                    "turkflow_form": form_token(page.text)})
    assert ended.status_code == 303 and path(ended.location).startswith("/prolific/survey?")
    assert client.get(link).location == ended.location  # not back to Prolific before the questions
    survey = client.get(path(ended.location))
    assert survey.status_code == 200 and 'id="survey-form"' in survey.text and "ended the dialog" in survey.text
    refused = client.post(path(ended.location), data={"task_done": "yes", "turkflow_form": form_token(survey.text)})
    assert refused.status_code == 400 and "calm" in refused.text
    for _ in range(2):  # answered once; a second send changes nothing and finishes on Prolific again
        done = client.post(path(ended.location), data={**USER_SURVEY, "turkflow_form": form_token(survey.text)})
        assert done.status_code == 303 and done.location == completion(providers, batch_id, "user")
    assert client.get(link).location == completion(providers, batch_id, "user")

    pipeline.open_next_turn(settings, providers, dialog_b)  # the wizard comes back for dialog B
    link, asked = arrive(client, fake_prolific, settings, batch_id, "wizard", "pw1")
    assert asked.status_code == 303 and f"c={dialog_a}" in asked.location
    survey = client.get(path(asked.location))
    assert "Before your turn" in survey.text and "Great, thanks, bye!" in survey.text  # the dialog is shown
    answered = client.post(path(asked.location), data={**WIZARD_SURVEY, "turkflow_form": form_token(survey.text)})
    assert answered.status_code == 303 and path(answered.location).startswith("/prolific/turn?")
    page = client.get(path(answered.location))
    assert page.status_code == 200 and 'id="kb-form"' in page.text and "Hello, I need a book." in page.text
    again = client.post(path(asked.location), data={**WIZARD_SURVEY, "unsure": "no",
                                                     "turkflow_form": form_token(survey.text)}, headers=JSON)
    assert again.get_json()["stored"] is False

    with session_scope(settings.database_url) as s:
        answers = {(a.conversation_id, a.role, a.question): a.answer for a in s.exec(select(SurveyAnswer))}
        assert answers == {(dialog_a, "user", "task_done"): True, (dialog_a, "user", "calm"): True,
                           (dialog_a, "wizard", "changed_mind"): False, (dialog_a, "wizard", "aggressive"): False,
                           (dialog_a, "wizard", "unsure"): True}
        logged = [(e.agent, e.action) for e in s.exec(select(DialogEvent).where(
            DialogEvent.conversation_id == dialog_a, DialogEvent.agent != "UserGuide").order_by(DialogEvent.id))]
    assert logged == [("User", "utter"), ("Wizard", "query"), ("KnowledgeBase", "return_item"),
                      ("Wizard", "request_suggestions"), ("Wizard", "utter"), ("User", "utter"),
                      ("User", "complete")]



def test_the_wizards_older_queries_on_prolific_are_a_link_that_keeps_the_study_links_ids(
        qualified, settings, providers, client, fake_prolific):
    """The page of older queries is the study link with ``older``: Prolific's ids kept, so it opens."""
    batch_id = launch(settings, providers)
    link, page = arrive(client, fake_prolific, settings, batch_id, "user", "pu1")
    client.post(link, data={"action": "utter", "text": "Hi, a novel please.", "turkflow_form": form_token(page.text)})
    next_turn(settings, providers, batch_id)
    link, page = arrive(client, fake_prolific, settings, batch_id, "wizard", "pw1")
    action, token = link.replace("/turn?", "/turn/action?"), form_token(page.text)
    for _ in range(21):
        assert client.post(action, json={"action": "query", "api": "library_search", "turkflow_form": token,
                                         "form": {"Genre": "Novel"}}, headers=JSON).status_code == 200
    html = client.get(link).text
    older = html.split('data-kb-older><a href="')[1].split('"')[0].replace("&amp;", "&")
    assert path(older).startswith("/prolific/turn?") and "PROLIFIC_PID=pw1" in older and "older=20" in older
    shown = client.get(path(older).split("#")[0], headers=JSON).get_json()["star"]["wizard"]
    assert len(shown["kb_log"]) == 1 and shown["newer_queries"] == 0


def test_forged_or_mismatched_ids_on_star_pages_get_a_403_and_store_nothing(
        qualified, settings, providers, client, fake_prolific):
    batch_id = launch(settings, providers, conversations=2)
    study_id = study_of(settings, batch_id, "user")
    submission_id = fake_prolific.start(study_id, "pu1")
    link = study_link(fake_prolific, study_id, "pu1", submission_id)
    for url in (study_link(fake_prolific, study_id, "pu2", submission_id),  # someone else's submission
                study_link(fake_prolific, study_id, "pu1", "submission-404"),
                link.replace(f"STUDY_ID={study_id}", "STUDY_ID=study-999"),
                link.replace("PROLIFIC_PID=pu1", "PROLIFIC_PID=pu1%27%3B--")):
        assert client.get(url).status_code == 403, url
    assert counts(settings) == (0, 0, 0)

    page = client.get(link)
    token = form_token(page.text)
    other = fake_prolific.start(study_id, "pu2")
    other_link = study_link(fake_prolific, study_id, "pu2", other)
    before = counts(settings)
    utter = {"action": "utter", "text": "Hi there."}
    for url, form in ((link, "forged-token"), (other_link, token),
                      (study_link(fake_prolific, study_id, "pu2", submission_id), token)):
        assert client.post(url, data={**utter, "turkflow_form": form}).status_code == 403, url
        action = url.replace("/turn?", "/turn/action?")
        assert client.post(action, json={**utter, "turkflow_form": form}, headers=JSON).status_code == 403
        survey = url.replace("/turn?", "/survey?") + "&c=1"
        assert client.post(survey, data={**USER_SURVEY, "turkflow_form": form}).status_code == 403
    assert client.post(link.replace("/turn?", "/turn/action?"), json={"action": "query", "turkflow_form": token},
                       headers=JSON).get_json()["field"] == "action"  # a user never queries
    assert client.get(link.replace("/turn?", "/survey?") + "&c=x", headers=JSON).get_json()["field"] == "c"
    assert counts(settings) == before  # the nudges the page gave, nothing more


# ---- staged onboarding --------------------------------------------------------------------------------


def test_stage_two_admits_only_stage_one_and_records_the_stage_that_unlocks_multi_task_turns(
        turkflow, settings, providers, client, fake_prolific):
    refused = turkflow("prolific", "onboarding", "--role", "user", "--stage", "2", "--reward", "0.50")
    assert refused.exit_code == 1 and "set up user stage 1 first" in refused.stderr
    first = set_up(turkflow, settings, "user")
    second = set_up(turkflow, settings, "user", stage=2)
    assert set_up(turkflow, settings, "user", stage=2) == second  # made once
    assert second.group_id != first.group_id
    assert {"filter_id": "participant_group_allowlist", "selected_values": [first.group_id]} in \
        fake_prolific.studies[second.study_id].fields["filters"]
    with pytest.raises(Refused, match="none of the study's allowed groups"):
        fake_prolific.start(second.study_id, "pu1")  # has not passed stage 1

    qualify(client, fake_prolific, providers, first, "pu1")
    stage = stages.stage_for("user", 2)
    names = [q.name for q in stage.questions]
    submission_id, link, done = takes_stage(client, fake_prolific, second, "pu1", right(stage), hints=tuple(names[:6]))
    assert done.location == api.completion_url(code(providers, "user", True, 2))
    fake_prolific.complete(submission_id, code(providers, "user", True, 2))
    assert "pu1" in fake_prolific.groups[second.group_id].members
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:pu1")).one()
        assert (worker.role, worker.onboarded, worker.stage) == ("user", True, 2)
        assert s.exec(select(func.count()).select_from(StageHint)).one() == 6
        assert {a.provider for a in s.exec(select(StageAttempt))} == {"prolific"}


def test_the_hint_budget_is_kept_on_the_server_and_a_stage_is_graded_once(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings, "wizard")
    stage = stages.stage_for("wizard", 1)
    submission_id = fake_prolific.start(row.study_id, "pw1")
    link = study_link(fake_prolific, row.study_id, "pw1", submission_id)
    token = form_token(client.get(link).text)
    client.post(link.replace("/onboarding?", "/onboarding/start?"), data={"turkflow_form": token})
    attempt = client.get(link, headers=JSON).get_json()["attempt"]
    hint = link.replace("/onboarding?", "/onboarding/hint?")
    for q in stage.questions[:6]:
        shown = client.post(hint, data={"turkflow_form": token, "attempt": attempt, "hint": q.name}, headers=JSON)
        assert shown.get_json()["hint"] == q.hint
    seventh = client.post(hint, data={"turkflow_form": token, "attempt": attempt,
                                      "hint": stage.questions[6].name}, headers=JSON)
    assert seventh.status_code == 409
    bad = client.post(link, data={**right(stage), "important": "nonsense", "attempt": attempt,
                                  "turkflow_form": token})
    assert bad.status_code == 400 and 'id="quiz"' in bad.text  # nothing graded
    wrong = {**right(stage), "important": "short"}
    failed = api.completion_url(code(providers, "wizard", False, 1))
    assert client.post(link, data={**wrong, "attempt": attempt, "turkflow_form": token}).location == failed
    assert client.post(link, data={**right(stage), "attempt": attempt, "turkflow_form": token}).location == failed
    assert client.get(link).location == failed
    fake_prolific.complete(submission_id, code(providers, "wizard", False, 1))
    assert "pw1" not in fake_prolific.groups[row.group_id].members
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:pw1")).one()
        assert (worker.onboarded, worker.stage) == (False, 0)


def test_hostile_or_forged_stage_links_are_refused_and_grade_nothing(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings, "user")
    submission_id = fake_prolific.start(row.study_id, "pu1")
    link = study_link(fake_prolific, row.study_id, "pu1", submission_id)
    for changed, field in ((link.replace("s=1", "s=3"), "s"), (link.replace("r=user", "r=robot"), "r")):
        refused = client.get(changed, headers=JSON)
        assert refused.status_code == 400 and refused.get_json()["field"] == field
    assert client.get(link.replace("s=1", "s=2")).status_code == 403  # not the stage-2 study
    token = form_token(client.get(link).text)
    start = link.replace("/onboarding?", "/onboarding/start?")
    assert client.post(start, data={"turkflow_form": "forged"}).status_code == 403
    other = study_link(fake_prolific, row.study_id, "pu2", fake_prolific.start(row.study_id, "pu2"))
    assert client.post(other.replace("/onboarding?", "/onboarding/start?"),
                       data={"turkflow_form": token}).status_code == 403
    with session_scope(settings.database_url) as s:
        assert s.exec(select(StageAttempt)).all() == []


# ---- multi-task dialogs: stage 2 only ------------------------------------------------------------------


def test_a_participant_without_stage_two_never_gets_a_multi_task_turn(
        qualified, turkflow, settings, providers, client, fake_prolific):
    second = set_up(turkflow, settings, "user", stage=2)
    qualify(client, fake_prolific, providers, second, "pu2")
    batch_id = launch(settings, providers, conversations=2, tasks_per_dialog=2)
    study = fake_prolific.studies[study_of(settings, batch_id, "user")]
    assert {"filter_id": "participant_group_allowlist", "selected_values": [second.group_id]} in \
        study.fields["filters"]  # every dialog of the batch is multi-task
    with pytest.raises(Refused, match="none of the study's allowed groups"):
        fake_prolific.start(study.id, "pu1")
    fake_prolific.groups[second.group_id].members["pu1"] = "by hand"  # a researcher's slip on Prolific
    _, page = arrive(client, fake_prolific, settings, batch_id, "user", "pu1")
    assert page.status_code == 409 and "No turn is waiting for you" in page.text
    _, page = arrive(client, fake_prolific, settings, batch_id, "user", "pu2")
    assert page.status_code == 200 and 'id="user-text"' in page.text
    with session_scope(settings.database_url) as s:
        holders = {w.external_id for w in s.exec(select(Worker).join(Turn, Turn.worker_id == Worker.id))}
        assert "prolific:pu1" not in holders


# ---- launching ------------------------------------------------------------------------------------------


def test_star_launches_on_prolific_once_its_onboarding_is_set_up_and_never_on_mturk(
        turkflow, settings, providers, client, fake_prolific):
    loaded = turkflow("tasks", "load", "--protocol", "star", str(SAMPLE))
    assert loaded.exit_code == 0, loaded.stderr
    args = ("batch", "launch", "--protocol", "star", "--all", "-n", "1", "--reward", "3.00", "--yes")
    closed = turkflow(*args, "--provider", "mturk")
    assert closed.exit_code == 1 and "Mechanical Turk closed" in closed.stderr
    missing = turkflow(*args, "--provider", "prolific")
    assert missing.exit_code == 1 and len(missing.stderr.strip().splitlines()) == 1
    assert "user stage 1, wizard stage 1" in missing.stderr and "--stage 1" in missing.stderr
    check = turkflow("prolific", "check", "--protocol", "star")
    assert check.exit_code == 1 and "user stage 1, wizard stage 1" in check.stderr
    set_up(turkflow, settings, "user"), set_up(turkflow, settings, "wizard")
    multi = turkflow(*args, "--provider", "prolific", "--tasks-per-dialog", "2")
    assert multi.exit_code == 1 and "user stage 2, wizard stage 2" in multi.stderr
    per_turn = turkflow(*(a if a != "3.00" else "0.50" for a in args), "--provider", "prolific")
    assert per_turn.exit_code == 1 and len(per_turn.stderr.strip().splitlines()) == 1
    assert "--reward" in per_turn.stderr and "--session-minutes 30: at least £3.00 a session" in per_turn.stderr
    launched = turkflow(*args, "--provider", "prolific")
    assert launched.exit_code == 0, launched.stderr
    assert "1 user turn open on Prolific (real studies)" in launched.stdout
    assert "places: a session of 30 minutes, turn after turn in one submission, paid £3.00 once" in launched.stdout
    status = turkflow("batch", "status", "1")
    assert "places         a session of 30 minutes" in status.stdout, status.stdout
    with session_scope(settings.database_url) as s:
        assert s.exec(select(func.count()).select_from(Conversation)).one() == 1
    assert len([st for st in fake_prolific.studies.values() if st.status == "ACTIVE"]) == 3


# ---- stalls ---------------------------------------------------------------------------------------------


def test_a_multi_task_batch_only_stage_one_participants_could_serve_is_stalled_until_one_passes_stage_two(
        turkflow, settings, providers):
    set_up(turkflow, settings, "user")
    set_up(turkflow, settings, "wizard")
    batch_id = launch(settings, providers, conversations=1, tasks_per_dialog=2)
    with session_scope(settings.database_url) as s:
        for participant_id in ("pu1", "pu2"):  # passed stage 1 on the onboarding page, no turn yet
            s.add(Worker(external_id=f"prolific:{participant_id}", role="user", onboarded=True, stage=1))
    start, grace = utcnow(), timedelta(minutes=10)
    with session_scope(settings.database_url) as s:
        [user] = [x for x in stall.role_supply(s, batch_id) if x.role == "user"]
        assert (user.waiting, user.waiting_multi, user.workers, user.eligible, user.eligible_multi) == (1, 1, 2, 2, 0)
        stall.sweep(s, start, grace)
    with session_scope(settings.database_url) as s:
        changes = stall.sweep(s, start + grace, grace)
        assert [(x.role, x.stage, x.workers, x.waiting) for x in changes.stalled] == [("user", 2, 2, 1)]
        [banner] = stall.banners(s, OPERATOR, batch_id)
        assert "passed stage 2" in banner and "--role user --stage 2" in banner
    with session_scope(settings.database_url) as s:
        s.exec(select(Worker).where(Worker.external_id == "prolific:pu2")).one().stage = 2
    with session_scope(settings.database_url) as s:
        assert [x.role for x in stall.sweep(s, start + 2 * grace, grace).cleared] == ["user"]
