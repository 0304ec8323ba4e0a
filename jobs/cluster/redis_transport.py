"""kombu's Redis transport, made to survive a malformed queue entry.

Anything can be pushed into a Redis list. kombu parses each entry it pops as its JSON envelope, and
an entry that is not one (`LPUSH synth 'not json'`, a bare number, an envelope without properties)
raises out of the consumer loop: Celery reports "Unrecoverable error" and the worker stops. Here
such an entry is logged and dropped — it was already popped, and no retry could make it a task —
and the worker goes on with the next. Celery itself rejects a well-formed envelope whose body it
cannot decode, or whose task it does not know; the tasks reject arguments that are not ids.

Selected by ``broker_transport`` (jobs/cluster/celery_app.py) for ``redis://`` URLs; the code follows
kombu 5.7's ``_brpop_read`` and ``_get`` (pinned in requirements.lock).
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

log = logging.getLogger(__name__)

_NOT_AN_ENVELOPE = object()


def _envelope(raw: Any, queue: str) -> Any:
    """The entry's envelope, or ``_NOT_AN_ENVELOPE`` (logged) when it is not one kombu can deliver."""
    try:
        message = loads(bytes_to_str(raw))
    except ValueError:
        message = None
    if _deliverable(message):
        return message
    log.error("dropped a malformed entry of queue %s (not a message tts-jobs sent): %.200r", queue, raw)
    return _NOT_AN_ENVELOPE


def _deliverable(message: Any) -> bool:
    if not isinstance(message, dict) or not isinstance(message.get("properties"), dict):
        return False
    properties = message["properties"]
    if "delivery_tag" not in properties:
        return False
    body = message.get("body")
    if body is not None and not isinstance(body, str):
        return False
    if body and properties.get("body_encoding") == "base64":
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return False
    return True


class Channel(kombu_redis.Channel):
    def _brpop_read(self, **options: Any) -> bool:
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                # a ConnectionError: disconnect so that the next iteration reconnects
                self.client.connection.disconnect()
                raise
            if not dest__item:
                raise kombu_redis.Empty()
            dest, item = dest__item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            message = _envelope(item, dest)
            if message is not _NOT_AN_ENVELOPE:
                self.connection._deliver(message, dest)
            return True
        finally:
            self._in_poll = None
            self._flush_brpop_reauth()

    def _get(self, queue: str) -> Any:
        with self.conn_or_acquire() as client:
            for pri in self.priority_steps:
                item = client.rpop(self._q_for_pri(queue, pri))
                if item:
                    self._maybe_update_queues_expire(client, queue)
                    message = _envelope(item, queue)
                    if message is not _NOT_AN_ENVELOPE:
                        return message
            self._maybe_update_queues_expire(client, queue)
            raise kombu_redis.Empty()


class Transport(kombu_redis.Transport):
    Channel = Channel
