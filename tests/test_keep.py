"""Keeping people (issue 39, part 1; the window is issue 24's affinity): ``batch launch --keep`` says whom a
conversation's next turn of a role goes to: anyone, the worker who wrote that role's last turn while they are
present (``session``), or that worker for SECONDS (a window).

Windows and presence are columns compared with the clock the code uses (``utcnow``): tests end them by moving
them back in the database, never by sleeping.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

from click.testing import CliRunner
from sqlmodel import select

from tests.conftest import wait_until
from tests.test_cli import SAMPLES, environment, ok, one_line_error
from tests.test_dashboard import sign_in
from tests.test_pipeline import STUDENT_ANSWERS, TEACHER_ANSWERS
from tests.test_simulator import DIALOGS
from tests.test_worker_pages import FIRST_STUDENT_ANSWERS, JSON, joined, open_turns
from turkflow.cli.main import main
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.hits import lifecycle
from turkflow.hits.keep import Keep
from turkflow.models import Batch, Hit, KeepRule, Task, Turn, Worker, WorkerStatus, utcnow
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.requesters import create_requester
from turkflow.simulator.run import SimulationConfig, run_on, run_with_stack
from turkflow.simulator.stack import Stack

from tests.fake_prolific import SPEC_PATH, FakeProlific

WINDOW = 300
SESSION = Keep(KeepRule.session)


def launch(settings, providers, keep=Keep(KeepRule.window, WINDOW), conversations=1) -> int:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="kept",
                                             max_turns=8, keep=keep)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def write(client, answers) -> None:  # noqa: ANN001
    """Take the first turn the worker's queue lists and submit it."""
    hit_id = wait_until(lambda: open_turns(client))[0]["hit_id"]
    taken = client.post(f"/queue/take/{hit_id}", headers=JSON)
    assert taken.status_code == 200, taken.get_data(as_text=True)
    assert client.post(taken.get_json()["turn_url"], data=answers).status_code == 303


def kept_turn(app, settings):  # noqa: ANN001, ANN201
    """Student 1 writes turn 0, the teacher turn 1; turn 2 (a student's) opens through the Celery worker.
    Returns the two students' clients, the teacher's and turn 2's HIT."""
    first, second = joined(app, settings, "student", "first"), joined(app, settings, "student", "second")
    teacher = joined(app, settings, "teacher")
    write(first, FIRST_STUDENT_ANSWERS)
    write(teacher, TEACHER_ANSWERS)

    def third_turn():  # noqa: ANN202
        with session_scope(settings.database_url) as s:
            return s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id).where(Turn.index == 2)).first()

    return first, second, teacher, wait_until(third_turn)


def opened_ago(settings, hit_id: int, seconds: float) -> None:  # noqa: ANN001
    """Move the HIT's opening ``seconds`` into the past, with the end of its window (opening + keep seconds)."""
    with session_scope(settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        batch = lifecycle.batch_of_hit(s, hit)
        hit.created_at = utcnow() - timedelta(seconds=seconds)
        hit.reserved_until = hit.created_at + timedelta(seconds=batch.keep_seconds)
        s.add(hit)


def last_seen_ago(settings, worker_id: int, seconds: float) -> None:  # noqa: ANN001
    """The worker's presence ran out ``seconds`` ago (their page stopped asking)."""
    with session_scope(settings.database_url) as s:
        worker = s.get(Worker, worker_id)
        worker.present_until = utcnow() - timedelta(seconds=seconds)
        s.add(worker)


# ---- a window (--keep SECONDS) --------------------------------------------------------------------------------


def test_the_next_turn_is_kept_for_the_worker_who_wrote_the_roles_last_turn(app, settings, providers,
                                                                            celery_worker):
    launch(settings, providers)
    first, second, _, hit = kept_turn(app, settings)
    assert hit.reserved_for_id == first.worker.id
    opened = hit.created_at
    assert hit.reserved_until == opened + timedelta(seconds=WINDOW)
    assert [t["hit_id"] for t in open_turns(first)] == [hit.id]
    assert open_turns(second) == []  # not listed to anyone else
    taken = first.post(f"/queue/take/{hit.id}", headers=JSON)
    assert taken.status_code == 200
    assert first.post(taken.get_json()["turn_url"], data=STUDENT_ANSWERS).status_code == 303
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Turn.worker_id).where(Turn.index == 2)).one() == first.worker.id


