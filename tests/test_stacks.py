"""Stacks on one machine keep to themselves: every gunicorn the project starts (the ``Procfile``, hence
``make demo``; the simulator's ``Stack``, hence the benchmarks and the tests) has a control socket of its
own or none. gunicorn 25.1+ opens one by default at a path shared by every gunicorn of the user
(``$XDG_RUNTIME_DIR/gunicorn.ctl``): a second stack took it over from the first, stopping either deleted
it, and ``gunicornc`` reached whichever started last.

Which control socket a master listens on is read from the system (``/proc``), whatever set it. gunicorn's
default path is pointed into the test's own folder, so a test never touches the real one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import requests

from turkflow.config import Settings
from turkflow.simulator import slow
from turkflow.simulator.stack import ProcfileWeb, Stack, free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
GUNICORNC = Path(sys.executable).parent / "gunicornc"


def listening_unix_sockets(pid: int) -> set[str]:
    """The paths of the Unix sockets process ``pid`` has bound (a gunicorn master: its control socket)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if match := re.fullmatch(r"socket:\[(\d+)\]", link):
            inodes.add(match.group(1))
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()  # Num RefCount Protocol Flags Type St Inode [Path]
        if len(fields) >= 8 and fields[6] in inodes and fields[7].startswith("/"):
            paths.add(fields[7])
    return paths


def gunicornc_master_pid(socket_path: Path) -> int:
    """The pid of the master answering on ``socket_path``, asked through gunicorn's own control client."""
    answer = subprocess.run([str(GUNICORNC), "-s", str(socket_path), "-c", "show stats", "-j"],
                            capture_output=True, text=True, timeout=30, check=True)
    return json.loads(answer.stdout)["pid"]


@pytest.fixture
def default_control_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """gunicorn's default control socket, moved from the user's runtime folder into this test's."""
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run / "gunicorn.ctl"


def web_only_stack(tmp_path: Path, name: str) -> Stack:
    """A stack as the simulator and the benchmarks start it, scaled out to two web processes, without Celery
    (the subject is gunicorn): its own redis-server, its own SQLite database."""
    settings = Settings(data_dir=tmp_path / name, database_url=f"sqlite:///{tmp_path / name}.db",
                        secret_key="test", worker_hash_key="test")
    return Stack(settings, tmp_path / name / "logs", web_workers=1, web_threads=2, web_processes=2,
                 queue_workers={}, beats=0)


def masters(stack: Stack) -> dict[str, int]:
    return {name: stack.processes[name].pid for name in stack.web_urls}


def test_two_stacks_started_on_one_machine_share_no_gunicorn_control_socket(tmp_path, default_control_socket):
    with web_only_stack(tmp_path, "first") as first, web_only_stack(tmp_path, "second") as second:
        pids = {**{f"first {n}": pid for n, pid in masters(first).items()},
                **{f"second {n}": pid for n, pid in masters(second).items()}}
        sockets = {name: listening_unix_sockets(pid) for name, pid in pids.items()}
        for name, paths in sockets.items():
            others = set().union(*(p for other, p in sockets.items() if other != name))
            assert not paths & others, f"{name} shares a control socket: {sockets}"
        assert not default_control_socket.exists(), sockets  # nothing at the path every gunicorn shares
        first.stop()
        for name, url in second.web_urls.items():  # the survivor is untouched by the first stack's shutdown
            assert requests.get(f"{url}/queue", timeout=30).status_code < 500
            assert all(Path(path).exists() for path in sockets[f"second {name}"])


# ---- the Procfile: a deployment's control socket lives in its data directory ----------------------------


@pytest.fixture
def procfile_web(tmp_path: Path, default_control_socket: Path) -> Iterator:
    """Start the Procfile's web (and the front server before it) as ``make demo`` does on a data directory of
    its own; stop every one started at the end."""
    started: list[ProcfileWeb] = []

    def start(data_dir: Path, **environment: str) -> ProcfileWeb:
        data_dir.mkdir()
        settings = Settings(data_dir=data_dir, secret_key="test", worker_hash_key="test")
        started.append(ProcfileWeb(settings, f"http://127.0.0.1:{free_port()}", data_dir / "logs",
                                   {"WEB_CONCURRENCY": "1", **environment}))
        return started[-1].start()

    yield start
    for web in started:
        web.stop()


def test_procfile_web_processes_of_two_data_directories_each_answer_on_their_own_control_socket(
        tmp_path, procfile_web, default_control_socket):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first, second = procfile_web(first_dir), procfile_web(second_dir)
    for web, data_dir in ((first, first_dir), (second, second_dir)):
        gunicorn = web.processes["web"]
        wait_for(lambda: str(data_dir / "gunicorn.ctl") in listening_unix_sockets(gunicorn.pid), "a control socket",
                 30)
        # its control socket, and the socket the front server passes it requests on: both its own data directory's
        assert listening_unix_sockets(gunicorn.pid) == {str(data_dir / "gunicorn.ctl"), str(data_dir / "web.sock")}
        assert gunicornc_master_pid(data_dir / "gunicorn.ctl") == gunicorn.pid
    assert not default_control_socket.exists()

    first.processes["web"].terminate()
    first.processes["web"].wait(timeout=30)
    assert gunicornc_master_pid(second_dir / "gunicorn.ctl") == second.processes["web"].pid  # the other's is intact
    assert requests.get(f"{second.url}/queue", timeout=30).status_code < 500


# ---- the web survives slow clients: the front server takes each request whole -------------------------------

SLOW_CONNECTIONS = 200


def test_people_take_and_submit_turns_as_fast_while_200_slow_clients_hold_connections_open(
        tmp_path, procfile_web, redis_url):
    """The attack of issue 35: connections that send a header line (or a few bytes of a body) every 5 s, never
    finishing. Served as the Procfile serves turkflow (2 gunicorn processes of 4 threads, the attack's size:
    eight such connections held them all for over a minute), people's takes and submits meanwhile keep their
    p99 within twice the same run's without them. The two are measured in alternating rounds, so the
    machine's other load weighs on both alike."""
    data_dir = tmp_path / "deployed"
    web = procfile_web(data_dir, WEB_CONCURRENCY="2", WEB_THREADS="4", TURKFLOW_REDIS_URL=redis_url)
    timed = slow.rounds(web.url, web.settings, slow_clients=SLOW_CONNECTIONS)
    assert [t.failed for t in timed.values()] == [0, 0], timed
    alone, beside = timed["alone"].p99(), timed["beside slow clients"].p99()
    assert beside <= 2 * max(alone, 0.05), f"p99 {beside:.3f} s beside slow clients, {alone:.3f} s alone"
