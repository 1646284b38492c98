"""What a Prolific batch publishes is the batch's own, decided when it is launched (issue 34): a worker or a
web process started with other settings publishes nothing else; nothing is published at an address
participants cannot reach; an onboarding study Prolific did not publish admits nobody, and one can be
replaced; amounts are typed in the workspace's currency. Against the fake Prolific (every request and
response checked against Prolific's OpenAPI description), with a real Celery worker where one makes a
study."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import select
from werkzeug.serving import make_server

from turkflow.cli.main import App, main
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.errors import InvalidInput
from turkflow.hits import registry
from turkflow.hits.prolific import api, public
from turkflow.models import Batch, ProlificOnboarding, ProlificStudy
from turkflow.protocols.wot import sample_tasks_path

from tests.conftest import celery_worker_of, free_port, wait_until
from tests.fake_prolific import FakeProlific
from tests.test_pipeline import STUDENT_ANSWERS
from tests.test_prolific_web import form_token, study_link

pytest_plugins = ["tests.fake_prolific"]

PUBLIC = "https://turkflow.example.org"


def started_settings(tmp_path: Path, database_url: str, redis_url: str, fake: FakeProlific, **changed) -> Settings:  # noqa: ANN003
    """The settings turkflow's processes were started with (README step 2): Prolific and the public address,
    nothing about test studies or groups yet."""
    values = dict(data_dir=tmp_path / "var", database_url=database_url, redis_url=redis_url,
                  secret_key="test-secret", worker_hash_key="test-hash-key", public_url=PUBLIC,
                  prolific_rehearsal_host="turkflow.example.org", provider="prolific",
                  prolific_token=fake.token, prolific_workspace_id=fake.workspace_id,
                  prolific_base_url=fake.url, stuck_after_seconds=0, reopen_after_seconds=0,
                  review_after_seconds=0)
    return Settings(**{**values, **changed})


def run(settings: Settings, *args: str, input: str | None = None):  # noqa: ANN201
    return CliRunner().invoke(main, list(args), obj=App(settings_=settings), input=input, catch_exceptions=False)


def one_line(text: str) -> str:
    assert len(text.strip().splitlines()) == 1, text
    return text.strip()


def allow_list(study) -> list[str]:  # noqa: ANN001 - the fake's Study
    return [g for f in study.fields["filters"] if f["filter_id"] == "participant_group_allowlist"
            for g in f["selected_values"]]


# ---- item 1: what a batch publishes is stored with it -------------------------------------------------------


def test_a_test_batch_stays_on_test_studies_when_a_worker_started_before_the_exports_makes_the_next_study(
        tmp_path, database_url, redis_url, fake_prolific):
    """The README's test step, as a lab does it: the web process and a Celery worker run (step 2) before the
    shell exports TURKFLOW_PROLIFIC_TEST_STUDIES and the role groups (step 5) and launches. The launch asks no
    confirmation for test studies; the web process admits the test participant without a restart; the
    teacher's study, made by the worker after the student's turn, is a test study admitting the teacher
    group the shell named; nothing real is published."""
    from turkflow.web import create_app
    from turkflow.workers import app as celery_module

    tester = api.create_test_participant(api.ProlificClient(fake_prolific.token, fake_prolific.url), "lab@example.org")
    groups = {role: fake_prolific.make_group(f"Trial {role}s", [tester]) for role in ("student", "teacher")}
    started = started_settings(tmp_path, database_url, redis_url, fake_prolific)
    shell = started.model_copy(update={"prolific_test_studies": True, "prolific_role_groups":
                                       ",".join(f"{role}={group}" for role, group in groups.items())})
    celery = celery_module.configure(started, registry.providers(started))
    web = create_app(started).test_client()
    with celery_worker_of(celery):
        launched = run(shell, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                       "-n", "1", "--reward", "0.50")  # no -y: a real batch would wait for an answer
        assert launched.exit_code == 0, launched.stderr
        assert "Prolific's test studies" in launched.stdout and "real money" not in launched.stdout
        with session_scope(started.database_url) as s:
            student = s.exec(select(ProlificStudy.study_id).where(ProlificStudy.role == "student")).one()
        submission_id = fake_prolific.start(student, tester)
        link = study_link(fake_prolific, student, tester, submission_id)
        page = web.get(link)
        assert page.status_code == 200, page.get_data(as_text=True)
        sent = web.post(link, data={**STUDENT_ANSWERS, "turkflow_form": form_token(page.get_data(as_text=True))})
        assert sent.status_code == 303

        def teacher_study() -> str | None:
            with session_scope(started.database_url) as s:
                return s.exec(select(ProlificStudy.study_id).where(ProlificStudy.role == "teacher")).first()

        assert wait_until(teacher_study)
    teacher = fake_prolific.studies[teacher_study()]
    assert teacher.test and teacher.status == "ACTIVE" and allow_list(teacher) == [groups["teacher"]]
    assert [s for s in fake_prolific.listing() if s["kind"] == "real" and s["published"]] == []


def test_a_setting_changed_after_launch_never_changes_what_the_running_batch_publishes(
        tmp_path, database_url, redis_url, fake_prolific):
    groups = {role: fake_prolific.make_group(f"Lab {role}s", [f"p-{role}"]) for role in ("student", "teacher")}
    launched_with = started_settings(tmp_path, database_url, redis_url, fake_prolific, prolific_estimated_minutes=3,
                                     prolific_role_groups=",".join(f"{r}={g}" for r, g in groups.items()))
    assert run(launched_with, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
               "-n", "1", "--reward", "0.50", "-y").exit_code == 0
    later = launched_with.model_copy(update={"prolific_estimated_minutes": 9, "prolific_role_groups": "",
                                             "prolific_test_studies": True, "public_url": "https://elsewhere.example.org"})
    provider = registry.providers(later).get("prolific")
    with session_scope(later.database_url) as s:
        batch = s.exec(select(Batch)).one()
        terms = provider.terms_of(batch)
        assert (terms.estimated_minutes, terms.test, terms.public_url) == (3, False, PUBLIC)
        assert provider.vouched_by_group(batch, "teacher")
        assert provider.study_id(s, batch, "teacher")  # made by a process with other settings
    teacher = next(s for s in fake_prolific.studies.values() if s.fields["name"].startswith("Teacher"))
    assert not teacher.test and teacher.fields["estimated_completion_time"] == 3
    assert teacher.fields["external_study_url"].startswith(f"{PUBLIC}/prolific/turn?")
    assert allow_list(teacher) == [groups["teacher"]]


# ---- item 2: nothing published at an address participants cannot reach --------------------------------------


@pytest.mark.parametrize("url, why", [
    ("http://turkflow.example.org", "not an https address"),
    ("https://127.0.0.1:5000", "is this machine"),
    ("https://localhost", "is this machine"),
    ("https://[::1]", "is this machine"),
    ("https://10.1.2.3", "is a private address"),
    ("https://192.168.0.7", "is a private address"),
    ("https://169.254.10.10", "is a link-local address"),
    ("https://turkflow.invalid", "does not resolve"),
])
def test_the_public_url_check_refuses_what_no_participant_could_reach_in_one_line(url, why):
    with pytest.raises(InvalidInput, match=why) as refused:
        public.check(url + "/prolific/turn", what="the student study")
    assert url in str(refused.value) and "\n" not in str(refused.value)


def test_a_public_address_is_accepted_and_a_rehearsal_host_only_while_prolific_is_this_machine():
    assert public.check("https://93.184.215.14/p", what="x") == "https://93.184.215.14/p"  # checked, never called
    fake = "http://127.0.0.1:8123"
    assert public.check("https://rehearsal.turkflow.invalid/p", what="x", rehearsal_host="rehearsal.turkflow.invalid",
                        prolific_base_url=fake)
    with pytest.raises(InvalidInput, match="does not resolve"):
        public.check("https://rehearsal.turkflow.invalid/p", what="x", rehearsal_host="rehearsal.turkflow.invalid",
                     prolific_base_url="https://api.prolific.com")


def test_an_address_that_does_not_answer_from_here_is_named_and_one_that_answers_is_not():
    assert public.unanswered(f"http://127.0.0.1:{free_port()}/prolific/turn", timeout=2) == "ConnectionError"
    server = make_server("127.0.0.1", 0, lambda environ, start: start("404 Not Found", []) or [b""])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert public.unanswered(f"http://127.0.0.1:{server.port}/prolific/turn", timeout=2) is None
    finally:
        server.shutdown()


def test_an_onboarding_study_with_the_public_url_unset_is_refused_and_nothing_is_created(
        tmp_path, database_url, redis_url, fake_prolific):
    """Issue 34, item 2: with TURKFLOW_PUBLIC_URL unset, `prolific onboarding --places 100` published a live
    study pointing at a loopback address."""
    unset = started_settings(tmp_path, database_url, redis_url, fake_prolific, public_url="")
    result = run(unset, "prolific", "onboarding", "--role", "student", "--reward", "0.50", "--places", "100")
    assert result.exit_code == 1
    assert "http://127.0.0.1:5000/prolific/onboarding?r=student" in one_line(result.stderr)
    assert "not an https address" in result.stderr
    assert fake_prolific.studies == {}
    groups = ",".join(f"{role}={fake_prolific.make_group(role, ['p1'])}" for role in ("student", "teacher"))
    loopback = unset.model_copy(update={"public_url": "https://127.0.0.1", "prolific_role_groups": groups})
    launched = run(loopback, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                   "-n", "1", "--reward", "0.50", "-y")
    assert launched.exit_code == 1 and "https://127.0.0.1/prolific/turn" in one_line(launched.stderr)
    assert fake_prolific.studies == {}


def test_a_replaced_onboarding_study_stops_and_those_who_passed_it_stay_admitted(
        tmp_path, database_url, redis_url, fake_prolific):
    settings = started_settings(tmp_path, database_url, redis_url, fake_prolific)
    assert run(settings, "prolific", "onboarding", "--role", "student", "--reward", "0.50").exit_code == 0
    with session_scope(settings.database_url) as s:
        first = s.exec(select(ProlificOnboarding)).one()
    fake_prolific.groups[first.group_id].members["passed-before"] = "now"
    again = run(settings, "prolific", "onboarding", "--role", "student", "--reward", "0.50")
    assert again.exit_code == 0 and first.study_id in again.stdout  # without --replace: the same study
    replaced = run(settings, "prolific", "onboarding", "--role", "student", "--reward", "0.60", "--replace")
    assert replaced.exit_code == 0, replaced.stderr
    with session_scope(settings.database_url) as s:
        old, new = s.exec(select(ProlificOnboarding).order_by(ProlificOnboarding.id)).all()
    assert old.replaced_at is not None and new.replaced_at is None and new.study_id in replaced.stdout
    assert fake_prolific.studies[old.study_id].status == "COMPLETED"
    assert fake_prolific.studies[new.study_id].fields["reward"] == 60 and new.group_id == old.group_id
    assert "passed-before" in fake_prolific.groups[new.group_id].members


# ---- item 3: a draft onboarding study admits nobody -------------------------------------------------------


def test_an_onboarding_study_prolific_did_not_publish_keeps_the_launch_gate_shut(
        tmp_path, database_url, redis_url, fake_prolific):
    """Issue 34, item 3: publishing the onboarding study was refused (insufficient funds) and it stayed a
    draft; `prolific check` then passed and `batch launch` published a turn study admitting an empty group."""
    settings = started_settings(tmp_path, database_url, redis_url, fake_prolific)
    fake_prolific.balance_cents = 1000  # £10: not 100 places at £0.50
    for role in ("student", "teacher"):
        refused = run(settings, "prolific", "onboarding", "--role", role, "--reward", "0.50", "--places", "100")
        assert refused.exit_code == 1 and "Insufficient funds" in one_line(refused.stderr)
    with session_scope(settings.database_url) as s:
        assert [row.published_at for row in s.exec(select(ProlificOnboarding))] == [None, None]
    check = run(settings, "prolific", "check")
    assert check.exit_code == 1 and "draft" in check.stderr
    launch = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "0.50", "-y")
    assert launch.exit_code == 1 and "draft onboarding study" in one_line(launch.stderr)
    assert all(study.status == "UNPUBLISHED" for study in fake_prolific.studies.values())
    for role in ("student", "teacher"):  # a draft's places follow a run with other --places
        assert run(settings, "prolific", "onboarding", "--role", role, "--reward", "0.50", "--places", "10").exit_code == 0
    assert {(s.status, s.fields["total_available_places"]) for s in fake_prolific.studies.values()} == {("ACTIVE", 10)}
    assert run(settings, "prolific", "check").exit_code == 0
    launched = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                   "-n", "1", "--reward", "0.50", "-y")
    assert launched.exit_code == 0, launched.stderr


def test_a_hand_made_group_with_nobody_in_it_admits_nobody_and_a_test_onboarding_study_no_real_batch(
        tmp_path, database_url, redis_url, fake_prolific):
    empty = {role: fake_prolific.make_group(f"{role}s", []) for role in ("student", "teacher")}
    settings = started_settings(tmp_path, database_url, redis_url, fake_prolific,
                                prolific_role_groups=",".join(f"{r}={g}" for r, g in empty.items()))
    refused = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                  "-n", "1", "--reward", "0.50", "-y")
    assert refused.exit_code == 1 and f"hand-made group {empty['student']} with nobody in it" in one_line(refused.stderr)
    api.create_test_participant(api.ProlificClient(fake_prolific.token, fake_prolific.url), "lab@example.org")
    trial = started_settings(tmp_path, database_url, redis_url, fake_prolific, prolific_test_studies=True)
    for role in ("student", "teacher"):
        assert run(trial, "prolific", "onboarding", "--role", role, "--reward", "0.50").exit_code == 0
    real = run(trial.model_copy(update={"prolific_test_studies": False}), "batch", "launch", "--provider",
               "prolific", "--tasks", str(sample_tasks_path()), "-n", "1", "--reward", "0.50", "-y")
    assert real.exit_code == 1 and "only a test onboarding study" in one_line(real.stderr)
    mixed = run(trial.model_copy(update={"prolific_test_studies": False}), "prolific", "onboarding", "--role",
                "student", "--reward", "0.50")
    assert mixed.exit_code == 1 and "--replace" in one_line(mixed.stderr)
    assert all(s.test for s in fake_prolific.studies.values() if s.published_at)


# ---- Prolific's rules and money, as typed ------------------------------------------------------------------


def test_a_maximum_time_of_a_day_or_more_is_refused_at_launch_in_one_line(tmp_path, database_url, redis_url,
                                                                         fake_prolific):
    groups = ",".join(f"{role}={fake_prolific.make_group(role, ['p1'])}" for role in ("student", "teacher"))
    settings = started_settings(tmp_path, database_url, redis_url, fake_prolific, prolific_role_groups=groups,
                                prolific_max_minutes=24 * 60)
    result = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "0.50", "--dry-run")
    assert result.exit_code == 1 and "under 24 hours" in one_line(result.stderr)


def test_amounts_are_typed_in_the_workspaces_currency_and_another_symbol_is_refused(
        tmp_path, database_url, redis_url, fake_prolific):
    groups = ",".join(f"{role}={fake_prolific.make_group(role, ['p1'])}" for role in ("student", "teacher"))
    settings = started_settings(tmp_path, database_url, redis_url, fake_prolific, prolific_role_groups=groups)
    pounds = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                 "-n", "1", "--reward", "£0.50", "--budget", "£20", "--dry-run")
    assert pounds.exit_code == 0, pounds.stderr
    assert "£0.50 a turn" in pounds.stdout
    dollars = run(settings, "batch", "launch", "--provider", "prolific", "--tasks", str(sample_tasks_path()),
                  "-n", "1", "--reward", "$0.50", "--dry-run")
    assert dollars.exit_code == 1
    assert "--reward $0.50 is in USD, but the Prolific workspace pays in GBP" in one_line(dollars.stderr)
    onboarding = run(settings, "prolific", "onboarding", "--role", "student", "--reward", "€0.50")
    assert onboarding.exit_code == 1 and "is in EUR" in one_line(onboarding.stderr) and fake_prolific.studies == {}
    local = run(settings, "batch", "launch", "--provider", "local", "--tasks", str(sample_tasks_path()), "-n", "1",
                "--reward", "£0.20", "--dry-run")
    assert local.exit_code == 1 and "pays in USD" in one_line(local.stderr)
