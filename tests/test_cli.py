"""The ``turkflow`` command as a requester uses it: against real SQLite and PostgreSQL databases, through
click's runner for most commands and through the installed console script where the process boundary
matters (exit status, no traceback)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlmodel import select

from tests.conftest import _backends
from tests.test_pipeline import STUDENT_ANSWERS, make_worker
from turkflow import pipeline
from turkflow.cli.main import main
from turkflow.config import Settings
from turkflow.db import dispose_engine, session_scope
from turkflow.protocols.wot import sample_tasks_path
from turkflow.hits import lifecycle
from turkflow.invites import worker_from_token
from turkflow.models import Batch, Conversation, Hit, HitStatus, Task, Turn, Worker
from turkflow.quality import monitor

ROOT = Path(__file__).resolve().parents[1]
TURKFLOW = ROOT / ".venv" / "bin" / "turkflow"
SAMPLES = str(sample_tasks_path())


def environment(settings: Settings) -> dict[str, str]:
    return {
        "TURKFLOW_DATA_DIR": str(settings.data_dir),
        "TURKFLOW_DATABASE_URL": settings.database_url,
        "TURKFLOW_REDIS_URL": settings.redis_url,
        "TURKFLOW_SECRET_KEY": settings.secret_key,
        "TURKFLOW_WORKER_HASH_KEY": settings.worker_hash_key,
        "TURKFLOW_PUBLIC_URL": settings.public_url,
    }


@pytest.fixture
def turkflow(settings):  # noqa: ANN001, ANN201
    """Run ``turkflow ARGS...`` with the test's settings in the environment."""
    runner = CliRunner()
    env = environment(settings)

    def run(*args: str, input: str | None = None):  # noqa: ANN202
        return runner.invoke(main, list(args), env=env, input=input, catch_exceptions=False)

    return run


def ok(result) -> str:  # noqa: ANN001
    assert result.exit_code == 0, result.output
    return result.stdout


def one_line_error(result) -> str:  # noqa: ANN001
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def rows(settings, model):  # noqa: ANN001, ANN201
    with session_scope(settings.database_url) as s:
        return list(s.exec(select(model)))


def launched(turkflow, *extra: str) -> int:  # noqa: ANN001
    ok(turkflow("tasks", "load", SAMPLES))
    out = ok(turkflow("batch", "launch", "--all", *extra))
    return int(re.search(r"launched batch (\d+)", out).group(1))


# ---- tasks --------------------------------------------------------------------------------------------


def test_tasks_load_creates_then_updates_by_id(turkflow, settings):
    assert "6 created, 0 updated" in ok(turkflow("tasks", "load", SAMPLES))
    assert "0 created, 6 updated" in ok(turkflow("tasks", "load", SAMPLES))
    listing = ok(turkflow("tasks", "list", "--domain", "diy"))
    assert "diy-shelf" in listing and "cooking-pancakes" not in listing


def test_bad_task_file_is_a_one_line_error_and_writes_nothing(turkflow, settings, tmp_path):
    bad = tmp_path / "tasks.yaml"
    bad.write_text("- {id: ok, title: Fine, domain: cooking, steps: [Stir.]}\n- {id: broken, title: No steps, domain: diy}\n")
    message = one_line_error(turkflow("tasks", "load", str(bad)))
    assert "broken" in message and "'steps'" in message
    assert rows(settings, Task) == []


def test_missing_task_file_is_a_one_line_error(turkflow, tmp_path):
    missing = tmp_path / "nope.yaml"
    message = one_line_error(turkflow("tasks", "load", str(missing)))
    assert str(missing) in message and "no such file" in message


# ---- batch launch ---------------------------------------------------------------------------------------


