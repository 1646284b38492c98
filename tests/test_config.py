"""Each default lives once, in ``Settings`` (money in integer cents): what ``turkflow batch launch`` stores
without flags follows TURKFLOW_*, a batch row, the launch function and the quality policy take the same
defaults, and a variable turkflow no longer reads is refused in one line instead of being ignored."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.test_cli import ROOT, SAMPLES, environment, ok, one_line_error
from turkflow.cli.main import main
from turkflow.config import Settings, default
from turkflow.db import session_scope
from turkflow.errors import InvalidInput
from turkflow.hits import lifecycle
from turkflow.models import Batch
from turkflow.quality.monitor import Policy


@pytest.fixture
def turkflow(settings):  # noqa: ANN001, ANN201
    """``turkflow ARGS...`` with the test's settings and ``extra`` variables in the environment."""
    runner = CliRunner()

    def run(*args: str, **extra: str):  # noqa: ANN202
        return runner.invoke(main, list(args), env={**environment(settings), **extra}, catch_exceptions=False)

    return run


def launched(turkflow, settings, *flags: str, **extra: str) -> Batch:  # noqa: ANN001
    """Load the sample tasks, launch one conversation over them and read back the batch stored."""
    ok(turkflow("tasks", "load", SAMPLES))
    out = ok(turkflow("batch", "launch", "--all", "-n", "1", *flags, **extra))
    batch_id = int(re.search(r"launched batch (\d+)", out).group(1))
    with session_scope(settings.database_url) as s:
        return s.get(Batch, batch_id)


def test_batch_launch_without_flags_stores_the_rewards_turns_and_bonus_of_the_environment(turkflow, settings):
    batch = launched(turkflow, settings, TURKFLOW_REWARD_CENTS="35", TURKFLOW_MAX_TURNS="12", TURKFLOW_BONUS_CENTS="11")
    assert (batch.reward_cents, batch.max_turns, batch.bonus_cents) == (35, 12, 11)


def test_batch_launch_without_flags_or_variables_stores_the_settings_defaults(turkflow, settings):
    batch = launched(turkflow, settings)
    assert (batch.reward_cents, batch.max_turns, batch.bonus_cents) == (20, 40, 8)
    assert (batch.quality_window, batch.block_below, batch.bonus_above) == (5, 0.5, 0.9)


def test_the_reward_flag_is_in_dollars_and_wins_over_the_environment(turkflow, settings):
    batch = launched(turkflow, settings, "--reward", "0.45", "--max-turns", "6", TURKFLOW_REWARD_CENTS="35",
                     TURKFLOW_MAX_TURNS="12")
    assert (batch.reward_cents, batch.max_turns) == (45, 6)


@pytest.mark.parametrize("old, new", [("TURKFLOW_REWARD", "TURKFLOW_REWARD_CENTS=25"),
                                      ("TURKFLOW_BONUS", "TURKFLOW_BONUS_CENTS=25")])
def test_a_variable_no_longer_read_is_refused_in_one_line_naming_the_new_one(turkflow, settings, old, new):
    error = one_line_error(turkflow("batch", "launch", "--all", "-n", "1", **{old: "0.25"}))
    assert error == f"error: {old} is no longer read: set {new} instead and unset {old}"
    with session_scope(settings.database_url) as s:
        assert s.exec(select(Batch)).all() == []


def test_settings_refuse_an_old_variable_wherever_they_are_built(monkeypatch, tmp_path):
    monkeypatch.setenv("TURKFLOW_REWARD", "twenty cents")
    with pytest.raises(InvalidInput, match="^TURKFLOW_REWARD is no longer read: set TURKFLOW_REWARD_CENTS "):
        Settings(data_dir=tmp_path)


def test_a_batch_row_the_launch_function_and_the_quality_policy_default_to_the_settings():
    row, policy = Batch(name="x"), Policy()
    launch_defaults = inspect.signature(lifecycle.launch_batch).parameters
    for name, value in [("reward_cents", row.reward_cents), ("max_turns", row.max_turns),
                        ("quality_window", row.quality_window), ("block_below", row.block_below),
                        ("bonus_above", row.bonus_above), ("bonus_cents", row.bonus_cents),
                        ("block_rule", row.block_rule), ("quality_window", policy.window),
                        ("block_below", policy.block_below), ("bonus_above", policy.bonus_above),
                        ("bonus_cents", policy.bonus_cents), ("block_rule", policy.rule),
                        ("reward_cents", launch_defaults["reward_cents"].default),
                        ("max_turns", launch_defaults["max_turns"].default)]:
        assert value == default(name), name
    assert isinstance(default("reward_cents"), int) and isinstance(default("bonus_cents"), int)


def test_processes_started_together_on_a_new_data_dir_share_one_secret_readable_by_its_owner_only(tmp_path):
    """The web server and the Celery workers start at once on a new data_dir: a secret each wrote for
    itself would sign a worker's cookie that the next process refuses."""
    data_dir = tmp_path / "var"
    code = ("import sys; from turkflow.config import Settings; "
            "s = Settings(data_dir=sys.argv[1]); print(s.secret_key, s.worker_hash_key)")
    started = [subprocess.Popen([sys.executable, "-c", code, str(data_dir)], stdout=subprocess.PIPE, text=True,
                                env={"PATH": "/usr/bin:/bin"}, cwd=ROOT) for _ in range(8)]
    printed = {process.communicate(timeout=120)[0].strip() for process in started}
    assert all(process.returncode == 0 for process in started)
    assert printed == {f"{(data_dir / 'secret_key').read_text()} {(data_dir / 'worker_hash_key').read_text()}"}
    assert sorted(p.name for p in data_dir.iterdir()) == ["secret_key", "worker_hash_key"]  # no temporary left
    assert {p.stat().st_mode & 0o777 for p in data_dir.iterdir()} == {0o600}


def test_a_web_app_given_its_settings_stores_no_secrets_of_the_environment_in_the_working_directory(tmp_path):
    """Celery configures itself when the app first queues to it: from the app's own settings, not from a
    ``Settings()`` of the environment, which would create secrets in ./var of wherever the process runs."""
    data_dir, cwd = tmp_path / "data", tmp_path / "elsewhere"
    cwd.mkdir()
    code = ("import sys; from turkflow.config import Settings; from turkflow.web import create_app; "
            "from turkflow.workers.app import celery_app; "
            "create_app(Settings(data_dir=sys.argv[1], redis_url='redis://127.0.0.1:1/3')); "
            "print(celery_app.conf.broker_url)")
    done = subprocess.run([sys.executable, "-c", code, str(data_dir)], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "redis://127.0.0.1:1/3"
    assert list(cwd.iterdir()) == []  # no ./var/secret_key of a Settings() nobody asked for
    assert sorted(p.name for p in data_dir.iterdir()) == ["secret_key", "worker_hash_key"]