def test_another_worker_cannot_take_a_kept_turn_within_the_window_and_can_after_it(app, settings, providers,
                                                                                    celery_worker):
    launch(settings, providers)
    first, second, _, hit = kept_turn(app, settings)
    first.post("/queue/leave")  # a window keeps the turn whether its worker is here or not
    refused = second.post(f"/queue/take/{hit.id}", headers=JSON)
    assert refused.status_code == 409
    message = refused.get_json()["error"]
    until = f"{hit.reserved_until:%H:%M:%S} UTC"
    assert "kept for the worker who wrote this role's last turn" in message and until in message, message
    assert re.search(r"\((\d+) s from now\)", message)

    opened_ago(settings, hit.id, WINDOW - 5)  # still 5 seconds to go
    assert open_turns(second) == []
    assert second.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 409

    opened_ago(settings, hit.id, WINDOW + 1)  # the window has ended: anyone may take it
    assert [t["hit_id"] for t in open_turns(second)] == [hit.id]
    taken = second.post(f"/queue/take/{hit.id}", headers=JSON)
    assert taken.status_code == 200, taken.get_data(as_text=True)
    assert second.post(taken.get_json()["turn_url"], data=STUDENT_ANSWERS).status_code == 303
    assert first.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 409  # it is written


def test_the_kept_worker_sees_their_turn_first_in_the_queue(settings, providers):
    for keep in (Keep(KeepRule.window, WINDOW), SESSION):
        launch(settings, providers, keep=keep, conversations=3)
        with session_scope(settings.database_url) as s:
            first = Worker(external_id=f"s1-{keep.rule}", role="student", onboarded=True,
                           present_until=utcnow() + timedelta(minutes=1))
            teacher = Worker(external_id=f"t1-{keep.rule}", role="teacher", onboarded=True)
            s.add_all([first, teacher])
            s.flush()
            last = lifecycle.open_hits_for(s, first)[-1]  # the newest conversation
            turn = lifecycle.submit_turn(s, lifecycle.take_turn(s, first, last.id, 60).external_id, first,
                                         FIRST_STUDENT_ANSWERS).turn
            reply = lifecycle.advance_conversation(s, turn.conversation_id)
            lifecycle.publish_hit(s, providers.get("local"), reply.id)
            lifecycle.submit_turn(s, lifecycle.take_turn(s, teacher, reply.id, 60).external_id, teacher,
                                  TEACHER_ANSWERS)
            kept = lifecycle.advance_conversation(s, turn.conversation_id)
            lifecycle.publish_hit(s, providers.get("local"), kept.id)
            assert kept.reserved_for_id == first.id
            batch = lifecycle.batch_of_hit(s, kept)
            listed = [e["hit_id"] for e in lifecycle.queue_entries(s, first) if e["hit_id"] >= hit_floor(s, batch)]
            assert listed[0] == kept.id and len(listed) == 3  # kept first, then the two untouched conversations


def hit_floor(s, batch: Batch) -> int:  # noqa: ANN001
    """The batch's first HIT: the queue lists earlier batches' turns too."""
    return min(h.id for h in s.exec(select(Hit)) if lifecycle.batch_of_hit(s, h).id == batch.id)


def test_a_turn_is_not_kept_for_a_worker_blocked_since_or_by_a_batch_that_keeps_nobody(settings, providers):
    for n, (keep, blocked) in enumerate(((Keep(KeepRule.window, WINDOW), True), (SESSION, True), (Keep(), False))):
        launch(settings, providers, keep=keep)
        with session_scope(settings.database_url) as s:
            student = Worker(external_id=f"s-{n}", role="student", onboarded=True)
            teacher = Worker(external_id=f"t-{n}", role="teacher", onboarded=True)
            s.add_all([student, teacher])
            s.flush()
            hit = lifecycle.open_hits_for(s, student)[-1]
            turn = lifecycle.submit_turn(s, lifecycle.take_turn(s, student, hit.id, 60).external_id, student,
                                         FIRST_STUDENT_ANSWERS).turn
            reply = lifecycle.advance_conversation(s, turn.conversation_id)
            lifecycle.publish_hit(s, providers.get("local"), reply.id)
            lifecycle.submit_turn(s, lifecycle.take_turn(s, teacher, reply.id, 60).external_id, teacher,
                                  TEACHER_ANSWERS)
            if blocked:
                student.status = WorkerStatus.temporarily_blocked
                s.add(student)
            following = lifecycle.advance_conversation(s, turn.conversation_id)
            assert (following.reserved_for_id, following.reserved_until) == (None, None)