def test_batch_launch_opens_one_published_student_hit_per_conversation(turkflow, settings):
    batch_id = launched(turkflow, "--conversations", "4", "--max-turns", "6", "--reward", "0.25", "--name", "pilot")
    batch = rows(settings, Batch)[0]
    assert (batch.id, batch.name, batch.reward_cents, batch.max_turns, batch.provider) == (batch_id, "pilot", 25, 6,
                                                                                           "local")
    conversations = rows(settings, Conversation)
    assert len(conversations) == 4
    assert len({c.task_id for c in conversations}) == 4  # round-robin over the six sample tasks
    with session_scope(settings.database_url) as s:
        for conversation in conversations:
            hits = s.exec(select(Hit).join(Turn, Turn.id == Hit.turn_id)
                          .where(Turn.conversation_id == conversation.id)).all()
            assert [(h.role, h.status) for h in hits] == [("student", HitStatus.open)]


def test_batch_launch_copies_the_block_policy_settings_into_the_batch(settings):
    env = {**environment(settings), "TURKFLOW_BLOCK_RULE": "pooled", "TURKFLOW_QUALITY_WINDOW": "6",
           "TURKFLOW_PROBATION_TURNS": "6"}
    runner = CliRunner()
    ok(runner.invoke(main, ["tasks", "load", SAMPLES], env=env))
    ok(runner.invoke(main, ["batch", "launch", "--all", "-n", "1"], env=env))
    assert monitor.Policy.of(rows(settings, Batch)[0]).text == "pooled k=6,p=0.5 for 6, then k=20,p=0.4"
    refused = runner.invoke(main, ["batch", "launch", "--all", "-n", "1"], env={**env, "TURKFLOW_BLOCK_RULE": "mean"})
    assert refused.exit_code == 1 and "TURKFLOW_BLOCK_RULE" in refused.output and len(rows(settings, Batch)) == 1


def test_batch_launch_with_a_task_file_uses_only_its_documents(turkflow, settings, tmp_path):
    ok(turkflow("tasks", "load", SAMPLES))
    one = tmp_path / "one.jsonl"
    one.write_text('{"id": "tea", "title": "Brew tea", "domain": "cooking", "steps": ["Boil water.", "Steep."]}\n')
    ok(turkflow("batch", "launch", "--tasks", str(one), "-n", "3"))
    tasks = {t.id: t.key for t in rows(settings, Task)}
    assert {tasks[c.task_id] for c in rows(settings, Conversation)} == {"tea"}


@pytest.mark.parametrize("args, message", [
    ([], "either --tasks FILE or --all"),
    (["--all", "--tasks", SAMPLES], "either --tasks FILE or --all"),
    (["--all", "--live"], "--live applies to --provider mturk only"),
    (["--all", "--skip-if-exists"], "--skip-if-exists needs --name"),
])
def test_batch_launch_refuses_contradictory_options(turkflow, settings, args, message):
    ok(turkflow("tasks", "load", SAMPLES))
    assert message in one_line_error(turkflow("batch", "launch", "-n", "2", *args))
    assert rows(settings, Batch) == []


def test_dry_run_on_mturk_counts_the_fee(turkflow, settings):
    ok(turkflow("tasks", "load", SAMPLES))
    out = ok(turkflow("batch", "launch", "--all", "-n", "2", "--max-turns", "10", "--provider", "mturk", "--dry-run"))
    assert "on mturk (sandbox)" in out
    assert "at most $6.80: $4.00 rewards + $1.60 bonuses + $1.20 fees" in out
    assert rows(settings, Batch) == []


@pytest.mark.parametrize("reward", ["0.205", "-1", "twenty"])
def test_batch_launch_refuses_a_reward_that_is_not_whole_cents(turkflow, settings, reward):
    result = turkflow("batch", "launch", "--all", "-n", "2", "--reward", reward)
    assert result.exit_code == 2 and "--reward" in result.stderr
    assert rows(settings, Batch) == []


def test_batch_launch_without_tasks_says_to_load_them(turkflow, settings):
    assert "turkflow tasks load" in one_line_error(turkflow("batch", "launch", "--all", "-n", "2"))
    assert rows(settings, Batch) == []


def test_a_provider_that_cannot_publish_leaves_no_live_batch(turkflow, settings):
    ok(turkflow("tasks", "load", SAMPLES))
    message = one_line_error(turkflow("batch", "launch", "--all", "-n", "2", "--provider", "mturk"))
    assert message.startswith("error: nothing was published (") and message.endswith("batch 1 is cancelled")
    assert [b.status for b in rows(settings, Batch)] == ["cancelled"]
    assert {h.status for h in rows(settings, Hit)} == {HitStatus.expired}


