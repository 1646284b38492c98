"""Real services for the tests: redis-server, a Celery worker, SQLite and PostgreSQL, headless Chromium.

Database tests run once per backend (``database_url`` is parametrized); set
``TURKFLOW_TEST_BACKENDS=sqlite`` to run one backend while iterating. Every test gets a fresh, migrated
database cloned from a template, so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from pytest_redis import factories
from redis import Redis
from sqlalchemy import create_engine, text
from werkzeug.serving import make_server

from turkflow.config import Settings
from turkflow.db import dispose_engine, upgrade
from turkflow.hits import registry
from turkflow.hits.provider import Providers
from turkflow.simulator.stack import PostgresCluster, free_port

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

redis_proc = factories.redis_proc(port=None)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster, the same one the simulator and benchmarks start."""
    with PostgresCluster() as cluster:
        yield cluster


_counter = itertools.count()


def _backends() -> list[str]:
    return [b for b in os.environ.get("TURKFLOW_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade(f"sqlite:///{path}")
    dispose_engine(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_template(postgres: PostgresCluster) -> str:
    admin = create_engine(postgres.url("postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text("CREATE DATABASE turkflow_template"))
    admin.dispose()
    upgrade(postgres.url("turkflow_template"))
    return "turkflow_template"


def _new_database(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        path = tmp_path / "turkflow.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        url = f"sqlite:///{path}"
        yield url
        dispose_engine(url)
        return
    postgres: PostgresCluster = request.getfixturevalue("postgres")
    template = request.getfixturevalue("postgres_template")
    name = f"t{os.getpid()}_{next(_counter)}"
    admin = create_engine(postgres.url("postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # a file copy of the small template: a quarter of WAL_LOG's time (fsync is off)
        conn.execute(text(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY"))
    url = postgres.url(name)
    yield url
    dispose_engine(url)
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(params=_backends())
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh migrated database, once on SQLite and once on PostgreSQL."""
    yield from _new_database(request, request.param, tmp_path)


@pytest.fixture
def sqlite_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh migrated SQLite database, for tests whose subject is not the storage backend."""
    yield from _new_database(request, "sqlite", tmp_path)


# ---- settings, Redis, Celery --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url(redis_proc) -> str:  # noqa: ANN001
    return f"redis://{redis_proc.host}:{redis_proc.port}/0"


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str) -> Settings:
    # queue_refresh_seconds=0: the tests open the queue themselves, and an empty queue page reloading itself
    # would abort a browser test's own navigation when both fall together (net::ERR_ABORTED)
    return Settings(data_dir=tmp_path / "var", database_url=database_url, redis_url=redis_url,
                    secret_key="test-secret", worker_hash_key="test-hash-key", public_url="http://127.0.0.1:5000",
                    stuck_after_seconds=0, reopen_after_seconds=0, review_after_seconds=0, queue_refresh_seconds=0)


@pytest.fixture
def providers(settings: Settings) -> Providers:
    return registry.providers(settings)


@contextmanager
def celery_worker_of(app, *queues: str) -> Iterator[object]:  # noqa: ANN001
    """A real Celery worker thread pool on ``app``, taking ``queues`` (default: every queue). The queues are
    always named: a worker's choice is kept in the app it shares with later workers of the same process."""
    from celery.contrib.testing.worker import start_worker

    import workers.app

    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=10,
                      loglevel="WARNING", queues=list(queues or workers.app.QUEUES)) as worker:
        yield worker


@pytest.fixture
def celery_worker(settings: Settings, providers: Providers, redis_url: str) -> Iterator[object]:
    """A real Celery worker consuming from the real Redis, for this test alone, on this test's database.

    It starts on an empty broker and stops (then the broker is emptied again) before the test's database
    goes. A worker shared by the session was not safe: a task retrying after an error waits out its
    countdown inside the worker that received it (and, unacknowledged, in Redis), not in the queue, so
    emptying the queue between tests left it there, and it ran later against the next test's database,
    where its ids name other rows (a review of another test's turn 5 judged and blocked a worker there).
    """
    import workers.app

    app = workers.app.configure(settings, providers)
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    with celery_worker_of(app) as worker:
        yield worker
    broker.flushdb()
    broker.close()


# ---- the web app and a real browser -------------------------------------------------------------------


class LiveServer:
    def __init__(self, app) -> None:  # noqa: ANN001
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = make_server("127.0.0.1", self.port, app, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "LiveServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)


@pytest.fixture
def app(settings: Settings):  # noqa: ANN201
    from turkflow.web import create_app

    application = create_app(settings)
    application.config["TESTING"] = True
    return application


@pytest.fixture
def client(app):  # noqa: ANN001, ANN201
    return app.test_client()


@pytest.fixture
def live_server(app) -> Iterator[LiveServer]:  # noqa: ANN001
    app.config["PUBLIC_URL"] = None
    with LiveServer(app) as server:
        app.config["PUBLIC_URL"] = server.url
        yield server


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield browser
        browser.close()


@pytest.fixture
def browser_context(chromium) -> Iterator[object]:  # noqa: ANN001
    context = chromium.new_context()
    yield context
    context.close()


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.02):  # noqa: ANN001, ANN201
    """Poll a condition that another process (Celery) makes true; fails the test at the deadline.

    The deadline only keeps a broken test from hanging: a test asserts that something happens, never how
    fast (a busy machine makes any bound a coin toss; speed is measured in ``bench/``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