def test_a_kept_turn_is_offered_to_anyone_once_its_worker_is_blocked(app, settings, providers, celery_worker):
    launch(settings, providers)
    first, second, _, hit = kept_turn(app, settings)
    assert second.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 409
    with session_scope(settings.database_url) as s:
        blocked = s.get(Worker, first.worker.id)
        blocked.status = WorkerStatus.temporarily_blocked
        s.add(blocked)
    assert [t["hit_id"] for t in open_turns(second)] == [hit.id]
    assert second.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 200


# ---- a session (--keep session) -------------------------------------------------------------------------------


def test_a_session_keeps_the_turn_while_its_writer_is_here_and_lets_it_go_when_they_close_the_queue(
        app, settings, providers, celery_worker):
    launch(settings, providers, keep=SESSION)
    first, second, _, hit = kept_turn(app, settings)
    assert (hit.reserved_for_id, hit.reserved_until) == (first.worker.id, None)
    assert open_turns(second) == []
    refused = second.post(f"/queue/take/{hit.id}", headers=JSON)
    assert refused.status_code == 409
    assert "kept for the worker who wrote this role's last turn in the conversation while they are here" in \
        refused.get_json()["error"]
    assert [t["hit_id"] for t in open_turns(first)] == [hit.id]

    assert first.post("/queue/leave").status_code == 204  # the queue page's beacon: they closed it
    assert [t["hit_id"] for t in open_turns(second)] == [hit.id]
    taken = second.post(f"/queue/take/{hit.id}", headers=JSON)
    assert taken.status_code == 200, taken.get_data(as_text=True)
    assert second.post(taken.get_json()["turn_url"], data=STUDENT_ANSWERS).status_code == 303
    with session_scope(settings.database_url) as s:  # the conversation went on with the one who stayed
        assert s.exec(select(Turn.worker_id).where(Turn.index == 2)).one() == second.worker.id


def test_a_session_lets_the_turn_go_once_its_writers_presence_runs_out_unless_they_are_writing_a_turn(
        app, settings, providers, celery_worker):
    launch(settings, providers, keep=SESSION, conversations=2)
    first, second, _, hit = kept_turn(app, settings)
    other = next(t["hit_id"] for t in open_turns(first) if t["hit_id"] != hit.id)  # the other conversation
    assert first.post(f"/queue/take/{other}", headers=JSON).status_code == 200  # writing it now
    last_seen_ago(settings, first.worker.id, 1)
    assert second.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 409  # kept: they are writing
    with session_scope(settings.database_url) as s:
        for held in s.exec(select(Hit).where(Hit.id == other)):
            held.lease_expires_at = utcnow() - timedelta(seconds=1)  # they left mid-turn; its lease ran out
            s.add(held)
    assert hit.id in [t["hit_id"] for t in open_turns(second)]
    assert second.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 200


def test_star_frames_and_meep_keep_both_roles_for_their_sessions_by_default_and_the_wizard_of_tasks_anyone(
        settings):
    with session_scope(settings.database_url) as s:
        for protocol, rule in (("star", "session"), ("frames", "session"), ("meep", "session"),
                               ("wizard_of_tasks", "any")):
            task = Task(key=f"default-{protocol}", protocol=protocol, title="A task", domain="test")
            s.add(task)
            s.flush()
            batch, _ = lifecycle.launch_batch(s, [task], 1, name=protocol, protocol=protocol)
            assert (batch.keep, batch.keep_seconds) == (rule, 0), protocol


# ---- the option: batch launch, batch status, the batch page ---------------------------------------------------


