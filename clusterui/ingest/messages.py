"""Reading the Celery messages that collectors publish, without Celery's per-message machinery.

A collector calls ``clusterui.ingest(batch)`` through Celery (contract 1), and kombu's Redis
transport stores each call as one JSON item on the ``ingest`` list: the task's name in the
headers and, with Celery's message protocol 2, the body ``[args, kwargs, embed]`` encoded as
base64 JSON. The bulk consumer pops those items itself and decodes them here.
"""

import base64
import binascii

import orjson

from clusterui.ingest.tasks import INGEST_TASK


class NotIngestMessage(ValueError):
    """An item that is not a ``clusterui.ingest`` call: set aside with this reason."""


def envelope_of(raw: bytes) -> dict | object:
    """The batch envelope carried by one queue item (any JSON value: validation judges it).

    Raises ``NotIngestMessage`` when the item is not a Celery message calling
    ``clusterui.ingest`` with one argument.
    """
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise NotIngestMessage(f"not a Celery message: not JSON ({exc})") from None
    if not isinstance(message, dict) or not isinstance(message.get("headers"), dict):
        raise NotIngestMessage("not a Celery message: no headers")
    task = message["headers"].get("task")
    if task != INGEST_TASK:
        raise NotIngestMessage(f"task {str(task)[:80]!r} on the ingest queue; only "
                               f"{INGEST_TASK} belongs there")
    if message.get("content-type") != "application/json":
        raise NotIngestMessage(f"content type {str(message.get('content-type'))[:40]!r}: "
                               "only JSON is accepted")
    body = message.get("body")
    properties = message.get("properties")
    if isinstance(properties, dict) and properties.get("body_encoding") == "base64":
        try:
            body = base64.b64decode(body, validate=True)
        except (TypeError, ValueError, binascii.Error):
            raise NotIngestMessage("body is not valid base64") from None
    try:
        payload = orjson.loads(body) if isinstance(body, bytes | str) else body
    except orjson.JSONDecodeError as exc:
        raise NotIngestMessage(f"body is not JSON ({exc})") from None
    # Protocol 2: [args, kwargs, embed]; protocol 1: {"args": [...], ...}.
    if isinstance(payload, list) and payload and isinstance(payload[0], list):
        args = payload[0]
    elif isinstance(payload, dict) and isinstance(payload.get("args"), list):
        args = payload["args"]
    else:
        raise NotIngestMessage("body carries no argument list")
    if len(args) != 1:
        raise NotIngestMessage(f"{INGEST_TASK} takes one argument (the batch), got {len(args)}")
    return args[0]


def excerpt(raw: bytes, limit: int = 2000) -> str:
    return raw[:limit].decode("utf-8", "backslashreplace")