def test_live_launch_asks_before_spending_real_money(turkflow, settings):
    ok(turkflow("tasks", "load", SAMPLES))
    declined = turkflow("batch", "launch", "--all", "-n", "2", "--provider", "mturk", "--live", input="n\n")
    assert declined.exit_code == 1 and "LIVE MTurk marketplace, paying up to $" in declined.output
    assert rows(settings, Batch) == []


def test_dry_run_prints_the_maximum_cost_and_launches_nothing(turkflow, settings):
    ok(turkflow("tasks", "load", SAMPLES))
    out = ok(turkflow("batch", "launch", "--all", "-n", "3", "--max-turns", "8", "--reward", "0.20", "--dry-run"))
    assert "at most $6.72: $4.80 rewards + $1.92 bonuses + $0.00 fees" in out
    assert rows(settings, Batch) == []


def test_skip_if_exists_launches_a_named_batch_once(turkflow, settings):
    launched(turkflow, "-n", "2", "--name", "demo", "--skip-if-exists")
    out = ok(turkflow("batch", "launch", "--all", "-n", "2", "--name", "demo", "--skip-if-exists"))
    assert "already active; launched nothing" in out
    assert len(rows(settings, Batch)) == 1 and len(rows(settings, Conversation)) == 2


# ---- batch status, pause, resume, cancel ----------------------------------------------------------------


def submit_first_student_turn(settings, providers) -> None:  # noqa: ANN001
    student = make_worker(settings, "student", "s1")
    with session_scope(settings.database_url) as s:
        hit = lifecycle.open_hits_for(s, student)[0]
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        turn_id = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS).turn.id
    pipeline.after_submission(settings, providers, turn_id)


def test_batch_status_reports_turns_open_hits_and_spend(turkflow, settings, providers):
    batch_id = launched(turkflow, "-n", "2", "--max-turns", "6", "--budget", "5", "--name", "pilot")
    submit_first_student_turn(settings, providers)
    out = ok(turkflow("batch", "status", str(batch_id)))
    assert "0 completed, 2 active, 0 cancelled (2 in all)" in out
    assert "1 submitted" in out
    assert "2 (0 taken by a worker now)" in out  # the other student turn and the new teacher turn
    assert "spent          $0.00" in out and "$0.20 pending" in out  # the local provider has not approved it
    assert re.search(r"committed\s+\$0\.60 of a \$5\.00 budget", out)
    listing = ok(turkflow("batch", "status"))
    assert re.search(rf"\b{batch_id}\b.*pilot.*local.*active.*0/2", listing)


def test_batch_status_of_a_missing_batch_is_a_one_line_error(turkflow):
    assert "batch 42 does not exist" in one_line_error(turkflow("batch", "status", "42"))


def test_watch_follows_the_batch_until_it_ends(turkflow, settings):
    batch_id = launched(turkflow, "-n", "2")

    def cancel_soon() -> None:
        time.sleep(0.5)
        with session_scope(settings.database_url) as s:
            lifecycle.set_batch_status(s, s.get(Batch, batch_id), "cancelled", "test")

    canceller = threading.Thread(target=cancel_soon)
    canceller.start()
    started = time.monotonic()
    out = ok(turkflow("batch", "status", "--watch", "--interval", "0.2"))
    canceller.join()
    assert time.monotonic() - started >= 0.5
    assert f"batch {batch_id}" in out and "cancelled, local" in out


def test_paused_batch_hides_its_turns_and_resume_reopens_stalled_conversations(turkflow, settings, providers):
    batch_id = launched(turkflow, "-n", "1", "--max-turns", "6")
    student = make_worker(settings, "student", "s1")
    teacher = make_worker(settings, "teacher", "t1")
    with session_scope(settings.database_url) as s:
        assignment = lifecycle.take_turn(s, student, lifecycle.open_hits_for(s, student)[0].id, lease_seconds=60)
    assert "paused" in ok(turkflow("batch", "pause", str(batch_id)))
    with session_scope(settings.database_url) as s:
        turn_id = lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS).turn.id
    assert pipeline.after_submission(settings, providers, turn_id).opened_hit_id is None  # paused: no new turn
    with session_scope(settings.database_url) as s:
        assert lifecycle.open_hits_for(s, teacher) == []

    out = ok(turkflow("batch", "resume", str(batch_id)))
    assert "1 stalled conversations reopened" in out
    with session_scope(settings.database_url) as s:
        assert [h.role for h in lifecycle.open_hits_for(s, teacher)] == ["teacher"]