def test_keep_round_trips_through_batch_launch_and_shows_in_status_and_on_the_batch_page(app, settings):
    runner = CliRunner()

    def turkflow(*args: str, **extra: str):  # noqa: ANN202
        return runner.invoke(main, list(args), env={**environment(settings), **extra}, catch_exceptions=False)

    def launched(out: str) -> int:
        return int(re.search(r"launched batch (\d+)", out).group(1))

    ok(turkflow("tasks", "load", SAMPLES))
    out = ok(turkflow("batch", "launch", "--all", "-n", "1", "--keep", "45"))
    assert "keep 45: a role's next turn is kept 45 s for the worker who wrote that role's last turn" in out
    window = launched(out)
    from_setting = launched(ok(turkflow("batch", "launch", "--all", "-n", "1", TURKFLOW_KEEP="20")))
    session = launched(ok(turkflow("batch", "launch", "--all", "-n", "1", "--keep", "session")))
    anyone = launched(ok(turkflow("batch", "launch", "--all", "-n", "1")))
    with session_scope(settings.database_url) as s:
        assert [(s.get(Batch, i).keep, s.get(Batch, i).keep_seconds) for i in (window, from_setting, session, anyone)] \
            == [("window", 45), ("window", 20), ("session", 0), ("any", 0)]
    assert "  keep           45: a role's next turn is kept 45 s" in ok(turkflow("batch", "status", str(window)))
    assert "  keep           session: a role's next turn goes first to the worker who wrote that role's last " \
           "turn, while they are present" in ok(turkflow("batch", "status", str(session)))
    assert "  keep           any: a role's next turn goes to whoever comes first" in \
        ok(turkflow("batch", "status", str(anyone)))
    result = runner.invoke(main, ["batch", "launch", "--all", "-n", "1", "--keep", "always"], env=environment(settings))
    assert one_line_error(result) == "error: --keep: expected any, session or a number of seconds, got 'always'"

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    client = app.test_client()
    sign_in(client)
    page = client.get(f"/admin/batches/{window}").get_data(as_text=True)
    assert '<p class="muted" id="keep">Keep 45: a role&#39;s next turn is kept 45 s ' in page
    assert '<p class="muted" id="keep">Keep any: ' in client.get(f"/admin/batches/{anyone}").get_data(as_text=True)


def test_launch_refuses_a_keep_the_platform_cannot_honour(settings):
    runner = CliRunner()
    refusals = (
        ("mturk", ["--keep", "30"], {}, "--keep: 30 cannot be kept on mturk: mturk gives each HIT to whoever "
                                        "accepts it first, or --keep any"),
        ("mturk", [], {"TURKFLOW_KEEP": "session"}, "TURKFLOW_KEEP: session cannot be kept on mturk: mturk gives "
                                                    "each HIT to whoever accepts it first, or --keep any"),
        ("prolific", ["--keep", "30"], {}, "--keep: 30 cannot be kept on prolific: a Prolific participant is kept "
                                           "within their session: use --keep session, or --keep any"),
    )
    for provider, args, extra, message in refusals:
        result = runner.invoke(main, ["batch", "launch", "--all", "-n", "1", "--provider", provider, *args],
                               env={**environment(settings), **extra})
        assert one_line_error(result) == f"error: {message}"
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).all() == []


# ---- the simulated crowd -------------------------------------------------------------------------------------

SAME = SimulationConfig(students=3, teachers=3, conversations=4, max_turns=10, mean_turns=10, mix={}, seed=5,
                        concurrency=4, dialogs=DIALOGS, settle_timeout=30)


def test_keeping_people_has_more_of_a_conversations_role_written_by_one_worker(tmp_path, sqlite_url):
    """The simulated crowd takes the turns kept for it; the report's share of each conversation's role turns
    written by its most frequent worker is higher with a window, and higher for their sessions too, where
    people come and go (a worker away for a round closed their queue's page: their turns went to others).
    A crowd that stays its sessions writes each conversation's roles one person each, waiting no longer for
    a next turn than under the any-worker rule; when half of it leaves halfway, every conversation still
    finishes. Nothing expires (600 s is longer than the simulation), so every report is reproducible."""
    settings = Settings(data_dir=tmp_path, database_url=sqlite_url, secret_key="test", worker_hash_key="test")
    with Stack(settings, tmp_path / "logs", web_workers=1, web_threads=4) as stack:  # one boots in time under load
        reports = [run_on(stack.settings, stack.url, SAME),
                   run_on(stack.settings, stack.url, replace(SAME, keep="600")),
                   run_on(stack.settings, stack.url, replace(SAME, keep="session", away=0.2)),
                   run_on(stack.settings, stack.url, replace(SAME, keep="session")),
                   run_on(stack.settings, stack.url, replace(SAME, keep="session", leave=0.5))]
    anyone, window, session, staying, leaving = (report["reproducible"] for report in reports)
    for done, report in zip((anyone, window, session, staying, leaving), reports):
        assert done["turns"]["stored"] == done["turns"]["planned"] and done["turns"]["lost"] == 0
        assert done["stalled"] == [] and done["conversations"]["completed"] == SAME.conversations
        assert report["measured"]["http"]["errors"] == {}  # nobody was refused a kept turn
    assert staying["one_writer_per_role_share"] == 1.0 and anyone["one_writer_per_role_share"] < 0.5
    assert staying["next_turn_wait_p95_seconds"] <= 1.2 * anyone["next_turn_wait_p95_seconds"]
    assert 0 < leaving["one_writer_per_role_share"] < 1.0  # those who left: their conversations went on with others
    assert reports[1]["parameters"]["keep"] == "600"
    share = [done["same_worker"]["most_frequent_worker_share"] for done in (anyone, window, session)]
    assert share[1] > share[0] and share[2] > share[0], share
    assert window["same_worker"]["workers_per_conversation_role"] < anyone["same_worker"]["workers_per_conversation_role"]
    assert set(window["same_worker"]["by_role"]) == {"student", "teacher"}


