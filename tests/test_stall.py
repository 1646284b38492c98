"""A batch whose waiting turns have no eligible worker left says so, once, and clears by itself."""

import re
from datetime import timedelta
from html import unescape

from sqlmodel import select

from tests.quality_factories import Crowd
from turkflow.access import OPERATOR
from turkflow.db import session_scope
from turkflow.models import Event, Worker, utcnow
from turkflow.quality import monitor, stall

GRACE = timedelta(minutes=10)


def _sweep(settings, at):
    with session_scope(settings.database_url) as s:
        return stall.sweep(s, at, GRACE)


def _events(settings, kind):
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(Event).where(Event.kind == kind)))


def _block(settings, *workers):
    with session_scope(settings.database_url) as s:
        for worker in workers:
            monitor.block_worker(s, s.get(Worker, worker.id), permanent=False, actor="system", reason="test")


def test_every_student_blocked_stalls_the_batch_once_after_the_grace_period(settings, providers):
    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=3)
    ann, bea = crowd.worker("student", "ann"), crowd.worker("student", "bea")
    crowd.worker("teacher", "tom")
    _block(settings, ann, bea)
    start = utcnow()

    assert _sweep(settings, start).stalled == []  # noticed, not yet stalled
    changes = _sweep(settings, start + GRACE)
    assert [(s.batch_id, s.role, s.workers, s.waiting) for s in changes.stalled] == [(batch_id, "student", 2, 3)]
    assert _sweep(settings, start + 2 * GRACE).stalled == []
    [event] = _events(settings, "batch_stalled")
    assert event.data["message"] == ("all 2 students are blocked; 3 turns wait for a student; "
                                     "review the queue or change the policy")
    with session_scope(settings.database_url) as s:
        assert [x.role for x in stall.stalls(s, batch_id)] == ["student"]
        assert stall.stalled_roles(s) == {"student"}


def test_unblocking_one_worker_clears_the_stall(settings, providers):
    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=1)
    ann = crowd.worker("student", "ann")
    _block(settings, ann)
    start = utcnow()
    _sweep(settings, start)
    assert len(_sweep(settings, start + GRACE).stalled) == 1

    with session_scope(settings.database_url) as s:
        monitor.unblock_worker(s, s.get(Worker, ann.id), actor="requester:r")
    changes = _sweep(settings, start + GRACE + timedelta(seconds=1))
    assert [(s.role, s.batch_id) for s in changes.cleared] == [("student", batch_id)]
    assert len(_events(settings, "batch_stall_cleared")) == 1
    with session_scope(settings.database_url) as s:
        assert stall.stalls(s, batch_id) == []


def test_a_short_starvation_that_ends_within_the_grace_period_is_never_reported(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    ann = crowd.worker("student", "ann")
    _block(settings, ann)
    start = utcnow()
    _sweep(settings, start)
    with session_scope(settings.database_url) as s:
        monitor.unblock_worker(s, s.get(Worker, ann.id), actor="requester:r")
    _sweep(settings, start + GRACE / 2)
    assert _sweep(settings, start + 2 * GRACE).stalled == []
    assert _events(settings, "batch_stalled") == [] and _events(settings, "batch_stall_cleared") == []


def test_workers_who_never_onboarded_or_never_came_do_not_make_a_stall(settings, providers):
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=1)
    with session_scope(settings.database_url) as s:
        s.add(Worker(external_id="new", role="student", onboarded=False))
    start = utcnow()
    _sweep(settings, start)
    assert _sweep(settings, start + GRACE).stalled == []
    with session_scope(settings.database_url) as s:
        assert [(x.role, x.workers, x.eligible, x.waiting) for x in stall.role_supply(s, crowd.batch_id)] == [
            ("student", 0, 0, 1), ("teacher", 0, 0, 0)]


