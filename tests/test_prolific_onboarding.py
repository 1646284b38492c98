"""Each role's onboarding study on Prolific (``turkflow prolific onboarding``), against the fake Prolific on
both databases: the participant takes turkflow's quiz for the role through the study's link, a pass sends
them back with the code that adds them to the role's group (which the role's turn studies require), a
fail with one that does not; only those who passed write turns."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import select

from turkflow.cli.main import App, main
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import onboarding
from turkflow.hits.prolific import api
from turkflow.models import Assignment, Event, ProlificOnboarding, RaterReliability, Worker

from tests.fake_prolific import FakeProlific, Refused
from tests.test_pipeline import STUDENT_ANSWERS
from tests.test_quality_gold import _form, _key
from tests.test_prolific_web import (
    completion,
    form_token,
    launch,
    prolific_settings,
    stored,
    study_link,
    study_of,
)

pytest_plugins = ["tests.fake_prolific"]

RIGHT = {q.name: q.answer for q in onboarding.quiz_for("student").questions}
WRONG = {name: "not-an-option" for name in RIGHT}


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str, fake_prolific: FakeProlific) -> Settings:
    """No hand-made role groups: the onboarding studies make them."""
    return prolific_settings(tmp_path, database_url, redis_url, fake_prolific, vouched=())


@pytest.fixture
def turkflow(settings, providers):  # noqa: ANN001, ANN201
    def run(*args: str, **changed):  # noqa: ANN202
        app = App(settings_=settings.model_copy(update=changed), providers_=None if changed else providers)
        return CliRunner().invoke(main, list(args), obj=app, catch_exceptions=False)

    return run


def set_up(turkflow, settings, role: str = "student") -> ProlificOnboarding:  # noqa: ANN001
    result = turkflow("prolific", "onboarding", "--role", role, "--reward", "0.50", "--places", "20")
    assert result.exit_code == 0, result.stderr
    with session_scope(settings.database_url) as s:
        return s.exec(select(ProlificOnboarding).where(ProlificOnboarding.role == role)).one()


def takes_quiz(client, fake: FakeProlific, study_id: str, participant_id: str,  # noqa: ANN001, ANN201
               answers: dict):
    """The participant starts the onboarding study on Prolific, opens its link and sends the quiz:
    (submission id, link, the form's token, the answer to the quiz)."""
    submission_id = fake.start(study_id, participant_id)
    link = study_link(fake, study_id, participant_id, submission_id)
    page = client.get(link)
    assert page.status_code == 200 and 'id="quiz-first"' in page.text
    token = form_token(page.text)
    return submission_id, link, token, client.post(link, data={**answers, "turkflow_form": token})


def code(providers, role: str, passed: bool) -> str:  # noqa: ANN001
    return providers.get("prolific").onboarding_code(role, passed)


def test_a_participant_who_passes_joins_the_roles_group_and_can_then_take_a_turn(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings)
    study = fake_prolific.studies[row.study_id]
    assert study.status == "ACTIVE" and study.fields["reward"] == 50
    assert study.fields["submissions_config"]["max_submissions_per_participant"] == 1
    submission_id, _, _, done = takes_quiz(client, fake_prolific, row.study_id, "p1", RIGHT)
    assert done.status_code == 303 and done.location == api.completion_url(code(providers, "student", True))
    fake_prolific.complete(submission_id, code(providers, "student", True))
    assert "p1" in fake_prolific.groups[row.group_id].members
    assert fake_prolific.submissions[submission_id].status == "APPROVED"  # the quiz is paid
    group = api.list_participant_groups(api.ProlificClient(fake_prolific.token, fake_prolific.url),
                                        fake_prolific.workspace_id)
    [feeds] = [g["feeder_studies"] for g in group if g["id"] == row.group_id]
    assert [f["id"] for f in feeds] == [row.study_id]

    batch_id = launch(settings, providers)
    turn_study = study_of(settings, batch_id, "student")
    assert {"filter_id": "participant_group_allowlist", "selected_values": [row.group_id]} in \
        fake_prolific.studies[turn_study].fields["filters"]
    turn = fake_prolific.start(turn_study, "p1")
    link = study_link(fake_prolific, turn_study, "p1", turn)
    page = client.get(link)
    assert page.status_code == 200 and 'id="submit-turn"' in page.text
    written = client.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.text)})
    assert written.location == completion(providers, batch_id, "student")
    assert [t.text for t in stored(settings)[1]] == [STUDENT_ANSWERS["response"]]