def test_on_prolific_a_crowd_that_stays_keeps_its_conversations_and_one_that_half_leaves_loses_none(tmp_path):
    """The simulated crowd on the fake Prolific (every call checked against Prolific's contract): our page
    offers each participant the turns kept for them first, so a crowd that stays writes each conversation's
    roles one person each; when half of it leaves halfway, the turns kept for those who left go to the others
    once their presence runs out (TURKFLOW_PROLIFIC_PRESENCE_SECONDS, short here), and every conversation
    finishes. Each run on a database and a Prolific of its own."""
    staying = replace(SAME, provider="prolific", keep="session", policy="none")
    reports = []
    for n, config in enumerate((staying, replace(staying, leave=0.5))):
        settings = Settings(data_dir=tmp_path / f"{n}", database_url=f"sqlite:///{tmp_path / f'{n}.db'}",
                            secret_key="test", worker_hash_key="test",
                            prolific_presence_seconds=120 if n == 0 else 8)
        with FakeProlific(contract=SPEC_PATH) as fake:
            reports.append(run_with_stack(settings, tmp_path / f"run-{n}", config, web_workers=1, web_threads=4,
                                          prolific_fake=fake))
        assert not fake.violations, "\n".join(fake.violations)
    for report in reports:
        done = report["reproducible"]
        assert done["turns"]["stored"] == done["turns"]["planned"] and done["turns"]["lost"] == 0
        assert done["stalled"] == [] and done["conversations"]["completed"] == SAME.conversations
    stayed, left = (report["reproducible"] for report in reports)
    assert stayed["one_writer_per_role_share"] >= 0.9
    assert left["one_writer_per_role_share"] < 1.0


def test_a_crowd_away_for_spells_is_away_as_often_but_for_longer_than_one_that_flickers_round_by_round(tmp_path):
    """The simulator's people who come and go (``away``) sit out the same share of rounds either way; with
    ``away_rounds`` they stay away for spells of about that many rounds, as people who leave for a while."""
    from turkflow.quality.monitor import Policy
    from turkflow.simulator.crowd import build_crowd
    from turkflow.simulator.driver import Simulation

    crowd = build_crowd(4, 4, {}, seed=1)

    def absences(away_rounds: float) -> tuple[float, float]:
        simulation = Simulation(Settings(data_dir=tmp_path), "http://127.0.0.1", crowd, [], seed=1, max_turns=2,
                                policy=Policy.parse("k=5,p=0.5"), away=0.3, away_rounds=away_rounds)
        spells, rounds = [], 0
        for worker in crowd:
            run = 0
            for round_no in range(1500):
                if simulation._away(worker.name, round_no):
                    run, rounds = run + 1, rounds + 1
                elif run:
                    spells, run = spells + [run], 0
        return rounds / (1500 * len(crowd)), sum(spells) / len(spells)

    flicker_share, flicker_spell = absences(1)
    spell_share, spell_length = absences(5)
    assert 0.27 <= flicker_share <= 0.33 and 0.27 <= spell_share <= 0.33
    assert flicker_spell < 1.6 and 4.0 <= spell_length <= 6.0
