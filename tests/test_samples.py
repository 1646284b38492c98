"""What turkflow ships for a first try, found from the package rather than the checkout: each protocol's
sample tasks behind ``turkflow tasks load --sample``, and the slice of SGD the simulator replays when given no
dialogs (its bytes are what its script writes from the corpus, its license beside it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlmodel import select

from tests.conftest import SHARED_DATA
from tests.test_cli import environment, ok, one_line_error
import turkflow
from turkflow import samples
from turkflow.cli.main import main
from turkflow.db import session_scope
from turkflow.models import Task
from turkflow.simulator.run import SimulationConfig
from turkflow.simulator.utterances import default_dialogs_dir, read_dialogs


def load(settings, *args: str):  # noqa: ANN001, ANN201
    return CliRunner().invoke(main, ["tasks", "load", *args], env=environment(settings))


@pytest.mark.parametrize("protocol", sorted(samples.TASKS))
def test_tasks_load_sample_loads_the_protocols_sample_tasks_from_the_installed_package(settings, protocol):
    out = ok(load(settings, "--sample", "--protocol", protocol))
    assert str(samples.TASKS[protocol]) in out and "created" in out
    with session_scope(settings.database_url) as s:
        loaded = list(s.exec(select(Task).where(Task.protocol == protocol)))
    assert loaded
    again = ok(load(settings, "--sample", "--protocol", protocol))  # a second load updates, adds nothing
    assert f"0 created, {len(loaded)} updated" in again


def test_tasks_load_wants_a_file_or_sample_and_not_both(settings):
    assert "--sample" in one_line_error(load(settings))
    assert "not both" in one_line_error(load(settings, str(samples.TASKS["wizard_of_tasks"]), "--sample"))
    assert "no sample tasks" in one_line_error(load(settings, "--sample", "--protocol", "annotate"))


def test_the_samples_live_inside_the_package():
    package = Path(turkflow.__file__).resolve().parent
    for path in [*samples.TASKS.values(), samples.STAR_ROOT, samples.SGD_DIALOGS]:
        assert path.exists() and path.is_relative_to(package), path


def test_the_simulator_replays_the_shipped_sgd_slice_when_given_no_dialogs():
    assert default_dialogs_dir() == samples.SGD_DIALOGS
    assert SimulationConfig().parameters()["dialogs"] == str(samples.SGD_DIALOGS)
    dialogs = read_dialogs(default_dialogs_dir())
    assert len(dialogs) == 204 and all(d.user and d.system for d in dialogs)
    assert (samples.SGD_DIALOGS / "LICENSE.txt").read_text().startswith("Attribution-ShareAlike 4.0")


def test_the_sgd_slice_is_what_its_script_writes_from_sgds_dev_split():
    spec = importlib.util.spec_from_file_location("make_slice", samples.SGD_DIALOGS / "make_slice.py")
    make_slice = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_slice)
    written = make_slice.compressed(make_slice.slice_of(SHARED_DATA / "sgd" / "dev"))
    assert written == (samples.SGD_DIALOGS / "dialogues_sample.json.gz").read_bytes()
