"""Exactly one beat. A second ``celery beat`` (started by mistake, or kept as a standby on another machine)
sends nothing while another holds the beat lock in Redis, and takes over within ``LOCK_SECONDS`` of the
holder stopping or dying. Periodic work is thus never doubled, whatever runs beside it."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any, Optional

from celery.beat import PersistentScheduler
from redis import Redis
from redis.exceptions import LockNotOwnedError, RedisError
from redis.lock import Lock

log = logging.getLogger("turkflow.beat")

LOCK_KEY = "turkflow:beat"
LOCK_SECONDS = 30  # a dead holder's lock lapses after this long
REFRESH_SECONDS = 5  # the holder renews its lock at least this often
STANDBY_SECONDS = 5  # a standby asks for the lock this often


class SingleBeat(PersistentScheduler):
    """Celery's persistent scheduler, sending only while it holds the beat lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock: Optional[Lock] = None
        self._redis: Optional[Redis] = None
        self._standing_by = False
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self._holds_lock():
            return STANDBY_SECONDS
        return min(super().tick(*args, **kwargs), REFRESH_SECONDS)

    def close(self) -> None:
        super().close()
        if self._lock is not None:
            try:
                self._lock.release()
            except (LockNotOwnedError, RedisError):
                pass  # lapsed already, or Redis is away: it lapses on its own
            self._lock = None
        if self._redis is not None:
            self._redis.close()

    def _holds_lock(self) -> bool:
        """Take or renew the lock. Redis away: send nothing (sending fails then anyway), keep the claim, and
        renew it when Redis answers again; a lock that lapsed meanwhile is asked for like a standby does."""
        try:
            if self._lock is not None:
                self._lock.reacquire()
                return True
            if self._redis is None:
                self._redis = Redis.from_url(self.app.conf.broker_url, socket_timeout=5,
                                             socket_connect_timeout=2)
            lock = self._redis.lock(LOCK_KEY, timeout=LOCK_SECONDS, thread_local=False)
            if lock.acquire(blocking=False, token=self.token):
                self._lock = lock
                self._standing_by = False
                log.warning("beat %s holds the beat lock: it sends the periodic tasks", self.token)
                return True
            if not self._standing_by:
                holder = self._redis.get(LOCK_KEY)
                log.warning("beat %s stands by: beat %s holds the beat lock (exactly one beat sends; this one "
                            "takes over within %s s of it stopping)", self.token,
                            holder.decode() if holder else "?", LOCK_SECONDS)
                self._standing_by = True
            return False
        except LockNotOwnedError:
            log.warning("beat %s lost the beat lock (it lapsed); asking for it again", self.token)
            self._lock = None
            return False
        except RedisError as exc:
            log.warning("beat %s cannot reach Redis for the beat lock (%s); sending nothing meanwhile",
                        self.token, exc)
            return False
