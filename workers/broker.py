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

import json
import logging
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

log = logging.getLogger("turkflow.broker")

# The Redis list where messages no worker can read are set aside, newest first, for a person to look at.
SET_ASIDE = "turkflow:unreadable"


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

    def _brpop_read(self, **options: Any) -> bool:
        """kombu's read of a message a blocking pop returned, except that a message no worker can read (not
        JSON, or JSON that is no kombu message) is set aside (``SET_ASIDE``) and logged instead of raised in
        the worker's event loop: one such message on the ``turns`` list killed the worker, twice."""
        try:
            try:
                reply = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()  # the next round connects again
                raise
            if not reply:
                raise kombu_redis.Empty()
            key, raw = reply
            queue = bytes_to_str(key).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(queue)
            message = readable(raw)
            if message is None:
                self.set_aside(queue, raw)
                return False
            self.connection._deliver(message, queue)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _get(self, queue: str) -> Any:
        """kombu's synchronous read of a queue (``Queue.get``), setting aside what no worker can read."""
        message = None
        while message is None:
            raw = self._pop_one(queue)
            message = readable(raw)
            if message is None:
                self.set_aside(queue, raw)
        return message

    def _pop_one(self, queue: str) -> bytes:
        with self.conn_or_acquire() as client:
            for priority in self.priority_steps:
                raw = client.rpop(self._q_for_pri(queue, priority))
                if raw:
                    self._maybe_update_queues_expire(client, queue)
                    return raw
            self._maybe_update_queues_expire(client, queue)
            raise kombu_redis.Empty()

    def set_aside(self, queue: str, raw: bytes) -> None:
        with self.conn_or_acquire() as client:
            client.lpush(SET_ASIDE, json.dumps({"queue": queue, "message": bytes_to_str(raw)[:100_000]}))
        log.error("a message on %s that no worker can read was set aside in Redis's %s: %.200r", queue, SET_ASIDE,
                  raw)

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel was closed")
        return super()._connparams(asynchronous=asynchronous)


def readable(raw: Any) -> Optional[dict[str, Any]]:
    """A popped message as kombu delivers it, or None when it is no kombu message: not JSON (or not UTF-8), or
    JSON without the envelope every message sent through kombu has (properties with a delivery tag and
    info). What the envelope carries (the task, its arguments) is Celery's to judge."""
    try:
        message = loads(bytes_to_str(raw))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    properties = message.get("properties") if isinstance(message, dict) else None
    if (not isinstance(properties, dict) or not isinstance(properties.get("delivery_info"), dict)
            or "delivery_tag" not in properties):
        return None
    return message


class Transport(kombu_redis.Transport):
    Channel = Channel
