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

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(kombu_redis.Channel):
    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel was closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel
