"""Affinity (issue 24, item 5): with ``batch launch --affinity SECONDS`` a conversation's next turn of a role is
kept that long for the worker who wrote that role's last turn, then offered to anyone.

The window is a column compared with the clock the code uses (``utcnow``): tests end it by moving the turn's
opening back in the database, never by sleeping.
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
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.models import Batch, Hit, Task, Turn, Worker, WorkerStatus, utcnow
from turkflow.requesters import create_requester
from turkflow.simulator.run import SimulationConfig, run_on
from turkflow.simulator.stack import Stack

AFFINITY = 300


def launch(settings, providers, affinity=AFFINITY, conversations=1) -> int:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        load_documents(s, read_documents(sample_tasks_path()))
        batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="kept",
                                             max_turns=8, affinity_seconds=affinity)
        for hit in hits:
            lifecycle.publish_hit(s, providers.get("local"), hit.id)
        return batch.id


def write(client, answers) -> None:  # noqa: ANN001
    """Take the first turn the worker's queue lists and submit it."""
    hit_id = wait_until(lambda: open_turns(client))[0]["hit_id"]
    taken = client.post(f"/queue/take/{hit_id}", headers=JSON)
    assert taken.status_code == 200, taken.get_data(as_text=True)
    assert client.post(taken.get_json()["turn_url"], data=answers).status_code == 303


def kept_turn(app, settings, affinity=AFFINITY):  # noqa: ANN001, ANN201
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
    """Move the HIT's opening ``seconds`` into the past, with the end of its window (opening + affinity)."""
    with session_scope(settings.database_url) as s:
        hit = s.get(Hit, hit_id)
        batch = lifecycle.batch_of_hit(s, hit)
        hit.created_at = utcnow() - timedelta(seconds=seconds)
        hit.reserved_until = hit.created_at + timedelta(seconds=batch.affinity_seconds)
        s.add(hit)


def test_the_next_turn_is_kept_for_the_worker_who_wrote_the_roles_last_turn(app, settings, providers,
                                                                            celery_worker):
    launch(settings, providers)
    first, second, _, hit = kept_turn(app, settings)
    assert hit.reserved_for_id == first.worker.id
    opened = hit.created_at
    assert hit.reserved_until == opened + timedelta(seconds=AFFINITY)
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
    refused = second.post(f"/queue/take/{hit.id}", headers=JSON)
    assert refused.status_code == 409
    message = refused.get_json()["error"]
    until = f"{hit.reserved_until:%H:%M:%S} UTC"
    assert "kept for the worker who wrote this role's last turn" in message and until in message, message
    assert re.search(r"\((\d+) s from now\)", message)

    opened_ago(settings, hit.id, AFFINITY - 5)  # still 5 seconds to go
    assert open_turns(second) == []
    assert second.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 409

    opened_ago(settings, hit.id, AFFINITY + 1)  # the window has ended: anyone may take it
    assert [t["hit_id"] for t in open_turns(second)] == [hit.id]
    taken = second.post(f"/queue/take/{hit.id}", headers=JSON)
    assert taken.status_code == 200, taken.get_data(as_text=True)
    assert second.post(taken.get_json()["turn_url"], data=STUDENT_ANSWERS).status_code == 303
    assert first.post(f"/queue/take/{hit.id}", headers=JSON).status_code == 409  # it is written


def test_the_kept_worker_sees_their_turn_first_in_the_queue(settings, providers):
    launch(settings, providers, conversations=3)
    with session_scope(settings.database_url) as s:
        first = Worker(external_id="s1", role="student", onboarded=True)
        teacher = Worker(external_id="t1", role="teacher", onboarded=True)
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
        listed = [e["hit_id"] for e in lifecycle.queue_entries(s, first)]
        assert listed[0] == kept.id and len(listed) == 3  # kept first, then the two untouched conversations
        assert sorted(h.id for h in lifecycle.open_hits_for(s, first)) == sorted(listed)


def test_a_turn_is_not_kept_for_a_worker_blocked_since_or_without_affinity(settings, providers):
    for affinity, blocked in ((AFFINITY, True), (0, False)):
        launch(settings, providers, affinity=affinity)
        with session_scope(settings.database_url) as s:
            student = Worker(external_id=f"s-{affinity}", role="student", onboarded=True)
            teacher = Worker(external_id=f"t-{affinity}", role="teacher", onboarded=True)
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