def test_the_gold_turns_of_the_quiz_start_a_participants_record_as_a_rater_once(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings)
    submission_id = fake_prolific.start(row.study_id, "p1")
    link = study_link(fake_prolific, row.study_id, "p1", submission_id)
    page = client.get(link).text
    assert "Rate a few example turns" in page and 'name="gold-t1-relevant"' in page
    token = form_token(page)
    refused = client.post(link, data={**_form("student", _key("student")), "gold-t2-useful": "maybe",
                                      "turkflow_form": token})
    assert refused.status_code == 400 and "gold-t2-useful: answer yes or no" in refused.text.lower()
    done = client.post(link, data={**_form("student", _key("student")), "turkflow_form": token})
    assert done.location == api.completion_url(code(providers, "student", True))
    again = client.post(link, data={**_form("student", _key("student")), "turkflow_form": token})
    assert again.location == done.location  # graded once; the gold answers count once
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:p1")).one()
        assert worker.onboarded and s.get(RaterReliability, worker.id).gold == 6
        assert len(s.exec(select(Event).where(Event.kind == "gold_rated")).all()) == 1

    failing = fake_prolific.start(row.study_id, "p2")
    link = study_link(fake_prolific, row.study_id, "p2", failing)
    token = form_token(client.get(link).text)
    client.post(link, data={**_form("student", _key("student"), quiz_right=False), "turkflow_form": token})
    with session_scope(settings.database_url) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == "prolific:p2")).one()
        assert not worker.onboarded and s.get(RaterReliability, worker.id) is None


def test_a_participant_who_fails_is_not_added_and_cannot_take_a_turn(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings)
    submission_id, link, token, done = takes_quiz(client, fake_prolific, row.study_id, "p1", WRONG)
    failed = api.completion_url(code(providers, "student", False))
    assert done.status_code == 303 and done.location == failed
    again = client.post(link, data={**RIGHT, "turkflow_form": token})
    assert again.location == failed  # graded once: a second try in the same submission changes nothing
    assert client.get(link).location == failed
    fake_prolific.complete(submission_id, code(providers, "student", False))
    assert "p1" not in fake_prolific.groups[row.group_id].members
    assert fake_prolific.submissions[submission_id].status == "APPROVED"

    batch_id = launch(settings, providers)
    turn_study = study_of(settings, batch_id, "student")
    with pytest.raises(Refused, match="none of the study's allowed groups"):
        fake_prolific.start(turn_study, "p1")
    fake_prolific.groups[row.group_id].members["p1"] = "by hand"  # a researcher's slip on Prolific
    turn = fake_prolific.start(turn_study, "p1")
    page = client.get(study_link(fake_prolific, turn_study, "p1", turn))
    assert page.status_code == 403 and "not passed the student onboarding quiz" in page.text
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Assignment)).all() == []
        assert [(w.external_id, w.onboarded) for w in s.exec(select(Worker))] == [("prolific:p1", False)]


def test_nobody_writes_a_turn_without_passing_even_when_added_to_the_group_by_hand(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings)
    set_up(turkflow, settings, "teacher")
    batch_id = launch(settings, providers)
    turn_study = study_of(settings, batch_id, "student")
    fake_prolific.groups[row.group_id].members["p1"] = "by hand"  # never took the quiz
    turn = fake_prolific.start(turn_study, "p1")
    page = client.get(study_link(fake_prolific, turn_study, "p1", turn))
    assert page.status_code == 403 and "not passed the student onboarding quiz" in page.text
    assert stored(settings) == ([], [], [])


