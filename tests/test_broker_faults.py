"""Broker faults against the real stack: redis-server, a prefork Celery worker with beat, gunicorn and SQLite
as separate processes (``turkflow.simulator.stack``), with Redis and the worker killed under load.

Workers submit turns as the web does (the turn is committed, then ``turn_submitted`` is queued, and a
broker that is down only loses the message). Redis runs without persistence, so a restart loses every
queued and unacknowledged message: the conversations must move again all the same, through the
reconciler's sweeps, with nothing lost, doubled, or reviewed twice. The reconciler runs every second here
and repairs after two; ``bench.chaos`` measures the defaults.
"""

from __future__ import annotations

import ast
import itertools
import json
import signal
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest
from celery import Celery
from redis import Redis
from sqlalchemy import func
from sqlmodel import col, select

from tests.conftest import celery_worker_of, wait_until
from turkflow.config import Settings
from turkflow.db import session_scope
from turkflow.protocols.wot import load_documents, read_documents, sample_tasks_path
from turkflow.hits import lifecycle, registry
from turkflow.models import (Bonus, Conversation, Event, Hit, HitStatus, QualityDecision, Rating, Task, Turn,
                             TurnStatus, Worker)
from turkflow.simulator.driver import pipeline_backlog
from turkflow.simulator.stack import Stack
from turkflow.workers.app import celery_config
from turkflow.workers.broker import SET_ASIDE

SETTLE_SECONDS = 90  # generous: the machine may be busy; the wait ends as soon as it settles
_texts = itertools.count()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("broker-faults")
    settings = Settings(data_dir=work, database_url=f"sqlite:///{work / 'turkflow.db'}", secret_key="test",
                        worker_hash_key="test", reconcile_seconds=1, reopen_after_seconds=2,
                        review_after_seconds=2, stuck_after_seconds=2)
    with Stack(settings, work / "logs", web_workers=1, web_threads=2, celery_concurrency=2) as running:
        yield running


