"""What a new user meets first: the demo, its links and pages, the first CLI commands from the wrong folder,
the onboarding quiz, and a finished batch's money."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from click.testing import CliRunner
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_cli import environment, ok, one_line_error
from tests.test_stacks import default_control_socket, gunicornc_master_pid  # noqa: F401 (a fixture)
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


# ---- make demo, end to end --------------------------------------------------------------------------


WITH_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                       "os.execv(sys.argv[1], sys.argv[1:])")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def master_answering(control_socket: Path) -> int | None:
    """The pid of the gunicorn master answering on its control socket, or None while none answers."""
    try:
        return gunicornc_master_pid(control_socket)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError, KeyError):
        return None


def test_the_demo_serves_its_links_and_root_page_survives_a_killed_web_and_ctrl_c_ends_it_with_status_0(
        tmp_path, default_control_socket):
    """One demo start (the slowest thing a test does) for everything a user meets in it. Its web killed with
    SIGKILL leaves workers behind until they notice (gunicorn's worker timeout); the gunicorn started again
    takes its Unix socket over at once, and the front server (nginx) keeps the port all along."""
    port, redis_port, data = free_port(), free_port(), tmp_path / "var"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TURKFLOW_")},
           "TURKFLOW_DATA_DIR": str(data), "TURKFLOW_PORT": str(port),
           "TURKFLOW_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "WEB_CONCURRENCY": "1"}
    out = tmp_path / "demo.out"
    with out.open("w") as sink:
        # a process group of its own, and Ctrl-C's default disposition, as a terminal gives them: a suite run
        # from a background job inherits SIGINT ignored, and a shell cannot trap a signal ignored on entry
        demo = subprocess.Popen([sys.executable, "-c", WITH_DEFAULT_SIGINT, str(ROOT / "scripts" / "demo.sh")],
                                env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # the timeouts guard against a hang, they time nothing: the demo either prints its links or exits, and a
        # start at load 24 on 2 cores (four Celery processes loading spaCy) took longer than 180 s
        wait_until(lambda: "Ctrl-C stops everything" in out.read_text() or demo.poll() is not None,
                   timeout=900, interval=0.5)
        printed = out.read_text()
        assert demo.poll() is None, printed
        assert re.search(r"started \S*\s*turns reviews platform beat web front", printed), printed  # a worker a queue
        links = re.findall(r"(?:student|teacher):\s+(\S+)", printed)
        assert len(links) == 2 and all(link.startswith(f"http://127.0.0.1:{port}/join/") for link in links)
        second_terminal = subprocess.run([str(ROOT / ".venv" / "bin" / "turkflow"), "worker", "link",
                                          "demo-student"], env=env, cwd=ROOT, capture_output=True, text=True,
                                         timeout=60)
        assert second_terminal.stdout.strip() == links[0], second_terminal.stderr
        root = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert root.status_code == 200 and "join link" in root.text
        killed = gunicornc_master_pid(data / "gunicorn.ctl")
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: master_answering(data / "gunicorn.ctl") not in (None, killed) or demo.poll() is not None,
                   timeout=600, interval=0.5)
        assert demo.poll() is None, out.read_text()
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
        assert out.read_text().count("web exited") == 1, out.read_text()  # started again once: none gave up
        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C does
        assert demo.wait(timeout=60) == 0, out.read_text()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
