"""The ``Procfile``'s processes run on one machine and kept running, as ``turkflow demo`` runs them.

The repository's ``Procfile`` is installed with the package (``turkflow/Procfile`` links to it), so an
installed turkflow starts exactly what a deployment runs: each line is a process, its command run by
``/bin/sh`` with the environment it is given (``WEB_BIND``, ``TURKFLOW_DATA_DIR``, the concurrencies), in a
session of its own so that a Ctrl-C reaches the supervisor alone, which stops them in order. A process that
dies is started again, unless it keeps dying at once (a process failing at start, not crashing now and then).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Optional

PROCFILE = Path(__file__).resolve().parent / "Procfile"

# A process that dies this many times within DEATHS_WINDOW seconds fails at start: the supervisor gives up.
DEATHS, DEATHS_WINDOW = 5, 60.0
STOP_SECONDS = 20.0  # a process's time to finish what it holds after SIGTERM, before SIGKILL


@dataclass(frozen=True)
class Process:
    name: str
    command: str


def read(path: Path = PROCFILE) -> list[Process]:
    """The processes of a Procfile, in its order (``name: command`` lines; blank lines and ``#`` comments
    skipped)."""
    processes = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, colon, command = line.partition(":")
        if not colon or not name.strip().isidentifier() or not command.strip():
            raise ValueError(f"{path}, line {number}: not a 'name: command' line")
        processes.append(Process(name.strip(), command.strip()))
    return processes


class Failed(Exception):
    """A process could not be started or kept running; the message says which and where its log is."""


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind ``port`` now, as a server binds (SO_REUSEADDR). A connection test is not
    enough: a port held by processes that no longer accept can still take connections."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class _Running:
    process: Process
    popen: subprocess.Popen
    log: IO[bytes]
    deaths: list[float] = field(default_factory=list)


class Supervisor:
    """Runs processes with ``env``, each logging to ``log_dir/<name>.log``, and keeps them running.

    ``say`` gets each line for the console. ``port``: the public port the process binding ``WEB_BIND`` holds;
    that process, dead, is started again only once the port is free (its workers may hold it a moment)."""

    def __init__(self, env: dict[str, str], log_dir: Path, say: Callable[[str], None], port: Optional[int] = None):
        self.env, self.log_dir, self.say, self.port = env, log_dir, say, port
        self.running: dict[str, _Running] = {}

    def start(self, process: Process) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{process.name}.log", "ab")  # noqa: SIM115 - closed in stop()
        earlier = self.running.get(process.name)
        self.running[process.name] = _Running(process, self._spawn(process, log), log,
                                              earlier.deaths if earlier else [])
        if earlier is not None:
            earlier.log.close()

    def _spawn(self, process: Process, log: IO[bytes]) -> subprocess.Popen:
        return subprocess.Popen(["/bin/sh", "-c", f"exec {process.command}"], env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def log_of(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_of(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float) -> None:
        """Poll ``ready`` until it holds; fail at once when a process exits meanwhile (with its log's tail),
        or after ``timeout`` seconds (only a guard against a hang: a busy machine starts slowly)."""
        deadline = time.monotonic() + timeout
        while not ready():
            for name, run in self.running.items():
                if run.popen.poll() is not None:
                    raise Failed(f"{name} exited with status {run.popen.returncode} while starting; "
                                 f"log: {self.log_of(name)}\n{self.tail(name)}")
            if time.monotonic() > deadline:
                raise Failed(f"{what} did not come up within {timeout:.0f} s; logs in {self.log_dir}")
            time.sleep(0.2)

    def logged(self, name: str, text: str) -> bool:
        try:
            return text in self.log_of(name).read_text(errors="replace")
        except OSError:
            return False

    def keep_running(self) -> None:
        """Until interrupted: start again whatever dies (a crash, an OOM kill, a kill -9), said on the console
        and in its log; raise ``Failed`` when a process dies ``DEATHS`` times within ``DEATHS_WINDOW`` s."""
        while True:
            for name, run in list(self.running.items()):
                status = run.popen.poll()
                if status is None:
                    continue
                now = time.monotonic()
                run.deaths = [at for at in run.deaths if now - at < DEATHS_WINDOW] + [now]
                if len(run.deaths) >= DEATHS:
                    raise Failed(f"{name} died {len(run.deaths)} times within a minute; log: {self.log_of(name)}")
                message = (f"{name} exited with status {status} at {time.strftime('%H:%M:%S', time.gmtime())} "
                           "UTC; starting it again")
                self.say(message)
                run.log.write(f"\n==== turkflow demo: {message} ====\n".encode())
                run.log.flush()
                self._kill_group(run.popen)  # what it forked goes with it
                if self.port is not None and "WEB_BIND" in run.process.command and not port_free(self.port):
                    self.say(f"port {self.port} is still held, most likely by the workers of the {name} process "
                             "that died; waiting up to 60 s")
                    deadline = now + 60
                    while not port_free(self.port):
                        if time.monotonic() > deadline:
                            raise Failed(f"port {self.port} is still held after 60 s; `ss -ltnp 'sport = "
                                         f":{self.port}'` shows by what")
                        time.sleep(0.5)
                    self.say(f"port {self.port} is free")
                self.start(run.process)
            time.sleep(0.5)

    def stop(self, last: tuple[str, ...] = ()) -> list[str]:
        """Stop every process (SIGTERM, then SIGKILL after ``STOP_SECONDS``) with whatever each forked, those
        named in ``last`` after all the others (the broker, which the others use while they stop); returns
        their names in the order they were started."""
        names = list(self.running)
        for wave in ([n for n in names if n not in last], [n for n in names if n in last]):
            for name in reversed(wave):
                if self.running[name].popen.poll() is None:
                    self.running[name].popen.terminate()
            deadline = time.monotonic() + STOP_SECONDS
            for name in wave:
                run = self.running[name]
                try:
                    run.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    run.popen.kill()
                    run.popen.wait()
                self._kill_group(run.popen)
                run.log.close()
        self.running.clear()
        return names

    @staticmethod
    def _kill_group(popen: subprocess.Popen) -> None:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