class Crowd:
    """One student and one teacher writing every open turn of a batch, queueing each as the web does."""

    def __init__(self, stack: Stack, conversations: int = 4):
        self.settings = stack.settings
        self.producer = Celery("producer", set_as_current=False)
        self.producer.conf.update(celery_config(stack.settings))
        self.written: dict[int, str] = {}  # turn id -> text, every turn the server confirmed
        with session_scope(self.settings.database_url) as s:
            if not s.exec(select(Task)).first():
                load_documents(s, read_documents(sample_tasks_path()))
            batch, hits = lifecycle.launch_batch(s, list(s.exec(select(Task))), conversations, name="faults",
                                                 max_turns=40,
                                                 quality={"quality_window": 1})  # a bonus a turn
            self.batch_id = batch.id
            self.workers = {}
            for role in ("student", "teacher"):
                worker = Worker(external_id=f"faults-{batch.id}-{role}", role=role, onboarded=True)
                s.add(worker)
                s.flush()
                self.workers[role] = worker
            hit_ids = [hit.id for hit in hits]
        for hit_id in hit_ids:
            with session_scope(self.settings.database_url) as s:
                lifecycle.publish_hit(s, registry.providers(self.settings).get("local"), hit_id)

    def write_round(self, send: bool = True) -> list[int]:
        """Write every open turn of the batch and (unless ``send`` is false) queue each one's message as the
        web does; returns the turn ids. Queueing fails while Redis is down."""
        with session_scope(self.settings.database_url) as s:
            open_hits = s.exec(
                select(Hit.id, Hit.role).join(Turn, Turn.id == Hit.turn_id)
                .join(Conversation, Conversation.id == Turn.conversation_id)
                .where(Conversation.batch_id == self.batch_id, Hit.status == HitStatus.open)
            ).all()
        turn_ids = []
        for hit_id, role in open_hits:
            text = f"Message number {next(_texts)} about the next step, written carefully."
            answers = ({"relevant": "yes", "useful": "yes", "real_life": "I would do it",
                        "intent": "request_step", "response": text} if role == "student" else
                       {"relevant": "yes", "useful": "yes", "action": "return_step", "response": text})
            with session_scope(self.settings.database_url) as s:
                worker = s.get(Worker, self.workers[role].id)
                assignment = lifecycle.take_turn(s, worker, hit_id, lease_seconds=600)
                turn_id = lifecycle.submit_turn(s, assignment.external_id, worker, answers).turn.id
            self.written[turn_id] = text
            turn_ids.append(turn_id)
            if send:
                self.send([turn_id])
        return turn_ids

    def send(self, turn_ids: list[int]) -> None:
        for turn_id in turn_ids:
            try:
                self.producer.send_task("workers.tasks.turn_submitted", (turn_id,), retry=False)
            except Exception:  # noqa: BLE001, S110 - stored but not queued: the reconciler's job
                pass

    def settled(self) -> bool:
        """Every conversation has its next turn open, every turn is reviewed, every bonus paid."""
        with session_scope(self.settings.database_url) as s:
            return not any(pipeline_backlog(s, self.batch_id, bonuses=True).values())

    def assert_intact(self) -> int:
        """Nothing lost, nothing doubled, every submitted turn reviewed exactly once; returns the bonuses."""
        with session_scope(self.settings.database_url) as s:
            turns = s.exec(select(Turn).join(Conversation, Conversation.id == Turn.conversation_id)
                           .where(Conversation.batch_id == self.batch_id)).all()
            submitted = {t.id: t for t in turns if t.status == TurnStatus.submitted}
            stored = {turn_id: submitted[turn_id].text for turn_id in self.written if turn_id in submitted}
            assert stored == self.written
            assert len({(t.conversation_id, t.index) for t in turns}) == len(turns)
            ids = [t.id for t in turns]
            hits_per_turn = s.exec(select(Hit.turn_id, func.count()).where(col(Hit.turn_id).in_(ids))
                                   .group_by(Hit.turn_id)).all()
            assert {n for _, n in hits_per_turn} == {1} and len(hits_per_turn) == len(turns)
            assert all(t.reviewed_at is not None for t in submitted.values())
            reviews = s.exec(select(Event.turn_id, func.count()).where(Event.kind == "turn_reviewed",
                                                                      col(Event.turn_id).in_(list(submitted)))
                             .group_by(Event.turn_id)).all()
            assert dict(reviews) == {turn_id: 1 for turn_id in submitted}
            ratings = s.exec(select(Rating.id).where(col(Rating.rater_turn_id).in_(list(submitted)))).all()
            decisions = s.exec(select(QualityDecision.rating_id, func.count())
                               .where(col(QualityDecision.rating_id).in_(ratings))
                               .group_by(QualityDecision.rating_id)).all()
            assert dict(decisions) == {rating_id: 1 for rating_id in ratings}
            bonuses = s.exec(select(Bonus.id).where(col(Bonus.turn_id).in_(ids))).all()
            paid = s.exec(select(Event.data)
                          .where(Event.kind == "bonus_paid", col(Event.turn_id).in_(ids))).all()
            assert sorted(data["bonus_id"] for data in paid) == sorted(bonuses)
        return len(bonuses)


def submissions_held(stack: Stack) -> set[int]:
    """The turns whose ``turn_submitted`` message a worker has received and not acknowledged: kombu keeps
    such a message in Redis' ``unacked`` hash until the ack, or (its worker dead) for the visibility
    timeout."""
    redis = Redis.from_url(stack.settings.redis_url)
    try:
        messages = [json.loads(raw)[0] for raw in redis.hvals("unacked")]
    finally:
        redis.close()
    return {ast.literal_eval(m["headers"]["argsrepr"])[0] for m in messages
            if m["headers"].get("task") == "workers.tasks.turn_submitted"}