# ---- the option: batch launch, batch status, the batch page ---------------------------------------------------


def test_affinity_round_trips_through_batch_launch_and_shows_in_status_and_on_the_batch_page(app, settings):
    runner = CliRunner()

    def turkflow(*args: str, **extra: str):  # noqa: ANN202
        return runner.invoke(main, list(args), env={**environment(settings), **extra}, catch_exceptions=False)

    ok(turkflow("tasks", "load", SAMPLES))
    out = ok(turkflow("batch", "launch", "--all", "-n", "1", "--affinity", "45"))
    assert "affinity: each next turn of a role is kept 45 s" in out
    batch_id = int(re.search(r"launched batch (\d+)", out).group(1))
    from_setting = int(re.search(r"launched batch (\d+)",
                                 ok(turkflow("batch", "launch", "--all", "-n", "1",
                                             TURKFLOW_AFFINITY_SECONDS="20"))).group(1))
    off = int(re.search(r"launched batch (\d+)", ok(turkflow("batch", "launch", "--all", "-n", "1"))).group(1))
    with session_scope(settings.database_url) as s:
        assert [s.get(Batch, i).affinity_seconds for i in (batch_id, from_setting, off)] == [45, 20, 0]
    assert "  affinity       45 s: a role's next turn is kept" in ok(turkflow("batch", "status", str(batch_id)))
    assert "  affinity " not in ok(turkflow("batch", "status", str(off)))

    with session_scope(settings.database_url) as s:
        create_requester(s, "ada", "correct horse")
    client = app.test_client()
    sign_in(client)
    page = client.get(f"/admin/batches/{batch_id}").get_data(as_text=True)
    assert '<p class="muted" id="affinity">Affinity 45 s: ' in page
    assert 'id="affinity"' not in client.get(f"/admin/batches/{off}").get_data(as_text=True)


def test_launch_refuses_affinity_where_the_platform_hands_out_places(settings):
    runner = CliRunner()
    for provider in ("mturk", "prolific"):
        for args, extra in ((["--affinity", "30"], {}), ([], {"TURKFLOW_AFFINITY_SECONDS": "30"})):
            result = runner.invoke(main, ["batch", "launch", "--all", "-n", "1", "--provider", provider, *args],
                                   env={**environment(settings), **extra})
            assert one_line_error(result) == (
                f"error: --affinity (or TURKFLOW_AFFINITY_SECONDS) applies to --provider local only: {provider} "
                "gives each place to whoever comes first; launch with --affinity 0")
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).all() == []


# ---- the simulated crowd -------------------------------------------------------------------------------------

SAME = SimulationConfig(students=3, teachers=3, conversations=4, max_turns=10, mean_turns=10, mix={}, seed=5,
                        concurrency=4, dialogs=DIALOGS, settle_timeout=30)


def test_with_affinity_more_of_a_conversations_role_is_written_by_one_worker(tmp_path, sqlite_url):
    """The simulated crowd takes the turns kept for it; the report's share of each conversation's role turns
    written by its most frequent worker is higher with affinity (nothing expires: 600 s is longer than the
    simulation, so both reports are reproducible)."""
    settings = Settings(data_dir=tmp_path, database_url=sqlite_url, secret_key="test", worker_hash_key="test")
    with Stack(settings, tmp_path / "logs", web_workers=1, web_threads=4) as stack:  # one boots in time under load
        reports = [run_on(stack.settings, stack.url, SAME),
                   run_on(stack.settings, stack.url, replace(SAME, affinity_seconds=600))]
    without, kept = (report["reproducible"] for report in reports)
    for done, report in zip((without, kept), reports):
        assert done["turns"]["stored"] == done["turns"]["planned"] and done["turns"]["lost"] == 0
        assert report["measured"]["http"]["errors"] == {}  # nobody was refused a kept turn
        assert report["measured"]["submit_to_next_turn_taken_ms"]["n"] == done["turns"]["stored"] - 4
    assert reports[1]["parameters"]["affinity_seconds"] == 600
    share = (without["same_worker"]["most_frequent_worker_share"], kept["same_worker"]["most_frequent_worker_share"])
    assert share[1] > share[0], share
    assert kept["same_worker"]["workers_per_conversation_role"] < without["same_worker"]["workers_per_conversation_role"]
    assert set(kept["same_worker"]["by_role"]) == {"student", "teacher"}