def test_inviting_and_onboarding_a_new_student_clears_the_stall(settings, providers):
    from turkflow import invites
    from turkflow.hits import onboarding

    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=1)
    _block(settings, crowd.worker("student", "ann"))
    start = utcnow()
    _sweep(settings, start)
    assert len(_sweep(settings, start + GRACE).stalled) == 1

    with session_scope(settings.database_url) as s:
        newcomer, _ = invites.invite_worker(s, settings.secret_key, settings.public_url, "student",
                                            name="Cleo")
    assert _sweep(settings, start + GRACE + timedelta(seconds=1)).cleared == []  # invited, not yet onboarded
    with session_scope(settings.database_url) as s:
        quiz = onboarding.quiz_for("student")
        answers = {q.name: q.answer for q in quiz.questions}
        assert onboarding.onboard_worker(s, s.get(Worker, newcomer.id), answers,
                                         settings.onboarding_pass_percent).passed
    changes = _sweep(settings, start + GRACE + timedelta(seconds=2))
    assert [(x.batch_id, x.role) for x in changes.cleared] == [(batch_id, "student")]
    with session_scope(settings.database_url) as s:
        assert stall.stalls(s, batch_id) == []


def _prolific_batch_with_one_student_turn(settings):
    """A Prolific batch of two conversations whose first student turn a participant wrote (arriving from
    Prolific, as ``hits.prolific.pages`` records them); its HITs are never published."""
    from tests.test_pipeline import STUDENT_ANSWERS
    from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
    from turkflow.hits import lifecycle
    from turkflow.hits.prolific.provider import worker_external_id
    from turkflow import states
    from turkflow.models import Assignment, HitStatus, Task

    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), 2, name="prolific",
                                             provider="prolific")
        participant = Worker(external_id=worker_external_id("P1"), role="student", onboarded=True)
        s.add(participant)
        s.flush()
        states.move(hits[0], HitStatus.open)  # as publishing would, without asking Prolific
        s.add(Assignment(hit_id=hits[0].id, worker_id=participant.id, external_id="SUBMISSION1"))
        s.flush()
        lifecycle.submit_turn(s, "SUBMISSION1", participant, STUDENT_ANSWERS)
        return batch.id, participant


def test_a_local_worker_who_cannot_take_a_prolific_batchs_turns_does_not_hide_its_stall(settings, providers):
    from turkflow import invites

    batch_id, participant = _prolific_batch_with_one_student_turn(settings)
    with session_scope(settings.database_url) as s:  # on the local queue: never sees a Prolific study
        invites.invite_worker(s, settings.secret_key, settings.public_url, "student", name="Lou",
                              onboarded=True)
    _block(settings, participant)
    start = utcnow()
    _sweep(settings, start)
    changes = _sweep(settings, start + GRACE)
    assert [(x.batch_id, x.role, x.workers, x.waiting) for x in changes.stalled] == [
        (batch_id, "student", 1, 1)]

    local_batch = Crowd(settings, providers).launch(conversations=1)  # and the participant is no local supply
    with session_scope(settings.database_url) as s:
        assert [(x.role, x.workers, x.eligible) for x in stall.role_supply(s, local_batch)] == [
            ("student", 1, 1), ("teacher", 0, 0)]


# ---- acceptance: a batch driven until every student is blocked -------------------------------------------


def _drive_until_students_are_blocked(settings, providers):
    """Two students, each rated 'not relevant' twice under k=2,p=0.5: both blocked, four student turns wait."""
    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=4, quality=monitor.Policy.parse("k=2,p=0.5").batch_fields())
    ann, bea, tom = crowd.worker("student", "ann"), crowd.worker("student", "bea"), crowd.worker("teacher", "tom")
    conversations = crowd.conversations()
    for student, pair in ((ann, conversations[:2]), (bea, conversations[2:])):
        for conversation_id in pair:
            crowd.submit(student, conversation_id, "How do I start with this recipe today?")
            crowd.submit(tom, conversation_id, "Start by reading the list of ingredients.", relevant=False)
    with session_scope(settings.database_url) as s:
        assert {s.get(Worker, w.id).status for w in (ann, bea)} == {"temporarily_blocked"}
    return crowd, batch_id, ann