@contextmanager
def writes_held(settings: Settings) -> Iterator[None]:
    """Another process holds SQLite's write lock (a long write elsewhere): every write waits on the busy
    timeout, 30 s, while reads go on (WAL)."""
    lock = sqlite3.connect(settings.database_url.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
    try:
        lock.execute("BEGIN IMMEDIATE")
        yield
        lock.execute("ROLLBACK")
    finally:
        lock.close()


def next_turn_exists(settings: Settings, turn_id: int) -> bool:
    with session_scope(settings.database_url) as s:
        turn = s.get(Turn, turn_id)
        return s.exec(select(Turn.id).where(Turn.conversation_id == turn.conversation_id,
                                            Turn.index == turn.index + 1)).first() is not None


def test_worker_survives_redis_stopped_and_restarted_mid_task_and_every_conversation_moves_again(stack):
    crowd = Crowd(stack)
    celery = stack.processes["celery"]
    for how in (signal.SIGTERM, signal.SIGKILL, signal.SIGKILL):
        crowd.write_round()  # openings and reviews in flight ...
        stack.kill("redis", how)  # ... when Redis goes away
        crowd.write_round()  # submissions while Redis is down: stored, their messages never sent
        stack.revive("redis")
        wait_until(crowd.settled, timeout=SETTLE_SECONDS, interval=0.2)
        assert celery.poll() is None, f"the Celery worker died ({how!r}); see {stack.log_dir / 'celery.log'}"
    assert stack.processes["celery"] is celery
    assert crowd.assert_intact() >= 1  # every rating is "yes": the monitor pays bonuses, each exactly once


def test_worker_killed_between_turn_stored_and_next_turn_opened_loses_no_turn(stack):
    """The window is held open, not hoped for: the turns are stored, then a long write elsewhere holds the
    database while their messages go out, so the worker receives a ``turn_submitted`` and waits to open the
    next turn. It is killed right there, holding that message unacknowledged (Redis gives it back only
    after the visibility timeout, ten minutes): the reconciler opens the next turn instead."""
    crowd = Crowd(stack)
    stored = crowd.write_round(send=False)
    with writes_held(stack.settings):
        crowd.send(stored)
        held = wait_until(lambda: submissions_held(stack) & set(stored), timeout=SETTLE_SECONDS,
                          interval=0.01)
        assert not any(next_turn_exists(stack.settings, turn_id) for turn_id in held)  # inside the window
        stack.kill("celery", signal.SIGKILL)
    assert held <= submissions_held(stack)  # the dead worker's messages stay unacknowledged
    stack.revive("celery")
    wait_until(crowd.settled, timeout=SETTLE_SECONDS, interval=0.2)
    assert all(next_turn_exists(stack.settings, turn_id) for turn_id in held)
    assert held <= submissions_held(stack)  # still unacknowledged: the repair was the reconciler's
    crowd.write_round()  # and the revived worker carries on as usual
    wait_until(crowd.settled, timeout=SETTLE_SECONDS, interval=0.2)
    crowd.assert_intact()


def test_beat_copies_sent_while_no_worker_consumed_are_dropped_when_it_returns_not_run_back_to_back(
        sqlite_url, redis_url, tmp_path):
    """While no worker consumes (it crashed, Redis' host was cut off from it), beat keeps sending the
    reconciler every interval. Each copy expires when the next one is due, so the worker that comes back
    drops the stale copies instead of running the whole backlog back to back, then runs the next one."""
    from celery.signals import task_revoked

    import turkflow.workers.app
    from tests.test_pipeline import STUDENT_ANSWERS, launch, make_worker

    settings = Settings(data_dir=tmp_path / "var", database_url=sqlite_url, redis_url=redis_url,
                        secret_key="test", worker_hash_key="test", reconcile_seconds=1,
                        reopen_after_seconds=0, review_after_seconds=0, stuck_after_seconds=0)
    providers = registry.providers(settings)
    launch(settings, providers)
    student = make_worker(settings, "student", "s1")
    with session_scope(settings.database_url) as s:  # a turn whose opening message was lost: any
        hit = lifecycle.open_hits_for(s, student)[0]  # reconciler run that happens opens the next turn
        assignment = lifecycle.take_turn(s, student, hit.id, lease_seconds=60)
        lifecycle.submit_turn(s, assignment.external_id, student, STUDENT_ANSWERS)

    def next_turn_open() -> bool:
        with session_scope(settings.database_url) as s:
            opened = s.exec(select(Hit).where(Hit.role == "teacher", Hit.status == HitStatus.open)).first()
            return opened is not None

    app = turkflow.workers.app.configure(settings, providers)
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    entry = app.conf.beat_schedule["reconcile"]
    for _ in range(3):  # three intervals of beat with no worker
        app.send_task(entry["task"], **entry.get("options", {}))
    next_due = datetime.now(timezone.utc) + timedelta(seconds=entry["schedule"])
    queued = [json.loads(raw) for raw in broker.lrange("sweeps", 0, -1)]
    assert len(queued) == 3
    stale = max([next_due, *(datetime.fromisoformat(m["headers"]["expires"]) for m in queued
                             if m["headers"].get("expires"))])
    wait_until(lambda: datetime.now(timezone.utc) > stale, timeout=10)  # the worker comes back after that

    dropped: list[str] = []

    def on_revoked(request=None, expired: bool = False, **_: object) -> None:  # noqa: ANN001
        dropped.append(request.task if expired else "revoked, not expired")

    task_revoked.connect(on_revoked, weak=False)
    try:
        with celery_worker_of(app):
            wait_until(lambda: len(dropped) == 3 or next_turn_open())
            assert not next_turn_open(), "a stale copy of the reconciler ran"
            assert dropped == [entry["task"]] * 3 and broker.llen("sweeps") == 0
            app.send_task(entry["task"])  # the next copy, sent with the worker back, runs
            wait_until(next_turn_open)
    finally:
        task_revoked.disconnect(on_revoked)
        broker.flushdb()
        broker.close()


def test_tasks_go_to_the_broker_of_the_latest_settings_not_the_first_one_used(redis_url):
    """A web app built for one Redis after tasks were sent to another (a test after another, the factory
    after an import-time default) sends to its own: before, the first broker's pooled connection kept
    every later task, and the next test's worker never saw its turns. Coming back to a broker used before
    works too (closing the pool it left behind once failed every later task: "Acquire on closed pool")."""
    from turkflow.workers import app as celery_module, tasks

    first, second = redis_url[:-1] + "1", redis_url[:-1] + "2"
    queues = {url: Redis.from_url(url) for url in (first, second)}
    for queue in queues.values():
        queue.flushdb()
    try:
        celery_module.use_broker(first)
        tasks.turn_submitted.delay(1)
        celery_module.use_broker(second)
        tasks.turn_submitted.delay(2)
        assert [queues[url].llen("turns") for url in (first, second)] == [1, 1]
        celery_module.use_broker(first)  # back to a broker used before: its pool still works
        tasks.turn_submitted.delay(3)
        assert [queues[url].llen("turns") for url in (first, second)] == [2, 1]
    finally:
        for queue in queues.values():
            queue.flushdb()
            queue.close()


# ---- messages no worker can read, and tasks whose arguments can never be right --------------------------------

UNREADABLE = [b"not JSON at all", b"\xff\xfe not UTF-8", b'{"body": "no envelope"}', b'"a string"', b"[1, 2]"]
FORGED = [("workers.tasks.turn_submitted", ("abc",)), ("workers.tasks.turn_submitted", (10**30,)),
          ("workers.tasks.pay_bonus", (-1,)), ("workers.tasks.publish_hit", (1, "nosuchplatform")),
          ("workers.tasks.survey_answered", (True, None))]


def refused(settings) -> list[dict]:  # noqa: ANN001
    with session_scope(settings.database_url) as s:
        return [e.data for e in s.exec(select(Event).where(Event.kind == "task_refused").order_by(Event.id))]


def test_a_message_no_worker_can_read_is_set_aside_and_a_forged_task_fails_at_once_and_the_worker_goes_on(stack):
    """One message on the turns list that was not JSON killed the Celery worker, twice; well-formed forged tasks
    were retried 20 times with back-off though they could never succeed (issue 35). Now the unreadable ones
    are set aside in Redis and logged, each forged task is refused at once, recorded once, and the worker
    goes on opening turns."""
    broker = Redis.from_url(stack.settings.redis_url)
    broker.delete(SET_ASIDE)
    worker = stack.processes["celery"]
    broker.lpush("turns", *UNREADABLE)
    crowd = Crowd(stack, conversations=2)
    for task, args in FORGED:
        crowd.producer.send_task(task, args, retry=False)
    crowd.write_round()
    wait_until(crowd.settled, timeout=SETTLE_SECONDS)  # turns queued after the unreadable ones still open
    wait_until(lambda: broker.llen(SET_ASIDE) == len(UNREADABLE) and len(refused(stack.settings)) >= len(FORGED),
               timeout=SETTLE_SECONDS)
    assert worker.poll() is None
    set_aside = [json.loads(raw) for raw in broker.lrange(SET_ASIDE, 0, -1)]
    assert sorted(entry["message"] for entry in set_aside) == sorted(
        raw.decode("utf-8", "replace") for raw in UNREADABLE) and {e["queue"] for e in set_aside} == {"turns"}
    crowd.write_round()  # a round later (a back-off retry of 2 s would have come meanwhile)
    wait_until(crowd.settled, timeout=SETTLE_SECONDS)
    recorded = refused(stack.settings)
    assert sorted((r["task"], r["arguments"]) for r in recorded) == sorted((t, repr(list(a))) for t, a in FORGED)
    assert {r["retries"] for r in recorded} == {0}
    crowd.assert_intact()


def test_the_tests_redis_server_keeps_idle_clients_as_a_deployment_does(redis_url):
    """A Celery connection idle between two uses on a busy machine must not be closed by the tests' Redis when
    a deployment's (Redis's default, timeout 0) keeps it: the suite would fail where production would not."""
    assert Redis.from_url(redis_url).config_get("timeout") == {"timeout": "0"}
