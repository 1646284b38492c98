"""The Celery app. Its configuration comes from turkflow's ``Settings`` when first needed (never at import),
from the first web app's settings in a process that serves one (``use_settings``), or from
``configure(settings)`` when a process (a test, the simulator) brings its own.

Run it with ``celery -A turkflow.workers.app worker`` (every queue) or one worker per queue (``--queues turns``, as
the Procfile does), and exactly one ``celery -A turkflow.workers.app beat``.
"""

from __future__ import annotations

import hashlib
import logging
from functools import lru_cache
from typing import Any, Optional

from celery import Celery
from celery.schedules import crontab
from celery.signals import celeryd_after_setup, worker_process_init
from kombu import Queue
from redis import Redis

from turkflow.config import Settings
from turkflow.hits import registry
from turkflow.hits.provider import Providers

celery_app = Celery("turkflow",
                    include=["turkflow.workers.tasks", "turkflow.workers.mturk_tasks", "turkflow.workers.prolific_tasks"])

# Queues by workload: a worker per queue (Procfile) keeps a turn opening from waiting behind spaCy reviews,
# slow platform calls or a sweep. A worker without --queues takes them all.
QUEUES = {
    "turns": "open the next turn after a submission: workers wait for it",
    "reviews": "the quality monitor and the content checks (spaCy)",
    "platform": "crowd platform calls: publishing, approvals, bonuses",
    "sweeps": "beat's periodic work: reconcilers, pollers, the daily review, dashboard numbers",
    "agents": "agents' turns (turkflow.agents): a slow model waits here, never in front of people's turns",
}
REVIEWS = "reviews"
AGENTS = "agents"
ROUTES = {  # every task, by its stable name
    "workers.tasks.turn_submitted": "turns",
    "workers.tasks.review_submission": REVIEWS,
    "workers.tasks.survey_answered": REVIEWS,
    "workers.tasks.publish_hit": "platform",
    "workers.tasks.pay_bonus": "platform",
    "workers.mturk_tasks.approve_assignment": "platform",
    "workers.mturk_tasks.expire_hit": "platform",
    "workers.prolific_tasks.settle_bonus": "platform",
    "workers.prolific_tasks.turn_taken": "platform",
    "workers.tasks.reconcile": "sweeps",
    "workers.tasks.daily_review": "sweeps",
    "workers.tasks.refresh_activity": "sweeps",
    "workers.mturk_tasks.reconcile_mturk": "sweeps",
    "workers.prolific_tasks.poll_prolific": "sweeps",
    "workers.tasks.answer_agent_turn": AGENTS,
    "workers.tasks.sweep_agent_turns": "sweeps",
}

_settings: Optional[Settings] = None
_providers: Optional[Providers] = None


def _every(task: str, seconds: int) -> dict[str, Any]:
    """A periodic task that expires when its next one is due: while no worker consumes (Redis or the worker
    down), beat's copies replace each other instead of piling up for the worker to run back to back."""
    return {"task": task, "schedule": float(seconds), "options": {"expires": float(seconds)}}


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.redis_url,
        # kombu's Redis transport, with the fix that keeps a worker alive when Redis stops (workers/broker.py).
        "broker_transport": "turkflow.workers.broker:Transport",
        "task_ignore_result": True,
        # A task is acknowledged only after it ran, and re-queued if its worker dies mid-way: every
        # task is idempotent, so running twice is safe and losing one is not.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # The worker waits out a Redis outage of any length (reconnecting forever, at most 30 s apart), while
        # a sender (a web request, beat) gives up within about a second: its turn is stored already, and the
        # reconciler does what the lost message would have done.
        "broker_connection_retry_on_startup": True,
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,
        "broker_transport_options": {"visibility_timeout": 600, "socket_timeout": 10, "socket_connect_timeout": 2,
                                     "health_check_interval": 10, "max_retries": 1, "interval_start": 0,
                                     "interval_step": 0.5, "interval_max": 0.5},
        "task_publish_retry_policy": {"max_retries": 1, "interval_start": 0, "interval_step": 0.5,
                                      "interval_max": 0.5},
        # A task running when the connection drops finishes (its work is committed; its ack fails and Redis
        # redelivers it later, which an idempotent task shrugs off) rather than being killed half-way.
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "task_queues": [Queue(name) for name in QUEUES],
        "task_routes": {task: {"queue": queue} for task, queue in ROUTES.items()},
        "task_default_queue": "platform",
        "beat_scheduler": "turkflow.workers.beat:SingleBeat",  # exactly one beat sends, however many run
        "beat_max_loop_interval": 5,
        "beat_schedule": {
            "reconcile": _every("workers.tasks.reconcile", settings.reconcile_seconds),
            "reconcile-mturk": _every("workers.mturk_tasks.reconcile_mturk", settings.mturk_reconcile_seconds),
            "poll-prolific": _every("workers.prolific_tasks.poll_prolific", settings.prolific_poll_seconds),
            "daily-review": {"task": "workers.tasks.daily_review",
                             "schedule": crontab(minute=0, hour=settings.review_hour),
                             "options": {"expires": 3600.0}},
            "refresh-activity": _every("workers.tasks.refresh_activity", settings.stats_seconds),
            "sweep-agents": _every("workers.tasks.sweep_agent_turns", settings.agent_sweep_seconds),
        },
    }