def test_a_batch_whose_students_are_all_blocked_reports_the_stall_everywhere_until_one_is_unblocked(
        settings, providers, live_server, browser_context):
    from tests.test_cli import environment
    from click.testing import CliRunner
    from turkflow import pipeline
    from turkflow.cli.main import main
    from turkflow.requesters import create_requester

    crowd, batch_id, ann = _drive_until_students_are_blocked(settings, providers)
    now_settings = settings.model_copy(update={"stall_after_seconds": 0})
    pipeline.reconcile(now_settings, providers)
    pipeline.reconcile(now_settings, providers)
    assert [e.data["role"] for e in _events(settings, "batch_stalled")] == ["student"]  # recorded once

    status = CliRunner().invoke(main, ["batch", "status", str(batch_id)], env=environment(settings))
    assert status.exit_code == 0, status.output
    assert ("stalled: all 2 students are blocked; 4 turns wait for a student; review the queue or change "
            "the policy") in status.output.splitlines()

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    page = browser_context.new_page()
    page.goto(f"{live_server.url}/admin/batches/{batch_id}")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "correct horse")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/batches/{batch_id}")
    banner = page.locator("p.stalled")
    assert banner.inner_text() == ("Stalled: all 2 students are blocked; 4 turns wait for a student; review the "
                                   "queue or change the policy.")
    assert banner.evaluate("e => getComputedStyle(e).color") == "rgb(180, 35, 24)"  # red

    with session_scope(settings.database_url) as s:
        monitor.unblock_worker(s, s.get(Worker, ann.id), actor="requester:ada")
    pipeline.reconcile(now_settings, providers)
    page.reload()
    assert page.locator("p.stalled").count() == 0
    status = CliRunner().invoke(main, ["batch", "status", str(batch_id)], env=environment(settings))
    assert "stalled:" not in status.output
    assert len(_events(settings, "batch_stall_cleared")) == 1
    crowd.submit(ann, crowd.conversations()[0], "What comes after the ingredients?")  # the batch moves again


def test_the_review_queue_lists_workers_of_a_stalled_role_first(settings, providers):
    from turkflow.quality import dashboard, review

    with session_scope(settings.database_url) as s:  # blocked first, but teachers can still work: no stall
        early = Worker(external_id="early", role="teacher", onboarded=True)
        s.add(early)
        s.flush()
        monitor.block_worker(s, early, permanent=False, actor="system", reason="test")
    crowd, batch_id, _ = _drive_until_students_are_blocked(settings, providers)
    with session_scope(settings.database_url) as s:
        review.daily_review(s, review.ReviewPolicy())
        stall.sweep(s, utcnow(), timedelta(0))
    with session_scope(settings.database_url) as s:
        assert stall.stalled_roles(s) == {"student"}
        queue = dashboard.review_queue(s, OPERATOR, None, "pending")
        assert [item.worker.role for item in queue.items] == ["student", "student", "teacher"]
        assert queue.stalled == [f"Batch {batch_id} “quality” is stalled: all 2 students are blocked; 4 turns "
                                 "wait for a student; review the queue or change the policy"]


# ---- the review queue of a stalled role ------------------------------------------------------------------


def _stalled_queue(settings, providers, *, students, teachers):
    """A local batch whose waiting student turn has nobody left: ``teachers`` blocked teachers (invited first,
    so their entries come first by id; teachers have no waiting turn, so no stall) and ``students`` blocked
    students. The day's queue is built and the stall confirmed. Returns the batch, student and teacher ids."""
    from turkflow.quality import review

    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=1)
    teachers = [crowd.worker("teacher", f"t{i}") for i in range(teachers)]
    students = [crowd.worker("student", f"s{i}") for i in range(students)]
    _block(settings, *teachers, *students)
    with session_scope(settings.database_url) as s:
        review.daily_review(s, review.ReviewPolicy())
        stall.sweep(s, utcnow(), timedelta(0))
    return batch_id, [w.id for w in students], [w.id for w in teachers]


def _signed_in(settings, client):
    from tests.test_dashboard import sign_in
    from turkflow.requesters import create_requester

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    assert sign_in(client).status_code == 302


def test_the_review_page_walks_every_worker_of_the_stalled_role_first_then_the_rest_each_once(
        settings, providers, client):
    _, students, teachers = _stalled_queue(settings, providers, students=25, teachers=17)
    _signed_in(settings, client)
    seen, url, pages = [], "/admin/review", 0
    while url:
        page = client.get(url)
        assert page.status_code == 200, url
        html = page.get_data(as_text=True)
        seen += [int(i) for i in re.findall(r'<article class="card entry" id="worker-(\d+)"', html)]
        following = re.search(r'<p class="pager"><a href="([^"]+)">Next workers', html)
        url = unescape(following.group(1)) if following else None
        pages += 1
    assert seen == students + teachers  # 20 students; 5 students and 15 teachers; 2 teachers
    assert pages == 3


