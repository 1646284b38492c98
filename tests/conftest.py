"""Real services for the tests: redis-server, a Celery worker, SQLite and PostgreSQL, headless Chromium.

Every test gets a fresh, migrated database cloned from a template, so tests never see each other's rows;
the one exception is ``module_database_url``, one per module and backend, for tests that only read a
state that takes half a minute to make (a simulation through the real stack).

Which backend a database test runs on (``database_url``): on SQLite and on PostgreSQL when its subject is
the storage, on SQLite only when it is not. The storage is the subject where the code under test branches
on the dialect or where only the database keeps the promise the test checks: locking and concurrent
requests (the queue's take race, simultaneous sign-ins), unique constraints and partial unique indexes,
compare-and-set status updates, savepoints, aggregates and time windows in SQL, migrations, money and bonus
idempotency, reconciliation after crashes and lost messages, a crowd of simulated workers at once through
the real stack (local queue and Prolific), and one end-to-end collection per protocol (its browser test).
Page markup and content, validation messages, text rules, a protocol's dialog logic, CLI wording, export
formats and analysis run on SQLite only: their code does not branch on the dialect, and running them on
PostgreSQL too cost half of the suite's test time (about 900 of 1,830 s). The rule is applied here, in one
place: ``BOTH_BACKENDS_MODULES`` (every database test of a module) and ``BOTH_BACKENDS_TESTS`` (single
tests of modules that are otherwise about something else), each entry with its reason; a test may also say
so itself with ``@pytest.mark.both_backends``, and one that parametrizes ``database_url`` itself keeps its
choice. ``tests/test_backends.py`` fails when a listed name stops naming a test.

``TURKFLOW_TEST_BACKENDS`` overrides the rule: ``all`` runs every database test on both backends (as before
the rule; worth it before a release or after changing ``turkflow/db.py``, the models or a migration), and a
list such as ``sqlite`` or ``postgresql`` runs every database test on each backend listed (``sqlite`` while
iterating).
"""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

# The fake Prolific checks calls with plain asserts: rewritten for their messages, registered here, before any
# test module imports it (a registration in a test module came too late once another module had imported it).
pytest.register_assert_rewrite("tests.fake_prolific")

from pytest_redis import factories
from redis import Redis
from sqlalchemy import create_engine, make_url, text
from werkzeug.serving import WSGIRequestHandler, make_server

from turkflow.config import Settings
from turkflow.db import dispose_engine, upgrade
from turkflow.hits import registry
from turkflow.hits.provider import Providers
from turkflow.simulator.stack import PostgresCluster, free_port

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

redis_proc = factories.redis_proc(port=None)


# ---- the suite in parallel (pytest-xdist) ---------------------------------------------------------------

# Processes for a run of more than one file. Most of the suite waits (Celery workers, redis-server and
# gunicorn starting, CLIs in subprocesses, the browser), so more processes than the 2 cores still help.
WORKERS = 3


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run in parallel unless told otherwise (``-n 0``, ``-p no:xdist``), each test file whole in one process
    (``--dist loadfile``): a module's tests share its module-scoped database (a simulation made once), which
    a file split over processes would make once per process. Set here rather than in ``addopts`` so that
    ``-p no:xdist`` still runs. ``-n N`` alone keeps the file as the unit too."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker runs its tests itself (xdist resets its options to these defaults)
    if config.option.numprocesses is None:
        config.option.numprocesses = "auto"
    if config.option.dist == "no":
        config.option.dist = "loadfile"
        config.option.loadscopereorder = False  # in the collection's order: the longest files first