def test_setting_up_twice_makes_one_study_and_one_group_and_check_reports_it(
        turkflow, settings, fake_prolific):
    missing = turkflow("prolific", "check", public_url="https://turkflow.example.org")
    assert missing.exit_code == 1 and "no onboarding study for students or teachers" in missing.stderr
    assert "prolific onboarding --role student" in missing.stdout
    first = set_up(turkflow, settings)
    assert set_up(turkflow, settings) == first
    assert len(fake_prolific.studies) == 1
    more = turkflow("prolific", "onboarding", "--role", "student", "--reward", "0.50", "--places", "30")
    assert more.exit_code == 0 and "0 of 30 places taken" in more.stdout  # places grow, nothing new
    assert [g.id for g in fake_prolific.groups.values() if "students" in g.name] == [first.group_id]
    teacher = set_up(turkflow, settings, "teacher")
    [blocks] = fake_prolific.studies[teacher.study_id].fields["filters"]
    assert blocks["filter_id"] == "participant_group_blocklist"
    assert first.group_id in blocks["selected_values"]  # a student never becomes a teacher
    ready = turkflow("prolific", "check", public_url="https://turkflow.example.org")
    assert ready.exit_code == 0, ready.stderr
    assert "passing it adds to participant group" in ready.stdout and first.group_id in ready.stdout


def test_a_student_who_passed_never_takes_the_teacher_onboarding_study(
        turkflow, settings, providers, client, fake_prolific):
    student, teacher = set_up(turkflow, settings), set_up(turkflow, settings, "teacher")
    submission_id, _, _, _ = takes_quiz(client, fake_prolific, student.study_id, "p1", RIGHT)
    fake_prolific.complete(submission_id, code(providers, "student", True))
    with pytest.raises(Refused, match="blocks"):
        fake_prolific.start(teacher.study_id, "p1")


def test_a_reward_below_the_minimum_or_an_unknown_role_is_refused(turkflow, fake_prolific):
    low = turkflow("prolific", "onboarding", "--role", "student", "--reward", "0.10")
    assert low.exit_code == 1 and "below Prolific's minimum pay" in low.stderr
    unknown = turkflow("prolific", "onboarding", "--role", "admin", "--reward", "0.50")
    assert unknown.exit_code == 2 and "--role" in unknown.stderr
    assert fake_prolific.studies == {}


def test_hostile_or_forged_quiz_links_are_refused_and_store_nothing(
        turkflow, settings, providers, client, fake_prolific):
    row = set_up(turkflow, settings)
    submission_id = fake_prolific.start(row.study_id, "p1")
    link = study_link(fake_prolific, row.study_id, "p1", submission_id)
    bad_role = client.get(link.replace("r=student", "r=admin"), headers={"Accept": "application/json"})
    assert bad_role.status_code == 400 and bad_role.get_json()["field"] == "r"
    for url in (link.replace("r=student", "r=teacher"),  # not the teacher onboarding study
                study_link(fake_prolific, row.study_id, "p2", submission_id),  # someone else's submission
                link.replace("PROLIFIC_PID=p1", "PROLIFIC_PID=%00")):
        assert client.get(url).status_code in (400, 403), url
    assert client.post(link, data={**RIGHT, "turkflow_form": "forged"}).status_code == 403
    token = form_token(client.get(link).text)
    other = fake_prolific.start(row.study_id, "p2")
    other_link = study_link(fake_prolific, row.study_id, "p2", other)
    assert client.post(other_link, data={**RIGHT, "turkflow_form": token}).status_code == 403
    assert stored(settings) == ([], [], [])


@pytest.mark.browser
def test_the_onboarding_quiz_a_participant_opens_from_prolific_passes_axe(turkflow, settings, live_server, chromium,
                                                                          fake_prolific):
    from tests.test_accessibility import serious_violations

    study = set_up(turkflow, settings)
    submission_id = fake_prolific.start(study.study_id, "p9")
    context = chromium.new_context()
    page = context.new_page()
    page.goto(study_link(fake_prolific, study.study_id, "p9", submission_id, base=live_server.url))
    assert page.locator("#quiz-first").is_visible()
    problems = serious_violations(page)
    context.close()
    assert problems == [], "\n".join(problems)
