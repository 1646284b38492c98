"""Exactly one beat: a second `celery beat` started by mistake sends none of the periodic tasks while the
first runs, and takes over when the first stops, against the real Redis."""

from __future__ import annotations

import json
import time

from redis import Redis

import turkflow.workers.app
from turkflow.workers.beat import LOCK_KEY, SingleBeat


def sent(broker: Redis) -> list[str]:
    return [json.loads(raw)["headers"]["task"] for raw in broker.lrange("sweeps", 0, -1)]


def beat(app, tmp_path, name: str) -> SingleBeat:  # noqa: ANN001
    return SingleBeat(app=app, schedule_filename=str(tmp_path / f"{name}-schedule"), lazy=False)


def test_a_second_beat_sends_nothing_until_the_first_stops(settings, providers, redis_url, tmp_path):
    app = turkflow.workers.app.configure(settings, providers)
    app.conf.beat_schedule = {"reconcile": {"task": "workers.tasks.reconcile", "schedule": 0.2}}
    broker = Redis.from_url(redis_url)
    broker.flushdb()
    first, second = beat(app, tmp_path, "first"), beat(app, tmp_path, "second")
    try:
        first.tick()  # takes the lock (and sends the reconciler if it is due already, on a slow machine)
        assert broker.get(LOCK_KEY).decode() == first.token
        before = sent(broker)
        time.sleep(0.3)  # the reconciler is due again, for both
        second.tick()
        assert sent(broker) == before  # the second stands by
        assert first.tick() == 0  # a tick sends one due task (and asks to be called again at once)
        assert sent(broker) == [*before, "workers.tasks.reconcile"]
        first.close()  # the first beat stops: its lock goes with it
        assert second.tick() == 0  # due since it started
        assert broker.get(LOCK_KEY).decode() == second.token
        assert sent(broker) == [*before, "workers.tasks.reconcile", "workers.tasks.reconcile"]
    finally:
        first.close()
        second.close()
        broker.flushdb()
        broker.close()
