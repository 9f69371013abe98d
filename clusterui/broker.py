"""Celery's Redis transport with one guard kombu lacks: an item that is not a message.

kombu's Redis channel pops each item of a queue list and decodes it as a kombu message (a
JSON object with its properties and body) before Celery or any task sees it. An item that
is not one (pushed by hand onto the list, cut short, written by something else) raises out
of the worker's event loop, and Celery stops the whole worker ("Unrecoverable error:
JSONDecodeError"); its prefetched tasks then wait out the visibility timeout. Here such an
item is set aside in the dead-letter list with its reason (``ingest.deadletter``, which the
staff health page shows) and the worker carries on. Everything that *is* a message goes on
to Celery unchanged, whose own checks refuse a bad body or unknown task.

``CELERY_BROKER_TRANSPORT`` (settings) selects it for ``redis://`` broker URLs. The bulk
ingest consumer reads the list itself and has the same guard (``ingest.messages``).
"""

import binascii
import json
import logging
from queue import Empty

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str

log = logging.getLogger(__name__)


def not_a_message(payload) -> str | None:
    """Why this decoded item cannot be a kombu message (None when it can be)."""
    if not isinstance(payload, dict):
        return f"not a message: a JSON {type(payload).__name__}, not an object"
    properties = payload.get("properties")
    if not isinstance(properties, dict) or "delivery_tag" not in properties:
        return "not a message: no properties with a delivery tag"
    if not isinstance(properties.get("delivery_info"), dict):
        return "not a message: no delivery_info in its properties"
    body = payload.get("body")
    if body is not None and not isinstance(body, str):
        return f"not a message: its body is a JSON {type(body).__name__}, not a string"
    return None


def _set_aside(raw, reason: str, queue: str | None) -> None:
    from clusterui.ingest import deadletter

    where = f"queue {queue!r}" if queue else "a queue"
    log.error("an item of %s was set aside (dead letter): %s", where, reason)
    text = bytes_to_str(raw) if isinstance(raw, bytes | str) else json.dumps(raw)
    try:
        deadletter.push(f"(an item of {where})", [text[:1_000_000]], reason)
    except Exception:  # noqa: BLE001 - the worker must go on even if this cannot be kept
        log.exception("the item could not be kept in the dead-letter list")


class Channel(kombu_redis.Channel):
    def _brpop_read(self, **options):
        try:
            return super()._brpop_read(**options)
        except json.JSONDecodeError as exc:
            # kombu popped it and failed to decode it: the exception holds the text.
            _set_aside(exc.doc, f"not a message: not JSON ({exc.msg})", None)
            return False

    def _get(self, queue):
        try:
            return super()._get(queue)
        except json.JSONDecodeError as exc:
            _set_aside(exc.doc, f"not a message: not JSON ({exc.msg})", queue)
            raise Empty() from None


class Transport(kombu_redis.Transport):
    Channel = Channel

    def _deliver(self, message, queue):
        reason = not_a_message(message)
        if reason is not None:
            _set_aside(message, reason, queue)
            return
        try:
            super()._deliver(message, queue)
        except binascii.Error as exc:
            # kombu decodes the body first, before the message is registered or handed on:
            # nothing else has happened to it yet.
            _set_aside(message, f"not a message: its body is not base64 ({exc})", queue)
