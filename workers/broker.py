"""The Redis transport, with a channel that reports a closed connection as a connection error.

When Redis goes away, Celery 5.7's worker ``collect()``s the broken connection (which detaches it from its
transport) and then closes it. Closing a channel puts its unacknowledged messages back; a task that
finishes afterwards acknowledges through the same channel. Both need a new Redis connection pool, and
kombu 5.7 builds it from the detached connection: ``AttributeError: 'NoneType' object has no attribute
'hostname'``, which no one catches, so the worker dies ("Unrecoverable error"; celery/celery#10205 and
#10302 are the reports of the same teardown path). Raised as a connection error instead, it is what Celery
expects and handles: the ack is logged as impossible (the message stays in Redis and is redelivered after
the visibility timeout), the restore is skipped, and the worker reconnects.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from kombu.transport import redis as kombu_redis
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    _publisher: Optional[Redis] = None

    @contextmanager
    def conn_or_acquire(self, client: Optional[Redis] = None) -> Iterator[Redis]:
        """One client on the channel's pool for every message sent, where kombu builds a new one a message:
        building a redis-py client (its table of 170 reply parsers) was a third of queueing a task. A client
        takes a pooled connection per command, so threads may share it; a new pool gets a new client."""
        if client is not None:
            yield client
            return
        pool = self.pool
        if self._publisher is None or self._publisher.connection_pool is not pool:
            self._publisher = self._create_client()
        yield self._publisher

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel was closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