def configure(settings: Settings, providers: Optional[Providers] = None) -> Celery:
    global _settings, _providers
    _settings = settings
    _providers = providers or registry.providers(settings)
    use_broker(settings.redis_url)
    celery_app.conf.update(celery_config(settings))
    return celery_app


def use_settings(settings: Settings) -> None:
    """Queue this process's tasks as ``settings`` say: the web app's own settings. Celery configures itself
    from the first app's settings rather than from the environment, which the app may not have been given
    (and whose ``Settings()`` would store secrets of its own in ./var); tasks go to each app's Redis."""
    global _settings
    if _settings is None:
        _settings = settings
    use_broker(settings.redis_url)


def use_broker(redis_url: str) -> None:
    """Send this process's tasks to ``redis_url``: the web app's own settings, not the environment's.

    The app keeps its broker connections (and producers) for its whole life, so a process whose broker
    changed after its first task (the app factory after an import-time default, one test after another)
    kept sending to the broker it first used, where no worker listened. The app forgets them on a change,
    and its next task looks up the pool of the new address. The old pools stay open in kombu's registry,
    keyed by address: closing one there handed a closed pool ("Acquire on closed pool") to the next app
    that came back to that address.
    """
    if celery_app.conf.broker_url == redis_url:
        return
    celery_app.conf.broker_url = redis_url
    celery_app._pool = None
    amqp = celery_app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


def broker_redis() -> Redis:
    """A client of the broker's Redis, for the marks tasks leave there (``tasks.queue_review``); it gives up as
    a sender does when Redis is away."""
    return _redis(settings().redis_url)


@lru_cache(maxsize=8)
def _redis(url: str) -> Redis:
    return Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)


def review_mark() -> str:
    """The key that says a review is queued, one per database (two deployments may share a Redis)."""
    return "turkflow:review-queued:" + hashlib.sha256(settings().database_url.encode()).hexdigest()[:16]


def settings() -> Settings:
    global _settings
    if _settings is None:
        _settings = Settings()
    return _settings


def providers() -> Providers:
    global _providers
    if _providers is None:
        _providers = registry.providers(settings())
    return _providers


@celery_app.on_configure.connect
def _configure_from_environment(sender: Celery, **_: Any) -> None:
    sender.conf.update(celery_config(settings()))


_reviews_here = True  # until the worker says which queues it takes (a worker without --queues takes all)


@celeryd_after_setup.connect
def _note_queues(sender: str, instance: Any, **_: Any) -> None:
    """Note whether this worker reviews (its processes load spaCy as they start), and in a worker of the agents
    queue load the agents' client libraries now, before a pool forks or a thread asks an agent."""
    global _reviews_here
    _reviews_here = REVIEWS in instance.app.amqp.queues.consume_from
    if AGENTS in instance.app.amqp.queues.consume_from:
        from turkflow.agents import registry as agents

        agents.load_kinds()


@worker_process_init.connect
def load_language_model(**_: Any) -> None:
    """Load the content checks' spaCy pipeline as a worker process that takes reviews starts, rather than
    in its first task: loading takes seconds, and the first reviews after every restart would wait that
    long. A worker of the other queues never needs it."""
    if not _reviews_here:
        return
    from turkflow.quality import checks

    try:
        checks.english(settings().spacy_model)
    except checks.ModelMissing as missing:
        logging.getLogger("turkflow.tasks").warning("%s; reviews wait until it is installed", missing)
