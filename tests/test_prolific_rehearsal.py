"""The README's "Running on Prolific" walked as a lab walks it on ``turkflow prolific rehearse``'s fake (issue
34): turkflow's processes started once (a web process behind the rehearsal address, a Celery worker), the
shell's exports changing under them, the test step done as Prolific runs test studies (its one test
participant passing a test onboarding study, then writing a test turn), then the real onboarding studies
and a real batch; and at the end the fake's studies, listed as the rehearsal lists them, hold nothing
published for real that the lab did not mean. Nothing is restarted."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import requests
from click.testing import CliRunner
from sqlmodel import select

from turkflow.cli.main import App, main
from turkflow.cli.prolific import prolific_rehearse, show_listing
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import onboarding, registry
from turkflow.models import Batch, ProlificOnboarding, ProlificStudy
from turkflow.protocols.wot import sample_tasks_path
from turkflow.simulator.prolific import REHEARSAL_HOST, REHEARSAL_URL

from tests.conftest import LiveServer, celery_worker_of, wait_until
from tests.fake_prolific import FakeProlific
from tests.test_pipeline import STUDENT_ANSWERS

pytest_plugins = ["tests.fake_prolific"]

RIGHT = {q.name: q.answer for q in onboarding.quiz_for("student").questions}


def shell(started: Settings, **exported) -> Settings:  # noqa: ANN003
    """The settings of a shell with these variables exported beside what the processes were started with."""
    return started.model_copy(update=exported)


def run(settings: Settings, *args: str):  # noqa: ANN201
    result = CliRunner().invoke(main, list(args), obj=App(settings_=settings), catch_exceptions=False)
    return result


def form_of(page: str) -> tuple[str, str]:
    """The form's action and its turkflow token."""
    action = html.unescape(re.search(r'<form[^>]* action="([^"]+)"', page).group(1))
    return action, html.unescape(re.search(r'name="turkflow_form" value="([^"]+)"', page).group(1))


def participant_takes(fake: FakeProlific, browser: requests.Session, study_id: str, participant_id: str,
                      answers: dict[str, str]) -> str:
    """A participant opens the study on the fake (which sends them to our page), sends ``answers``, and comes
    back to the fake with the completion code our page gave; returns the submission's status after."""
    page = browser.get(f"{fake.url}/participant/take?study={study_id}&participant={participant_id}", timeout=30)
    assert page.status_code == 200, page.text[:500]
    action, token = form_of(page.text)
    sent = browser.post(urlsplit(page.url)._replace(path=urlsplit(action).path, query=urlsplit(action).query).geturl(),
                        data={**answers, "turkflow_form": token}, allow_redirects=False, timeout=30)
    assert sent.status_code == 303, sent.text[:500]
    code = parse_qs(urlsplit(sent.headers["Location"]).query)["cc"][0]
    done = browser.get(f"{fake.url}/participant/complete?cc={code}", timeout=30)
    assert done.status_code == 200, done.text
    return done.text.strip().rsplit(": ", 1)[1]