def test_the_review_page_shows_the_stall_in_a_banner_above_the_queue(settings, providers, client):
    batch_id, students, _ = _stalled_queue(settings, providers, students=2, teachers=1)
    _signed_in(settings, client)
    html = client.get("/admin/review").get_data(as_text=True)
    banner = (f'<p class="stalled" role="alert">Batch {batch_id} “quality” is stalled: all 2 students are '
              "blocked; 1 turn waits for a student; review the queue or change the policy. Their blocked "
              "workers are listed first below.</p>")
    assert banner in html
    assert html.index(banner) < html.index(f'id="worker-{students[0]}"')


def test_review_list_puts_the_stalled_role_first_and_marks_it(settings, providers):
    from click.testing import CliRunner

    from tests.test_cli import environment
    from turkflow.cli.main import main

    _, students, teachers = _stalled_queue(settings, providers, students=2, teachers=2)
    result = CliRunner().invoke(main, ["review", "list"], env=environment(settings))
    assert result.exit_code == 0, result.output
    cells = [[c.strip() for c in line.split("│")[1:4]] for line in result.output.splitlines()
             if re.match(r"│ \d+ ", line)]
    assert cells == ([[str(i), f"s{n}", "student (stalled)"] for n, i in enumerate(students)]
                     + [[str(i), f"t{n}", "teacher"] for n, i in enumerate(teachers)])


# ---- batch status shows a stall while watching and in the table ----------------------------------------


def test_batch_status_watch_prints_a_stall_when_it_happens_and_when_it_clears(settings, providers):
    import subprocess
    import threading

    from tests.conftest import wait_until
    from tests.test_cli import TURKFLOW, environment
    from turkflow.hits import lifecycle
    from turkflow.models import Batch, BatchStatus

    crowd = Crowd(settings, providers)
    batch_id = crowd.launch(conversations=1)
    ann = crowd.worker("student", "ann")
    watch = ["batch", "status", str(batch_id), "--watch", "--interval", "0.2"]
    watcher = subprocess.Popen([str(TURKFLOW), *watch],
                               env={"PATH": "/usr/bin:/bin", **environment(settings)}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watcher.stdout), daemon=True)
    reader.start()
    try:
        _block(settings, ann)
        start = utcnow()
        _sweep(settings, start)
        _sweep(settings, start + GRACE)
        stalled = ("stalled: the only student is blocked; 1 turn waits for a student; review the queue or "
                   "change the policy\n")
        wait_until(lambda: stalled in lines or watcher.poll() is not None)
        assert watcher.poll() is None, watcher.stderr.read()  # still watching: the batch has not ended

        with session_scope(settings.database_url) as s:
            monitor.unblock_worker(s, s.get(Worker, ann.id), actor="requester:r")
        _sweep(settings, start + GRACE + timedelta(seconds=1))
        wait_until(lambda: "stall cleared: student\n" in lines or watcher.poll() is not None)
        with session_scope(settings.database_url) as s:
            lifecycle.set_batch_status(s, s.get(Batch, batch_id), BatchStatus.cancelled, "requester:r")
        assert watcher.wait(timeout=60) == 0, watcher.stderr.read()
    finally:
        if watcher.poll() is None:
            watcher.kill()
    reader.join(timeout=60)
    assert lines.count(stalled) == 1 and lines.count("stall cleared: student\n") == 1
    [ended] = [n for n, line in enumerate(lines) if line.startswith(f'batch {batch_id} "quality": cancelled')]
    assert lines.index(stalled) < lines.index("stall cleared: student\n") < ended


