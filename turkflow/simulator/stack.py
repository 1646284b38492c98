"""The real stack as local processes: redis-server, gunicorn serving the Flask app, a Celery worker (with
beat), and a throwaway PostgreSQL cluster when asked. The simulator, the benchmarks and the tests start
the very programs a deployment runs (``Procfile``), configured only through ``TURKFLOW_*`` variables.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Optional, Sequence

import requests
from celery import Celery
from redis import Redis

from turkflow.config import Settings
from turkflow.db import upgrade


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes ``Settings()`` in a child process equal to ``settings``."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        env[f"TURKFLOW_{name.upper()}"] = str(value)
    return env


def wait_for(check, what: str, timeout: float, process: Optional[subprocess.Popen] = None) -> None:  # noqa: ANN001
    """Poll ``check`` until it is true; fail early if the process it waits for has died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - not up yet
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} while starting")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within {timeout:.0f}s")
        time.sleep(0.05)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


# How long a process may take to answer after it was started. Only a guard against a hang: every wait fails at
# once when its process exits, and a busy machine (two cores under a test suite) takes far longer than a quiet
# one to import a web app or a Celery worker.
STARTUP_SECONDS = 300


class PostgresCluster:
    """A throwaway cluster owned by the postgres user (PostgreSQL refuses to run as root), tuned for speed
    over durability (tests do not need to survive a power cut), or ``durable`` as a lab's server runs, for a
    benchmark whose answer is what one machine takes (every commit flushed to disk)."""

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bindirs:
            raise RuntimeError("PostgreSQL is not installed; run `make bootstrap`, which installs it")
        self.bin = Path(bindirs[-1])
        self.root = Path(tempfile.mkdtemp(prefix="turkflow-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} exited with status {done.returncode}: "
                               f"{done.stderr.strip()}\n{tail}".strip())

    def start(self) -> None:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        # Only a Unix socket in the cluster's own directory: no TCP port to pick, so no other process on the
        # machine can take it between the pick and the start (a free port was sometimes taken meanwhile).
        options = f"-k {self.root} -c listen_addresses='' -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        # pg_ctl waits 60 s by default; a busy machine can take longer to start a cluster
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
                  "-w", "-t", str(STARTUP_SECONDS), "start")

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def pid(self) -> int:
        """The postmaster's process id: a benchmark counts the CPU of it and its server processes."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.root}"

    def create_database(self, name: str) -> str:
        from sqlalchemy import create_engine, text

        admin = create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        admin.dispose()
        return self.url(name)

    def __enter__(self) -> "PostgresCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# Longer than a simulated worker waits between its requests (a round of the other role), so gunicorn never
# closes a connection the worker is about to reuse; its 2 s default made such requests fail now and then.
KEEP_ALIVE_SECONDS = 75


# gunicorn kills a worker that has not checked in for this long, the app's import included: the 30 s default
# killed web workers still importing on a busy machine, over and over.
WORKER_TIMEOUT_SECONDS = 120


def gunicorn_command(app: str, bind: str, *, workers: int, threads: int,
                     options: Sequence[str] = ()) -> list[str]:
    """gunicorn serving ``app`` (``module:factory()``) on ``bind``, as the simulator, the benchmarks and the
    tests start it: each of them starts gunicorn through here (a deployment, and ``make demo``, through the
    ``Procfile``).

    Without a control socket. gunicorn 25.1 and later open one for ``gunicornc`` at a path shared by every
    gunicorn of the user (``$XDG_RUNTIME_DIR/gunicorn.ctl``, else ``~/.gunicorn/gunicorn.ctl``): each server
    started on the machine took it over from the one before, stopping any of them deleted the socket of
    another still running, and ``gunicornc`` reached whichever started last. Nobody manages these
    short-lived servers through it; the ``Procfile`` keeps a deployment's socket in its data directory.
    """
    return [sys.executable, "-m", "gunicorn", "--workers", str(workers), "--threads", str(threads),
            "--bind", bind, "--backlog", "2048", "--keep-alive", str(KEEP_ALIVE_SECONDS),
            "--timeout", str(WORKER_TIMEOUT_SECONDS), "--no-control-socket", *options, app]


def _numbered(name: str, count: int) -> list[str]:
    """The names of ``count`` copies of a service: the name alone for one, ``name-1`` ... for several."""
    return [name] if count == 1 else [f"{name}-{n}" for n in range(1, count + 1)]


class Stack:
    """redis-server (unless ``settings.redis_url`` is given to share), gunicorn and a Celery worker.

    The database is migrated before the processes start. Logs go to ``log_dir``, one file per process.

    Scaled out, as separate machines would run it: ``web_processes`` gunicorn servers, each on its own port
    (``urls``; ``url``, the first, is the public URL), and with ``queue_workers`` ``workers_per_queue``
    Celery workers per queue, each with its own hostname (``celery-turns-1@host``, ...), beside ``beats``
    beats (more than one is a mistake the beat lock makes harmless: one sends, the others stand by).
    """

    def __init__(self, settings: Settings, log_dir: Path, *, web_workers: int = 3, web_threads: int = 4,
                 celery_concurrency: int = 2, own_redis: bool = True,
                 queue_workers: Optional[dict[str, int]] = None, web_processes: int = 1,
                 workers_per_queue: int = 1, beats: int = 1, access_log: bool = False):
        self.settings = settings
        self.log_dir = log_dir
        self.web_workers = web_workers
        self.web_threads = web_threads
        self.celery_concurrency = celery_concurrency
        self.own_redis = own_redis
        self.queue_workers = queue_workers  # {queues: processes}: a worker per queue and a beat, as deployed
        self.web_processes = web_processes
        self.workers_per_queue = workers_per_queue
        self.beats = beats
        self.access_log = access_log  # every request in the web process's log, as the Procfile runs it
        self.url = ""
        self.web_urls: dict[str, str] = {}  # gunicorn process name -> its URL
        self.processes: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, list[str]] = {}
        self._logs: list[IO[bytes]] = []

    def __enter__(self) -> "Stack":
        self._previous_sigterm = None
        if threading.current_thread() is threading.main_thread():
            # The services run in their own sessions (a Ctrl-C reaches only us, and we stop them in
            # order), so a SIGTERM must unwind this process too rather than leave them running.
            self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.own_redis:
            port = free_port()
            self._spawn("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--dir", str(self.log_dir)])
            self.settings = self.settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{port}/0"})
            self._wait_ready("redis")
        upgrade(self.settings.database_url)
        self.web_urls = {name: f"http://127.0.0.1:{free_port()}" for name in _numbered("gunicorn",
                                                                                       self.web_processes)}
        self.url = next(iter(self.web_urls.values()))
        self.settings = self.settings.model_copy(update={"public_url": self.url})
        access = ["--access-logfile", "-"] if self.access_log else []
        for name, url in self.web_urls.items():
            self._spawn(name, gunicorn_command("turkflow.web:create_app()", url.removeprefix("http://"),
                                               workers=self.web_workers, threads=self.web_threads,
                                               options=access))
        celery = [sys.executable, "-m", "celery", "-A", "turkflow.workers.app"]
        quiet = ["--pool", "prefork", "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
        if self.queue_workers is None:
            schedule = str(self.log_dir / "celerybeat-schedule")
            self._spawn("celery", [*celery, "worker", "--beat", "--schedule", schedule,
                                   "--concurrency", str(self.celery_concurrency), *quiet])  # every queue
            workers = ["celery"]
        else:
            workers = []
            for queues, processes in self.queue_workers.items():
                for name in _numbered(f"celery-{queues.replace(',', '-')}", self.workers_per_queue):
                    # the agents queue waits on models over the network: threads, as the Procfile runs it
                    pool = ["--pool", "threads"] if queues == "agents" else []
                    self._spawn(name, [*celery, "worker", "--queues", queues, "--hostname", f"{name}@%h",
                                       "--concurrency", str(processes), *quiet, *pool])
                    workers.append(name)
            for name in _numbered("beat", self.beats):  # each with a schedule file of its own, as on a machine
                self._spawn(name, [*celery, "beat", "--schedule", str(self.log_dir / f"{name}-schedule"),
                                   "--loglevel", "WARNING"])
        for name in [*self.web_urls, *workers]:
            self._wait_ready(name)

    @property
    def urls(self) -> list[str]:
        """Every web process's URL, the public one first."""
        return list(self.web_urls.values())

    def _wait_ready(self, name: str) -> None:
        if name == "redis":
            wait_for(lambda: Redis.from_url(self.settings.redis_url).ping(), "redis-server", STARTUP_SECONDS,
                     self.processes[name])
        elif name in self.web_urls:
            url = self.web_urls[name]
            wait_for(lambda: requests.get(f"{url}/queue", timeout=2).status_code < 500, name, STARTUP_SECONDS,
                     self.processes[name])
        elif name.startswith("celery"):
            probe = Celery(broker=self.settings.redis_url)
            wanted = None if name == "celery" else f"{name}@{socket.gethostname()}"
            wait_for(lambda: any(wanted in (None, *reply) for reply in probe.control.ping(timeout=0.5)),
                     f"the Celery worker {name}", STARTUP_SECONDS, self.processes[name])

    def _spawn(self, name: str, command: list[str]) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        self.commands[name] = command
        self.processes[name] = subprocess.Popen(command, env=settings_env(self.settings), stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Take one service down as a crash, an OOM kill or an operator would: ``sig`` reaches its whole
        process group (a prefork worker's children die with it). It stays down until ``revive``."""
        process = self.processes.pop(name)
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        process.wait()

    def revive(self, name: str) -> None:
        """Start a service ``kill`` took down again, with the same command and port, and wait until it answers."""
        self._spawn(name, self.commands[name])
        self._wait_ready(name)

    def stop(self) -> None:
        """Every service, Redis last: the web processes and Celery workers all at once (each finishes what it
        holds, within 20 s), so none of them loses its broker while it shuts down."""
        order = [name for name in self.processes if name != "redis"]
        for group in (order, ["redis"]):
            stopping = {name: self.processes.pop(name) for name in group if name in self.processes}
            for process in stopping.values():
                process.terminate()
            deadline = time.monotonic() + 20
            for process in stopping.values():
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                # Whatever the service forked and left behind (a killed worker's pool processes, its embedded
                # beat) goes too: it must not outlive this stack and talk to the next one on a reused port.
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for log in self._logs:
            log.close()
        self._logs.clear()



# ---- the web as a deployment serves it: the Procfile's lines ----------------------------------------------

PROCFILE = Path(__file__).resolve().parents[2] / "Procfile"
SERVING = ("front", "web")  # the Procfile's processes that serve the web: nginx, and gunicorn behind it


def procfile_command(name: str) -> str:
    """A process's line of the ``Procfile``."""
    for line in PROCFILE.read_text().splitlines():
        if line.startswith(f"{name}: "):
            return line.removeprefix(f"{name}: ")
    raise RuntimeError(f"the Procfile has no {name} process")


class ProcfileWeb:
    """The Procfile's ``front`` and ``web`` processes as ``make demo`` runs them (a shell runs each line,
    configured by the environment) on ``settings.data_dir``, serving ``url`` (``http://127.0.0.1:PORT``);
    ``environment`` adds to what the lines read (``WEB_CONCURRENCY``, ``WEB_THREADS``)."""

    def __init__(self, settings: Settings, url: str, log_dir: Path, environment: Optional[dict[str, str]] = None):
        self.settings = settings.model_copy(update={"public_url": url})
        self.url, self.log_dir = url, log_dir
        self.environment = environment or {}
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self) -> "ProcfileWeb":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        upgrade(self.settings.database_url)
        env = {**settings_env(self.settings), "TURKFLOW_DATA_DIR": str(self.settings.data_dir),
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # as the demo has it
               "WEB_BIND": self.url.removeprefix("http://"), **self.environment}
        for name in SERVING:
            with open(self.log_dir / f"{name}.log", "ab") as log:
                self.processes[name] = subprocess.Popen(
                    ["bash", "-c", f"exec {procfile_command(name)}"], cwd=PROCFILE.parent, env=env, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True)
        for name, process in self.processes.items():
            wait_for(lambda: requests.get(f"{self.url}/queue", timeout=5).status_code < 500, f"the Procfile's {name}",
                     STARTUP_SECONDS, process)
        return self

    def stop(self) -> None:
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def __enter__(self) -> "ProcfileWeb":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