def test_cancel_asks_first_then_expires_open_hits(turkflow, settings):
    batch_id = launched(turkflow, "-n", "3")
    declined = turkflow("batch", "cancel", str(batch_id), input="n\n")
    assert declined.exit_code == 1 and rows(settings, Batch)[0].status == "active"

    assert "3 open HITs expired" in ok(turkflow("batch", "cancel", str(batch_id), input="y\n"))
    assert {h.status for h in rows(settings, Hit)} == {HitStatus.expired}
    assert {c.status for c in rows(settings, Conversation)} == {"cancelled"}
    assert "cannot become active" in one_line_error(turkflow("batch", "resume", str(batch_id)))


# ---- workers --------------------------------------------------------------------------------------------


def test_worker_invite_prints_a_join_url_that_names_the_new_worker(turkflow, settings):
    result = turkflow("worker", "invite", "--role", "teacher", "--name", "Ada")
    url = ok(result).strip()
    assert url.startswith(f"{settings.public_url}/join/") and "\n" not in url
    with session_scope(settings.database_url) as s:
        worker = worker_from_token(s, settings.secret_key, url.rsplit("/", 1)[1])
        assert (worker.role, worker.name, worker.status) == ("teacher", "Ada", "active")
    assert ok(turkflow("worker", "link", "Ada")).strip() == url
    assert ok(turkflow("worker", "link", worker.external_id)).strip() == url


def test_star_workers_are_invited_by_their_roles_and_meet_their_first_stage(turkflow, settings, app):
    url = ok(turkflow("worker", "invite", "--role", "wizard", "--name", "Wiz")).strip()
    client = app.test_client()
    assert client.get(url.removeprefix(settings.public_url)).status_code in (302, 303)
    page = client.get("/onboarding")
    assert page.status_code == 200 and "stage 1" in page.get_data(as_text=True).lower()


def test_worker_link_of_an_unknown_or_ambiguous_worker_is_refused(turkflow):
    ok(turkflow("worker", "invite", "--role", "student", "--name", "Sam"))
    ok(turkflow("worker", "invite", "--role", "teacher", "--name", "Sam"))
    assert "2 workers match" in one_line_error(turkflow("worker", "link", "Sam"))
    assert "no worker 'Kim'" in one_line_error(turkflow("worker", "link", "Kim"))


def test_worker_list_filters_by_role_and_status(turkflow, settings):
    ok(turkflow("worker", "invite", "--role", "student", "--name", "stu"))
    ok(turkflow("worker", "invite", "--role", "teacher", "--name", "tea"))
    with session_scope(settings.database_url) as s:
        blocked = s.exec(select(Worker).where(Worker.name == "tea")).one()
        blocked.status = "temporarily_blocked"
        s.add(blocked)
    students = ok(turkflow("worker", "list", "--role", "student"))
    assert "stu" in students and "tea" not in students
    assert "tea" in ok(turkflow("worker", "list", "--status", "temporarily_blocked"))
    assert "no workers match" in ok(turkflow("worker", "list", "--role", "student", "--status", "blocked"))


def test_unknown_role_is_refused_by_the_option_parser(turkflow):
    result = turkflow("worker", "invite", "--role", "wizzard")
    assert result.exit_code == 2
    assert "'wizzard' is not one of 'student', 'teacher', 'user', 'wizard'" in result.stderr


# ---- database, settings and errors ----------------------------------------------------------------------