def test_the_table_of_recent_batches_marks_a_stalled_batch(settings, providers):
    from click.testing import CliRunner

    from tests.test_cli import environment
    from turkflow.cli.main import main

    crowd = Crowd(settings, providers)
    stalled_batch = crowd.launch(conversations=1)
    _block(settings, crowd.worker("student", "ann"))
    _sweep(settings, utcnow() - GRACE)
    _sweep(settings, utcnow())
    moving_batch = Crowd(settings, providers).launch(conversations=1)
    result = CliRunner().invoke(main, ["batch", "status"], env=environment(settings))
    assert result.exit_code == 0, result.output
    statuses = {int(cells[1]): cells[4] for line in result.output.splitlines()
                if len(cells := [c.strip() for c in line.split("│")]) > 4 and cells[1].isdigit()}
    assert statuses == {stalled_batch: "active (stalled: student)", moving_batch: "active"}


# ---- named policies at launch ---------------------------------------------------------------------------


def _launch(settings, *args):
    from click.testing import CliRunner

    from tests.test_cli import SAMPLES, environment
    from turkflow.cli.main import main

    runner = CliRunner()
    env = environment(settings)
    assert runner.invoke(main, ["tasks", "load", SAMPLES], env=env).exit_code == 0
    return runner.invoke(main, ["batch", "launch", "--all", "-n", "1", *args], env=env)


def _batches(settings):
    from turkflow.models import Batch

    with session_scope(settings.database_url) as s:
        return [monitor.Policy.of(b).text for b in s.exec(select(Batch))]


def test_launch_with_the_probation_policy_names_it_and_stores_its_rules(settings):
    result = _launch(settings, "--policy", "probation")
    assert result.exit_code == 0, result.output
    assert "quality policy: probation (pooled k=6,p=0.5 for 6, then k=20,p=0.4)" in result.output.splitlines()
    assert "stall" not in result.output
    assert _batches(settings) == ["pooled k=6,p=0.5 for 6, then k=20,p=0.4"]


def test_launch_on_the_paper_policy_warns_of_the_stall_risk_and_points_to_the_simulator(settings):
    result = _launch(settings)  # the default settings are the paper's rule
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "quality policy: paper (k=5,p=0.5)" in lines
    warning = lines[lines.index("quality policy: paper (k=5,p=0.5)") + 1]
    assert "stall the batch" in warning and "turkflow simulate" in warning
    assert _batches(settings) == ["k=5,p=0.5"]


def test_launch_with_an_unknown_policy_is_one_line_naming_the_option_and_launches_nothing(settings):
    result = _launch(settings, "--policy", "lenient")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "--policy" in result.output and "probation" in result.output
    assert _batches(settings) == []


# ---- the simulator reports a stall ----------------------------------------------------------------------


def test_simulate_reports_the_stall_the_paper_policy_causes_and_probation_avoids(tmp_path):
    """A quarter of each role rates at random: the paper's rule blocks every student; probation does not.

    The two simulations run side by side, each on its own stack (one web worker: the stack's size is not
    what this is about) in its own directory: half a minute each is mostly starting processes."""
    import subprocess

    from tests.test_cli import TURKFLOW

    crowd = ["--students", "4", "--teachers", "4", "--careless", "0.25", "--spammers", "0.25",
             "--conversations", "16", "--max-turns", "10", "--seed", "7", "--web-workers", "1"]
    running = {}
    for policy in ("paper", "probation"):
        (tmp_path / policy).mkdir()
        running[policy] = subprocess.Popen([str(TURKFLOW), "simulate", *crowd, "--policy", policy],
                                           cwd=tmp_path / policy, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           text=True)
    try:
        done = {policy: (process.communicate(timeout=600), process.returncode) for policy, process in running.items()}
    finally:  # a SIGTERM stops a simulation's stack with it
        for process in running.values():
            if process.poll() is None:
                process.terminate()
                process.wait()
    for (stdout, stderr), status in done.values():
        assert status == 0, stderr

    paper, probation = (done[policy][0][0].splitlines() for policy in ("paper", "probation"))
    assert "(every student is blocked; the open turns wait for a review)" in paper[0]
    assert [line for line in paper if line.startswith("stalled:")] == [
        "stalled: all 4 students are blocked; 16 turns wait for a student; review the queue or change the policy "
        "(the batch cannot finish; compare policies with --compare)"]
    assert "in 16/16 completed conversations" in probation[0]
    assert not [line for line in probation if line.startswith("stalled:")]