def test_rehearse_prints_the_exports_and_ends_with_the_fakes_studies(tmp_path):
    result = CliRunner().invoke(prolific_rehearse, ["--stop-after", "0"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    exports = dict(line.removeprefix("export ").split("=", 1) for line in result.stdout.splitlines()
                   if line.startswith("export "))
    assert exports["TURKFLOW_PROLIFIC_BASE_URL"].startswith("http://127.0.0.1:")
    assert exports["TURKFLOW_PUBLIC_URL"] == REHEARSAL_URL
    assert exports["TURKFLOW_PROLIFIC_REHEARSAL_HOST"] == REHEARSAL_HOST
    assert exports["TURKFLOW_PROLIFIC_TOKEN"] and exports["TURKFLOW_PROLIFIC_WORKSPACE_ID"]
    assert "the fake Prolific holds no study: nothing was published" in result.stdout


def test_the_readmes_prolific_walk_on_the_rehearsal_publishes_nothing_the_lab_did_not_mean(
        tmp_path: Path, database_url, redis_url, fake_prolific, capsys):
    from turkflow.web import create_app
    from turkflow.workers import app as celery_module, prolific_tasks

    # README step 1-2: the workspace, the public address, and turkflow's processes, started once.
    started = Settings(data_dir=tmp_path / "var", database_url=database_url, redis_url=redis_url,
                       secret_key="test-secret", worker_hash_key="test-hash-key", provider="prolific",
                       public_url=REHEARSAL_URL, prolific_rehearsal_host=REHEARSAL_HOST,
                       prolific_token=fake_prolific.token, prolific_workspace_id=fake_prolific.workspace_id,
                       prolific_base_url=fake_prolific.url, stuck_after_seconds=0, reopen_after_seconds=0,
                       review_after_seconds=0)
    web = LiveServer(create_app(started))
    fake_prolific.rehearsal_web = (REHEARSAL_URL, web.url)
    celery = celery_module.configure(started, registry.providers(started))
    browser = requests.Session()
    with web, celery_worker_of(celery):
        assert run(started, "prolific", "check").exit_code == 1  # no onboarding yet
        assert run(started, "tasks", "load", str(sample_tasks_path())).exit_code == 0

        # Step 5, the test step, as Prolific runs test studies: one test participant, test onboarding studies.
        trial = shell(started, prolific_test_studies=True)
        made = run(trial, "prolific", "test-participant", "you@lab.example.org")
        assert made.exit_code == 0, made.stderr
        tester = made.stdout.split()[2]
        assert run(trial, "prolific", "test-participant", "second@lab.example.org").exit_code == 1
        for role in ("student", "teacher"):
            done = run(trial, "prolific", "onboarding", "--role", role, "--reward", "0.50", "--places", "5")
            assert done.exit_code == 0 and "test onboarding study" in done.stdout, done.stderr
        with session_scope(started.database_url) as s:
            quiz = s.exec(select(ProlificOnboarding).where(ProlificOnboarding.role == "student")).one()
        assert participant_takes(fake_prolific, browser, quiz.study_id, tester, RIGHT) == "APPROVED"
        assert tester in fake_prolific.groups[quiz.group_id].members
        assert run(trial, "prolific", "check").exit_code == 0, run(trial, "prolific", "check").stderr
        launched = run(trial, "batch", "launch", "--provider", "prolific", "--all", "-n", "1", "--max-turns", "4",
                       "--reward", "0.50")  # no confirmation asked: test studies
        assert launched.exit_code == 0 and "Prolific's test studies" in launched.stdout, launched.stderr
        with session_scope(started.database_url) as s:
            trial_batch = s.exec(select(Batch)).one().id
            student_study = s.exec(select(ProlificStudy.study_id).where(ProlificStudy.role == "student")).one()
        assert participant_takes(fake_prolific, browser, student_study, tester, STUDENT_ANSWERS) == "AWAITING REVIEW"

        def teacher_study() -> str | None:  # made by the worker started before the exports
            with session_scope(started.database_url) as s:
                return s.exec(select(ProlificStudy.study_id).where(ProlificStudy.batch_id == trial_batch,
                                                                   ProlificStudy.role == "teacher")).first()

        assert wait_until(teacher_study)
        assert fake_prolific.studies[teacher_study()].test
        spend = run(trial, "prolific", "spend")
        assert "Prolific, test studies:" in spend.stdout and "refunded by Prolific within 24 hours" in spend.stdout
        cancelled = run(trial, "batch", "cancel", str(trial_batch), "-y")
        assert cancelled.exit_code == 0, cancelled.output
        prolific_tasks.poll_prolific.delay()  # beat's round stops the cancelled batch's studies
        assert wait_until(lambda: {fake_prolific.studies[s].status for s in (student_study, teacher_study())}
                          == {"COMPLETED"})

        # The real collection: test studies off; real onboarding studies in place of the test ones.
        real = shell(started)
        for role in ("student", "teacher"):
            replaced = run(real, "prolific", "onboarding", "--role", role, "--reward", "0.50", "--places", "20",
                           "--replace")
            assert replaced.exit_code == 0 and "test" not in replaced.stdout.split(":")[0], replaced.stderr
        assert run(real, "prolific", "check").exit_code == 0
        launched = run(real, "batch", "launch", "--provider", "prolific", "--all", "-n", "1", "--reward", "0.50",
                       "-y")
        assert launched.exit_code == 0 and "Prolific (real studies)" in launched.stdout, launched.stderr

    assert fake_prolific.refund_test_charges() == 50  # the test participant's pay for the quiz, refunded
    capsys.readouterr()
    show_listing(fake_prolific.listing())
    listing = capsys.readouterr().out
    assert "published for real: 3 (" in listing
    real_published = {s["name"] for s in fake_prolific.listing() if s["kind"] == "real" and s["published"]}
    quiz_titles = {onboarding.quiz_for(role).title for role in ("student", "teacher")}
    assert real_published == quiz_titles | {f"Student: {started.prolific_study_name}"}
    for study in fake_prolific.listing():
        assert study["url"].startswith(REHEARSAL_URL + "/prolific/")
        if study["kind"] == "test" and study["name"].startswith(("Student:", "Teacher:")):
            assert study["status"] == "COMPLETED"  # the test batch's studies stopped with it