# The files that take longest, longest first (their times in a full run: 400 s down to 100 s), handed out
# first so that no process is left at the end running one of them alone while the others wait; xdist's own
# order (most tests first) sent the simulations, which have few tests, last. A file missing here only costs
# time.
LONGEST = ("test_simulator_star", "test_simulator", "test_simulator_prolific", "test_prolific_settle",
           "test_simulator_frames", "test_star_dialog", "test_stall", "test_wheel", "test_star_browser",
           "test_analysis")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(Path(item.nodeid.partition("::")[0]).stem, len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``WORKERS`` processes, but no more than the files a run names (a file runs whole in one process, and a
    process started for no file costs its start), and none for a single file. The environment variable
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    paths = {Path(arg.partition("::")[0]) for arg in config.args}
    if not all(path.is_file() for path in paths):
        return WORKERS
    return 0 if len(paths) == 1 else min(WORKERS, len(paths))


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster, the same one the simulator and benchmarks start."""
    with PostgresCluster() as cluster:
        yield cluster


_counter = itertools.count()


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
    dispose_engine(postgres.url("turkflow_template"))
    return "turkflow_template"


class PostgresCopies:
    """Fresh copies of the migrated template, each made before a test asks for it, in a thread: a copy
    took about half a second of a test's setup, most of it waiting on PostgreSQL's checkpoints, which the
    test running meanwhile overlaps. Each copy is handed out once, so every test still gets its own
    database, never touched before. A copy that failed raises in the test that asked for it."""

    def __init__(self, postgres: PostgresCluster, template: str) -> None:
        self._postgres = postgres
        self._template = template
        self._admin = create_engine(postgres.url("postgres"), isolation_level="AUTOCOMMIT")
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._make, name="postgres-copies", daemon=True)
        self._thread.start()

    def _make(self) -> None:
        while not self._stop.is_set():
            name = f"t{os.getpid()}_{next(_counter)}"
            made: str | BaseException = name
            try:  # a file copy of the small template: a quarter of WAL_LOG's time (fsync is off)
                with self._admin.connect() as conn:
                    conn.execute(text(f"CREATE DATABASE {name} TEMPLATE {self._template} STRATEGY FILE_COPY"))
            except Exception as error:  # noqa: BLE001 - handed to the test that waits for it
                made = error
            while not self._stop.is_set():
                try:
                    self._ready.put(made, timeout=0.2)
                    break
                except queue.Full:
                    continue

    def take(self) -> str:
        """The URL of a fresh database for one test."""
        made = self._ready.get(timeout=300)
        if isinstance(made, BaseException):
            raise made
        return self._postgres.url(made)

    def drop(self, url: str) -> None:
        dispose_engine(url)
        with self._admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE {make_url(url).database} WITH (FORCE)"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._admin.dispose()


@pytest.fixture(scope="session")
def postgres_copies(postgres: PostgresCluster, postgres_template: str) -> Iterator[PostgresCopies]:
    copies = PostgresCopies(postgres, postgres_template)
    yield copies
    copies.close()


def _new_database(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        path = tmp_path / "turkflow.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        url = f"sqlite:///{path}"
        yield url
        dispose_engine(url)
        return
    copies: PostgresCopies = request.getfixturevalue("postgres_copies")
    url = copies.take()
    yield url
    copies.drop(url)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh migrated database on the backend ``pytest_generate_tests`` chose for this test."""
    yield from _new_database(request, request.param, tmp_path)


@pytest.fixture(scope="module")
def module_database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh migrated database shared by a module's tests on one backend (chosen as for ``database_url``):
    for a state that costs half a minute to make (a simulation through the real stack) and that several
    tests only read. A test that writes must take ``database_url``."""
    yield from _new_database(request, request.param, tmp_path_factory.mktemp("module"))


@pytest.fixture
def another_database_url(request: pytest.FixtureRequest, module_database_url: str, tmp_path: Path) -> Iterator[str]:
    """A fresh migrated database on the backend of ``module_database_url``: a second run to compare with the
    module's (the same seed gives the same report)."""
    yield from _new_database(request, make_url(module_database_url).get_backend_name(), tmp_path)


@pytest.fixture
def sqlite_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh migrated SQLite database, for tests whose subject is not the storage backend."""
    yield from _new_database(request, "sqlite", tmp_path)


# ---- which database tests run on both backends (see the module docstring) --------------------------------

BACKENDS = ("sqlite", "postgresql")

BOTH_BACKENDS_MODULES = {
    "test_db": "savepoints around pysqlite's deferred BEGIN (turkflow.db.savepoint branches on the dialect)",
    "test_migrations": "the migrated schema per dialect (batch mode on SQLite, named constraints on PostgreSQL)",
    "test_lifecycle": "one open turn per conversation (a partial unique index), advancing twice, leases",
    "test_pipeline": "double submits and the reconciler that repairs lost messages",
    "test_states": "compare-and-set status updates",
    "test_keep": "the queue's take of a kept turn: a time window and the keeper's presence in SQL",
    "test_queue_listing": "the queue's one query",
    "test_quality_checks": "the checks' query count",
    "test_quality_monitor": "blocks and bonuses once however often the pipeline runs (unique constraints)",
    "test_mturk": "idempotent request tokens, bonuses paid once, the reconciler",
    "test_mturk_money": "spend as SQL aggregates",
    "test_prolific_provider": "studies created once by concurrent workers, pay claims and bulk payments once",
    "test_prolific_settle": "settlement after crashes and time-outs, each turn paid once",
    "test_prolific_hooks": "an event delivered twice is dropped (a unique constraint)",
}

BOTH_BACKENDS_TESTS = {
    "test_signin::test_sixty_simultaneous_guesses_get_only_the_limit_checked_and_then_the_right_password_is_refused":
        "count-then-record under a lock: BEGIN IMMEDIATE on SQLite, LOCK TABLE on PostgreSQL",
    "test_sessions::test_repeated_wrong_passwords_lock_the_username_even_for_the_right_password":
        "sign-in failures counted in SQL",
    "test_sessions::test_a_client_guessing_many_usernames_is_throttled_and_other_clients_are_not":
        "sign-in failures counted in SQL",
    "test_sessions::test_failed_sign_ins_stop_counting_after_the_window": "a time window in SQL",
    "test_sessions::test_an_expired_dashboard_session_signs_nobody_in_and_is_dropped_at_the_next_sign_in":
        "expiry times compared in SQL",
    "test_worker_pages::test_taking_a_turn_leases_it_for_the_configured_time_and_hides_it_from_others":
        "the take and its lease",
    "test_worker_pages::test_double_submit_of_one_assignment_stores_one_turn": "one turn per assignment",
    "test_worker_pages::test_concurrent_submits_of_one_assignment_store_one_turn": "concurrent submits",
    "test_worker_pages::test_abandoned_lease_returns_the_turn_to_the_pool_and_the_late_submit_is_refused":
        "lease expiry",
    "test_mturk_web::test_submitting_twice_stores_one_turn_and_finishes_on_mturk_again": "one turn per assignment",
    "test_mturk_web::test_a_database_taking_no_writes_answers_503_keeps_the_typed_text_and_stores_it_on_the_next_submit":
        "each dialect's refusal to write is told apart (turkflow.db)",
    "test_error_paths::test_a_read_only_database_answers_503_to_a_submit_keeps_the_typed_text_and_takes_it_afterwards":
        "each dialect's refusal to write is told apart (turkflow.db)",
    "test_error_paths::test_a_take_that_cannot_be_recorded_answers_503_and_leaves_the_turn_takeable":
        "a take the database refuses",
    "test_error_paths::test_a_turn_sent_again_with_other_text_is_a_409_naming_what_was_stored":
        "one turn per assignment",
    "test_prolific_web::test_two_participants_arriving_at_once_never_get_the_same_turn": "the take race",
    "test_prolific_web::test_a_participant_holds_one_role_for_the_whole_collection": "a unique constraint",
    "test_prolific_web::test_a_timed_out_submission_gives_its_turn_back_through_the_webhook_once":
        "a webhook event applied once",
    "test_prolific_web::test_a_bonus_is_paid_once_when_the_task_dies_between_set_up_and_pay_and_runs_again":
        "bonus idempotency",
    "test_prolific_web::test_a_bonus_whose_worker_died_after_the_pay_call_is_settled_by_the_poller_never_paid_again":
        "reconciliation after a crash",
    "test_prolific_web::test_stored_turns_are_approved_in_bulk_after_the_review_delay_and_never_rejected":
        "bulk approval once, a delay compared in SQL",
    "test_prolific_onboarding::test_setting_up_twice_makes_one_study_and_one_group_and_check_reports_it":
        "set-up idempotency",
    "test_star_qualification::test_multi_task_in_sql_agrees_with_python_on_every_scenario":
        "multi_task compiles per dialect (turkflow.protocols.star.stages)",
    "test_star_qualification::test_the_queue_never_offers_a_multi_task_turn_before_stage_two": "multi_task in SQL",
    "test_star_qualification::test_a_star_turn_hit_requires_the_stage_its_conversation_needs": "multi_task in SQL",
    "test_star_qualification::test_a_prolific_participant_is_given_only_turns_of_a_stage_they_passed":
        "multi_task in SQL",
    "test_star_qualification::test_the_hint_budget_is_kept_by_the_server_and_an_attempt_is_graded_once":
        "an attempt graded once",
    "test_stall::test_every_student_blocked_stalls_the_batch_once_after_the_grace_period":
        "the stall's aggregates and grace period in SQL (turkflow.quality.stall)",
    "test_stall::test_unblocking_one_worker_clears_the_stall": "the stall's aggregates in SQL",
    "test_stall::test_a_short_starvation_that_ends_within_the_grace_period_is_never_reported":
        "the stall's grace period in SQL",
    "test_stall::test_workers_who_never_onboarded_or_never_came_do_not_make_a_stall": "the stall's aggregates in SQL",
    "test_stall::test_inviting_and_onboarding_a_new_student_clears_the_stall": "the stall's aggregates in SQL",
    "test_stall::test_a_local_worker_who_cannot_take_a_prolific_batchs_turns_does_not_hide_its_stall":
        "the stall's aggregates in SQL",
    "test_export::test_filters_select_batch_domain_completed_conversations_and_drop_blocked_workers_turns":
        "the export's filters in SQL",
    "test_export::test_conversations_are_read_page_by_page_in_id_order": "keyset paging in SQL",
    "test_cli::test_batch_status_reports_turns_open_hits_and_spend": "progress and spend as SQL aggregates",
    "test_cli::test_skip_if_exists_launches_a_named_batch_once": "a named batch launched once",
    "test_annotate::test_each_turn_goes_to_different_annotators_one_who_keeps_disagreeing_is_blocked_and_a_person_decides":
        "the queue's take for annotators",
    "test_simulator::test_simulation_report_counts_equal_the_database":
        "end-to-end collection (wizard of tasks), many workers at once",
    "test_simulator_prolific::test_a_simulation_on_prolific_reports_what_the_database_and_prolific_hold":
        "end-to-end collection on Prolific, its payments",
    "test_frames_browser::test_a_wizard_refines_a_search_without_retyping_with_flexible_dates_and_books_which_ends_the_dialog":
        "end-to-end collection (Frames): its searches logged, a booking ends the dialog",
    "test_meep_browser::test_the_agent_clicks_makes_a_template_drives_and_the_user_approves_on_the_map":
        "end-to-end collection (MEEP): clicks and a template shared with the batch",
    "test_star_browser::test_a_user_and_a_wizard_complete_a_star_dialog_in_the_browser":
        "end-to-end collection (STAR): queries logged, multi_task in the queue's SQL",
    "test_quality_review::test_daily_review_queues_each_blocked_worker_with_low_rated_turns_in_context":
        "the review day in SQL",
    "test_quality_review::test_rebuilding_the_queue_keeps_one_entry_per_worker_and_day":
        "one entry per worker and day (a unique constraint)",
    "test_quality_review::test_a_rater_who_contradicts_everyone_is_an_outlier": "agreement as SQL aggregates",
    "test_quality_review::test_activity_rollup_counts_turns_labels_and_ratings_once_however_often_it_runs":
        "hourly rollups (aggregates by date) once",
    "test_quality_review::test_batch_snapshots_recount_running_batches_and_finished_ones_once_more":
        "snapshots as aggregates",
    "test_quality_review::test_a_rater_giving_split_answers_is_identified_stops_counting_and_shows_on_the_review_page":
        "agreement as SQL aggregates",
}


def _backends() -> list[str]:
    """The backends this run may use: both unless ``TURKFLOW_TEST_BACKENDS`` lists fewer."""
    chosen = os.environ.get("TURKFLOW_TEST_BACKENDS", "").strip()
    if chosen in ("", "all"):
        return list(BACKENDS)
    listed = [b for b in chosen.split(",") if b]
    unknown = sorted(set(listed) - set(BACKENDS))
    if unknown:
        raise pytest.UsageError(f"TURKFLOW_TEST_BACKENDS: unknown backend {', '.join(unknown)}; "
                                f"use all or a list of {', '.join(BACKENDS)}")
    return listed


def _backends_of(module: str, test: str, marked: bool) -> list[str]:
    """The backends one database test runs on: ``TURKFLOW_TEST_BACKENDS`` when set, else the rule above."""
    if os.environ.get("TURKFLOW_TEST_BACKENDS", "").strip():
        return _backends()
    both = marked or module in BOTH_BACKENDS_MODULES or f"{module}::{test}" in BOTH_BACKENDS_TESTS
    return list(BACKENDS) if both else ["sqlite"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``database_url`` and ``module_database_url`` by the rule, unless the test names its backends
    itself. A test comparing with the module's database takes ``another_database_url``, not both."""
    for name, scope in (("module_database_url", "module"), ("database_url", "function")):
        if name not in metafunc.fixturenames:
            continue
        if any(name in _argnames(mark) for mark in metafunc.definition.iter_markers("parametrize")):
            continue
        module = metafunc.module.__name__.rpartition(".")[2]
        marked = metafunc.definition.get_closest_marker("both_backends") is not None
        metafunc.parametrize(name, _backends_of(module, metafunc.function.__name__, marked), indirect=True,
                             scope=scope)


def _argnames(mark: pytest.Mark) -> list[str]:
    names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
    return [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)


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
    always named: a worker's choice is kept in the app it shares with later workers of the same process.

    Its wait on Redis (BRPOP) ends every 0.1 s instead of every second: stopping the worker waits out the
    current one, which cost most tests with a worker 0.8 s each; the app's own options come back after."""
    from celery.contrib.testing.worker import start_worker

    import turkflow.workers.app

    options = app.conf.broker_transport_options
    app.conf.broker_transport_options = {**options, "polling_interval": 0.1}
    try:
        with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=10,
                          loglevel="WARNING", queues=list(queues or turkflow.workers.app.QUEUES)) as worker:
            yield worker
    finally:
        app.conf.broker_transport_options = options