def test_new_sqlite_database_is_created_on_first_use(tmp_path, redis_url):
    url = f"sqlite:///{tmp_path / 'fresh' / 'turkflow.db'}"
    env = {"TURKFLOW_DATABASE_URL": url, "TURKFLOW_DATA_DIR": str(tmp_path / "var")}
    result = CliRunner().invoke(main, ["tasks", "load", SAMPLES], env=env)
    assert result.exit_code == 0, result.output
    assert len(rows(Settings(database_url=url, data_dir=tmp_path / "var"), Task)) == 6


@pytest.mark.skipif("postgresql" not in _backends(), reason="PostgreSQL backend not selected")
def test_server_database_behind_on_migrations_asks_for_db_upgrade(request, tmp_path):
    postgres = request.getfixturevalue("postgres")
    admin = create_engine(postgres.url("postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("CREATE DATABASE cli_empty"))
    url = postgres.url("cli_empty")
    env = {"TURKFLOW_DATABASE_URL": url, "TURKFLOW_DATA_DIR": str(tmp_path / "var")}
    runner = CliRunner()
    try:
        assert "run `turkflow db upgrade` first" in one_line_error(runner.invoke(main, ["worker", "list"], env=env))
        assert "is at revision" in ok(runner.invoke(main, ["db", "upgrade"], env=env))
        assert "no workers yet" in ok(runner.invoke(main, ["worker", "list"], env=env))
    finally:
        dispose_engine(url)
        with admin.connect() as conn:
            conn.execute(text("DROP DATABASE cli_empty WITH (FORCE)"))
        admin.dispose()


def test_invalid_setting_is_named_in_one_line(tmp_path):
    env = {"TURKFLOW_PROVIDER": "fiverr", "TURKFLOW_DATA_DIR": str(tmp_path)}
    assert "TURKFLOW_PROVIDER" in one_line_error(CliRunner().invoke(main, ["tasks", "list"], env=env))


def console_script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(TURKFLOW), *args], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          text=True, timeout=60)


def test_unreachable_database_ends_the_process_with_one_line_and_status_1(tmp_path):
    done = console_script("batch", "status", env={
        "TURKFLOW_DATABASE_URL": "postgresql+psycopg://turkflow:hunter2@127.0.0.1:9/nowhere",
        "TURKFLOW_DATA_DIR": str(tmp_path),
    })
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: database error at ")
    assert "hunter2" not in done.stderr and "Traceback" not in done.stderr


def test_console_script_refuses_a_bad_file_without_a_traceback(tmp_path):
    bad = tmp_path / "tasks.json"
    bad.write_text("{not json")
    done = console_script("tasks", "load", str(bad), env={"TURKFLOW_DATA_DIR": str(tmp_path / "var")})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_python_dash_m_turkflow_is_the_turkflow_command(tmp_path):
    done = subprocess.run([sys.executable, "-m", "turkflow", "simulate", "--help"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(tmp_path)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: turkflow simulate [OPTIONS]")


def test_turkflow_help_lists_a_lazily_imported_command_by_its_own_short_help_without_importing_it(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import sys; from turkflow.cli.main import main\n"
                           "try:\n    main(['--help'], prog_name='turkflow')\nexcept SystemExit:\n    pass\n"
                           "print(sorted(m for m in sys.modules if m.startswith(('turkflow.simulator', "
                           "'turkflow.models', 'sqlalchemy', 'spacy'))))"],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(tmp_path)},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("[]")  # the models, the database and the simulator stay unloaded
    ctx = click.Context(main)
    for name, (_, short) in main.lazy.items():
        listed = click.Command(name, help=short).get_short_help_str(1000)
        assert listed == main.get_command(ctx, name).get_short_help_str(1000)
        assert listed.split()[0] in done.stdout


# What no command that touches no spaCy model needs, each a large import: the NLP and numeric stacks, the model
# endpoints' client, MTurk's, the web and Celery apps, and Alembic while no migration is due.
HEAVY = {"spacy", "matplotlib", "numpy", "scipy", "openai", "boto3", "flask", "celery", "alembic"}


def imported_by(*args: str, env: dict[str, str]) -> set[str]:
    """The top-level packages and turkflow's modules a fresh ``turkflow ARGS...`` process imported."""
    done = subprocess.run([sys.executable, "-c", "import sys; from turkflow.cli.main import main\n"
                           "try:\n    main(sys.argv[1:], prog_name='turkflow')\nexcept SystemExit as end:\n"
                           "    assert not end.code, end.code\n"
                           "print(' '.join({m if m.startswith('turkflow') else m.split('.')[0] for m in sys.modules}))",
                           *args], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env},
                          input="a long enough password\n", timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())


