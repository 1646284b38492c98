"""``turkflow review`` and ``turkflow admin`` as a requester types them."""

from __future__ import annotations

from click.testing import CliRunner
from sqlmodel import select

from tests.quality_factories import Crowd, low_rated_teacher
from tests.test_cli import environment
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.models import Event, Requester, Worker, WorkerStatus
from turkflow.requesters import authenticate


def run(settings, *args, input=None):
    return CliRunner().invoke(main, list(args), env=environment(settings), input=input)


def blocked(settings, providers) -> Worker:
    crowd = Crowd(settings, providers)
    crowd.launch(conversations=5)
    teacher = crowd.worker("teacher", "A1B2C3TEACHER", name="terry")
    low_rated_teacher(crowd, teacher, [crowd.worker("student", f"S{i}") for i in range(2)], turns=5)
    return teacher


def test_review_list_builds_and_shows_the_queue(settings, providers):
    teacher = blocked(settings, providers)
    before = run(settings, "review", "list")
    assert before.exit_code == 0 and "has not been built yet" in before.output
    result = run(settings, "review", "list", "--build")
    assert result.exit_code == 0, result.output
    assert "A1B2C3TEACHER" in result.output and "pending" in result.output and "relevant 0%" in result.output
    assert str(teacher.id) in result.output


def test_review_unblock_and_block_by_worker_id_or_name(settings, providers):
    teacher = blocked(settings, providers)
    unblocked = run(settings, "review", "unblock", "A1B2C3TEACHER", "--note", "one bad afternoon")
    assert unblocked.exit_code == 0 and "can take turns again" in unblocked.output
    assert "already active" in run(settings, "review", "unblock", "terry").output
    blocked_now = run(settings, "review", "block", str(teacher.id))
    assert blocked_now.exit_code == 0 and "blocked permanently" in blocked_now.output
    with session_scope(settings.database_url) as s:
        assert s.get(Worker, teacher.id).status == WorkerStatus.blocked
        kinds = [(e.kind, e.data.get("note")) for e in s.exec(
            select(Event).where(Event.worker_id == teacher.id, Event.actor.startswith("requester:")).order_by(Event.id))]
        assert kinds == [("worker_unblocked", "one bad afternoon"), ("worker_blocked", "")]


def test_review_of_an_unknown_worker_is_one_line_and_exit_1(settings):
    result = run(settings, "review", "block", "nobody-like-this")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == ["error: no worker 'nobody-like-this'; `turkflow worker list` shows them"]


def test_review_list_refuses_a_malformed_day(settings):
    result = run(settings, "review", "list", "--day", "31/01/2025")
    assert result.exit_code == 2 and "is not a date" in result.output


def test_admin_create_from_stdin_stores_a_hash_that_signs_in(settings):
    result = run(settings, "admin", "create", "ada", "--password-stdin", input="correct horse\n")
    assert result.exit_code == 0, result.output
    with session_scope(settings.database_url) as s:
        stored = s.exec(select(Requester)).one()
        assert stored.password_hash != "correct horse" and "correct horse" not in stored.password_hash
        assert authenticate(s, "ada", "correct horse") is not None
        assert authenticate(s, "ada", "wrong") is None


def test_admin_create_asks_twice_for_the_password(settings):
    result = run(settings, "admin", "create", "bob", input="long enough\nlong enough\n")
    assert result.exit_code == 0 and "Created dashboard user bob" in result.output


def test_admin_create_refuses_duplicates_and_short_passwords_in_one_line(settings):
    assert run(settings, "admin", "create", "ada", "--password-stdin", input="correct horse\n").exit_code == 0
    duplicate = run(settings, "admin", "create", "ada", "--password-stdin", input="another one\n")
    assert duplicate.exit_code == 1 and duplicate.output == "error: username: 'ada' already exists\n"
    short = run(settings, "admin", "create", "eve", "--password-stdin", input="short\n")
    assert short.exit_code == 1 and short.output == "error: password: use at least 8 characters\n"
    with session_scope(settings.database_url) as s:
        assert [r.username for r in s.exec(select(Requester))] == ["ada"]