@pytest.fixture
def celery_worker(settings: Settings, providers: Providers, redis_url: str) -> Iterator[object]:
    """A real Celery worker consuming from the real Redis, for this test alone, on this test's database.

    It starts on an empty broker and stops (then the broker is emptied again) before the test's database
    goes. A worker shared by the session was not safe: a task retrying after an error waits out its
    countdown inside the worker that received it (and, unacknowledged, in Redis), not in the queue, so
    emptying the queue between tests left it there, and it ran later against the next test's database,
    where its ids name other rows (a review of another test's turn 5 judged and blocked a worker there).
    """
    import turkflow.workers.app

    app = turkflow.workers.app.configure(settings, providers)
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    with celery_worker_of(app) as worker:
        yield worker
    broker.flushdb()
    broker.close()


# ---- the web app and a real browser -------------------------------------------------------------------


class _QuietRequestHandler(WSGIRequestHandler):
    """Logs no request: once a test's in-process Celery worker has set up the root logger, werkzeug's access
    lines went to the terminal, past pytest's capture, when the browser fetched the favicon after the test's
    own output was collected."""

    def log_request(self, *args: object, **kwargs: object) -> None:
        pass


class LiveServer:
    def __init__(self, app) -> None:  # noqa: ANN001
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = make_server("127.0.0.1", self.port, app, threaded=True, request_handler=_QuietRequestHandler)
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