@pytest.mark.parametrize("args", [("--help",), ("batch", "launch", "--help"), ("simulate", "--help")], ids=" ".join)
def test_a_commands_help_imports_neither_the_database_nor_the_models(args, tmp_path):
    loaded = imported_by(*args, env={"TURKFLOW_DATA_DIR": str(tmp_path)})
    assert not loaded & {*HEAVY, "sqlalchemy", "sqlmodel", "turkflow.models", "turkflow.simulator.run"}


def test_commands_on_a_current_database_import_no_model_library_and_no_alembic(tmp_path):
    env = {"TURKFLOW_DATA_DIR": str(tmp_path)}
    assert "alembic" in imported_by("tasks", "load", "--sample", env=env)  # a new database: migrated
    for args in (("tasks", "list"), ("batch", "status"), ("worker", "list"), ("worker", "invite", "--role", "student"),
                 ("admin", "create", "someone", "--password-stdin")):
        assert not imported_by(*args, env=env) & HEAVY, args


def all_commands(group: click.Group = main, path: tuple[str, ...] = ()):  # noqa: ANN201
    """Every command as ``--help`` lists it, the lazily imported ones included."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*path, name))


@pytest.mark.parametrize("path, command", list(all_commands()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_has_help_that_mentions_its_options(path, command, tmp_path):
    result = CliRunner().invoke(main, [*path, "--help"], env={"TURKFLOW_DATA_DIR": str(tmp_path / "var")})
    assert result.exit_code == 0, result.output
    assert command.help and len(command.help) > 20
    for param in command.params:
        names = param.opts if isinstance(param, click.Option) else [param.human_readable_name]
        assert any(name in result.output for name in names), (path, names)
        if isinstance(param, click.Option) and "--help" not in param.opts:
            assert param.help, (path, param.opts)
    assert not (tmp_path / "var").exists()  # help never creates files


def test_the_docs_document_every_setting_and_command():
    """The settings reference holds the Settings table as the code prints it; the CLI page's summary, written
    by hand above the generated help, names every command, and the generated help has a section for each."""
    settings_page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    table = CliRunner().invoke(main, ["settings", "--markdown"]).stdout.strip()
    assert table in settings_page, "docs/reference/settings.md is stale: run `make docs`"
    cli_page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    summary, generated = cli_page.split("<!-- generated by scripts/docs.py")
    for path, command in all_commands():
        name = f"turkflow {' '.join(path)}"
        assert f"# {name}\n\n```text\n" in generated, f"{name} has no help in docs/reference/cli.md: run `make docs`"
        if not isinstance(command, click.Group):
            assert name in summary, f"{name} is missing from docs/reference/cli.md's table"



def test_progress_outside_a_terminal_is_a_line_every_few_seconds_with_the_total_and_the_time_left(capsys):
    """A long command in a log or CI (stderr no terminal) says how far it is, out of what, and how long is left;
    quick work says nothing."""
    from turkflow.cli.common import ProgressLines, progress_bar

    assert isinstance(progress_bar(), ProgressLines)  # pytest's stderr is no terminal
    with ProgressLines(every=0) as lines:
        task = lines.add_task("exporting conversations", total=4, detail="")
        lines.advance(task)
        time.sleep(0.05)
        lines.advance(task)
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("exporting conversations: 1 of 4 (25%), 0:00 so far, about 0:")
    assert said[1].startswith("exporting conversations: 2 of 4 (50%), 0:00 so far, about 0:") and said[1].endswith(" left")
    assert said[-1].startswith("exporting conversations: 2 of 4 (50%)")
    with ProgressLines() as quiet:  # every 5 s: a quick task prints nothing, not even at its end
        quiet.advance(quiet.add_task("publishing on local", total=3))
    assert capsys.readouterr().err == ""
