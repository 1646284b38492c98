"""What a new user meets first (the demo itself: tests/test_wheel.py): its links and pages, the first CLI
commands from the wrong folder, the onboarding quiz, and a finished batch's money."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.test_cli import environment, ok, one_line_error
from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS, launch, make_worker
from tests.test_worker_pages import FIRST_STUDENT_ANSWERS, joined
from turkflow import pipeline
from turkflow.dataset.analysis import figures
from turkflow.cli.main import main, shown_url
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle, money, onboarding
from turkflow.models import Assignment, AssignmentStatus, Batch, Worker

ROOT = Path(__file__).resolve().parents[1]


def write_turn(settings, providers, worker, answers):  # noqa: ANN001, ANN201
    """The worker takes the open turn of their role and submits it; the next turn opens (no Celery)."""
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, worker)[0]
        assignment = lifecycle.take_turn(s, worker, hit.id, lease_seconds=60)
        turn = lifecycle.submit_turn(s, assignment.external_id, worker, answers).turn
    pipeline.open_next_turn(settings, providers, turn.conversation_id)
    return turn


# ---- money: local rewards are approved ----------------------------------------------------------------


def test_local_turns_are_approved_after_the_review_delay_so_their_rewards_count_as_spent(settings, providers):
    batch_id = launch(settings, providers, max_turns=2)
    write_turn(settings, providers, make_worker(settings, "student", "s1"), FIRST_STUDENT_ANSWERS)
    write_turn(settings, providers, make_worker(settings, "teacher", "t1"), TEACHER_ANSWERS)

    def spent():  # noqa: ANN202
        with session_scope(settings.database_url) as s:
            return money.spend(s, batch_id=batch_id)

    assert (spent().rewards_cents, spent().pending_cents) == (0, 40)
    waiting = pipeline.reconcile(settings.model_copy(update={"local_approve_after_seconds": 3600}), providers)
    assert waiting.assignments_approved == [] and spent().rewards_cents == 0
    due = pipeline.reconcile(settings.model_copy(update={"local_approve_after_seconds": 0}), providers)
    assert len(due.assignments_approved) == 2
    assert (spent().rewards_cents, spent().pending_cents) == (40, 0)
    with session_scope(settings.database_url) as s:
        assert {a.status for a in s.exec(select(Assignment))} == {AssignmentStatus.approved}
    again = pipeline.reconcile(settings.model_copy(update={"local_approve_after_seconds": 0}), providers)
    assert again.assignments_approved == []


# ---- onboarding is enforced ---------------------------------------------------------------------------


def test_an_invited_worker_passes_the_onboarding_quiz_before_taking_a_turn(settings, providers, app):
    launch(settings, providers)
    link = ok(CliRunner().invoke(main, ["worker", "invite", "--role", "student", "--name", "Ann"],
                                 env=environment(settings))).strip()
    browser = app.test_client()
    browser.get(urlsplit(link).path)
    # POSTs carry the CSRF token the queue hands out (where the app asks for one), as the page's forms do
    token = browser.get("/queue", headers={"Accept": "application/json"}).get_json().get("csrf_token", "")
    browser.environ_base["HTTP_X_CSRFTOKEN"] = token
    queue = browser.get("/queue")
    assert (queue.status_code, queue.headers["Location"]) == (303, "/onboarding")
    with session_scope(settings.database_url) as s:
        ann = s.exec(select(Worker).where(Worker.name == "Ann")).one()
        hit_id = lifecycle.open_hits_for(s, ann)[0].id
    refused = browser.post(f"/queue/take/{hit_id}", headers={"Accept": "application/json"})
    assert refused.status_code == 403 and "onboarding quiz first" in refused.get_json()["error"]
    assert "before your first turn" in browser.get("/onboarding").get_data(as_text=True)
    quiz = onboarding.quiz_for("student")
    assert browser.post("/onboarding", data={q.name: q.answer for q in quiz.questions}).status_code == 303
    assert browser.get("/queue").status_code == 200
    assert browser.post(f"/queue/take/{hit_id}").status_code == 303


def test_worker_invite_onboarded_skips_the_quiz(settings):
    invite = ["worker", "invite", "--role", "teacher", "--name", "Lab", "--onboarded"]
    result = CliRunner().invoke(main, invite, env=environment(settings))
    ok(result)
    assert "onboarded already" in result.stderr
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Worker)).one().onboarded is True


# ---- the CLI says which database it reads, and never makes an empty one -------------------------------


@pytest.mark.parametrize("command", [["batch", "status"], ["batch", "status", "1"], ["tasks", "list"],
                                     ["worker", "list"], ["worker", "link", "Ann"], ["review", "list"],
                                     ["review", "block", "Ann"], ["export", "--out", "dataset"],
                                     ["batch", "pause", "1"], ["mturk", "spend"]])
def test_a_read_only_command_in_a_folder_without_a_database_says_so_and_creates_nothing(tmp_path, command):
    elsewhere = tmp_path / "elsewhere" / "var"
    env = {"TURKFLOW_DATA_DIR": str(elsewhere), "TURKFLOW_DATABASE_URL": ""}
    error = one_line_error(CliRunner().invoke(main, command, env=env))
    assert error == (f"error: no turkflow database at {(elsewhere / 'turkflow.db').resolve()}; "
                     "run `turkflow db upgrade` or set TURKFLOW_DATA_DIR")
    assert not (tmp_path / "elsewhere").exists()


def test_batch_status_names_the_database_it_reads(settings, providers):
    env = environment(settings)
    runner = CliRunner()
    database = shown_url(settings.database_url)
    assert f"no batches yet in {database}" in ok(runner.invoke(main, ["batch", "status"], env=env))
    batch_id = launch(settings, providers)
    assert ok(runner.invoke(main, ["batch", "status"], env=env)).startswith(f"database: {database}\n")
    one = ok(runner.invoke(main, ["batch", "status", str(batch_id)], env=env))
    assert f"database       {database}" in one


# ---- links follow TURKFLOW_PORT ----------------------------------------------------------------------


def test_links_printed_in_a_second_terminal_follow_turkflow_port(settings):
    env = {**environment(settings), "TURKFLOW_PUBLIC_URL": "", "TURKFLOW_PORT": "5077"}
    runner = CliRunner()
    link = ok(runner.invoke(main, ["worker", "invite", "--role", "student"], env=env)).strip()
    assert link.startswith("http://127.0.0.1:5077/join/")
    created = ok(runner.invoke(main, ["admin", "create", "ada", "--password-stdin"], env=env,
                               input="a long enough password\n"))
    assert "http://127.0.0.1:5077/admin/" in created
    assert Settings(port=5077, public_url="", secret_key="k", worker_hash_key="k").public_url == \
        "http://127.0.0.1:5077"
    assert Settings(port=5077, public_url="https://lab.example", secret_key="k",
                    worker_hash_key="k").public_url == "https://lab.example"


# ---- pages ------------------------------------------------------------------------------------------


def test_the_root_page_tells_a_visitor_to_use_their_join_link_and_where_the_dashboard_is(client):
    page = client.get("/")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and "join link" in text and 'href="/admin/"' in text


def test_the_root_page_sends_a_signed_in_worker_to_their_queue(app, settings):
    browser = joined(app, settings, "student")
    root = browser.get("/")
    assert (root.status_code, root.headers["Location"]) == (303, "/queue")


def test_every_page_links_a_favicon_that_is_served(client):
    for path in ("/", "/admin/login"):
        icon = re.search(r'<link rel="icon"[^>]* href="([^"]+)"', client.get(path).get_data(as_text=True))
        assert icon, path
        served = client.get(icon.group(1))
        assert served.status_code == 200 and served.mimetype == "image/svg+xml"
    legacy = client.get("/favicon.ico", follow_redirects=True)
    assert legacy.status_code == 200 and legacy.mimetype == "image/svg+xml"


def test_after_the_last_turn_the_page_says_the_conversation_is_complete(app, settings, providers):
    launch(settings, providers, max_turns=2)
    student, teacher = joined(app, settings, "student"), joined(app, settings, "teacher")
    first = write_turn(settings, providers, student.worker, FIRST_STUDENT_ANSWERS)
    page = student.get(f"/queue?submitted={first.id}").get_data(as_text=True)
    assert "continues with the next worker" in page and "complete" not in page
    last = write_turn(settings, providers, teacher.worker, TEACHER_ANSWERS)
    page = teacher.get(f"/queue?submitted={last.id}").get_data(as_text=True)
    assert "the conversation is complete" in page and "continues" not in page
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).one().status == "completed"


def test_a_student_who_stops_hears_the_conversation_goes_on_and_the_teacher_who_closes_hears_it_ended(
        app, settings, providers):
    launch(settings, providers, max_turns=8)
    student, teacher = joined(app, settings, "student"), joined(app, settings, "teacher")
    write_turn(settings, providers, student.worker, FIRST_STUDENT_ANSWERS)
    write_turn(settings, providers, teacher.worker, TEACHER_ANSWERS)
    stop = write_turn(settings, providers, student.worker, {**STUDENT_ANSWERS, "intent": "stop"})
    page = student.get(f"/queue?submitted={stop.id}").get_data(as_text=True)
    assert "continues with the next worker" in page
    closing = write_turn(settings, providers, teacher.worker, TEACHER_ANSWERS)
    assert "conversation is complete" in teacher.get(f"/queue?submitted={closing.id}").get_data(as_text=True)


# ---- figures ----------------------------------------------------------------------------------------


def test_count_axes_of_the_figures_have_whole_number_ticks():
    stats = {"conversation_length": {"counts": {"2": 1, "3": 2, "4": 1, "5": 1}},
             "roles": {role: {"tokens": {"counts": {"3": 2, "4": 1, "6": 1}}}
                       for role in ("student", "teacher")},
             "patterns": {role: {"length_distribution": {"1": 0.2, "2": 0.5, "3": 0.3}}
                          for role in ("student", "teacher")}}
    for draw, axes in ((figures.conversation_length, "xy"), (figures.utterance_length, "x"),
                       (figures.pattern_length, "x")):
        fig = draw(stats)
        try:
            ax = fig.axes[0]
            for name in axes:
                ticks = (ax.get_xticks() if name == "x" else ax.get_yticks())
                assert all(float(t).is_integer() for t in ticks), (draw.__name__, name, list(ticks))
        finally:
            figures.plt.close(fig)
