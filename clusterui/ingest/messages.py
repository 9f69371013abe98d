"""Reading the Celery messages that collectors publish, without Celery's per-message machinery.

A collector calls ``clusterui.ingest(batch)`` through Celery (contract 1), and kombu's Redis
transport stores each call as one JSON item on the ``ingest`` list: the task's name in the
headers and, with Celery's message protocol 2, the body ``[args, kwargs, embed]`` encoded as
base64 JSON. The bulk consumer pops those items itself and decodes them here.
"""

import binascii
import json

import orjson
import pybase64
from django.conf import settings

from clusterui.ingest.tasks import INGEST_TASK


class NotIngestMessage(ValueError):
    """An item that is not a ``clusterui.ingest`` call: set aside with this reason."""


def loads(data: bytes | memoryview | str, *, exact: bool = False):
    """JSON as a producer may write it, whatever is inside.

    orjson first (fast). What it refuses or cannot hold exactly is read again by Python's
    parser, which keeps what validation must see to refuse one item and keep the rest:
    ``NaN``, ``Infinity`` and ``1e400`` become non-finite floats, integers of any size stay
    exact (orjson reads 2**64 as a float, which also breaks the signature's canonical form;
    ``exact=True`` reads with Python's parser straight away), a lone surrogate escape stays
    in its string and bytes that are not UTF-8 are kept as surrogates (both then fail the
    UTF-8 check of the string they are in). Raises ``ValueError`` with the reason when
    the text is not JSON at all, or nested deeper than a parser can follow.
    """
    if not exact:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    if isinstance(data, memoryview):  # a member of a larger text (``typed_decode``)
        data = data.tobytes()
    text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested deeper than the parser can follow") from None
    except ValueError as exc:  # JSONDecodeError, and an integer of over 4,300 digits
        raise ValueError(str(exc)[:200]) from None


def envelope_of(raw: bytes, *, exact: bool = False) -> dict | object:
    """The batch envelope carried by one queue item (any JSON value: validation judges it).

    Raises ``NotIngestMessage`` when the item is larger than ``INGEST_MAX_MESSAGE_BYTES``
    (checked before any parsing) or is not a Celery message calling ``clusterui.ingest``
    with one argument.
    """
    limit = settings.INGEST_MAX_MESSAGE_BYTES
    if len(raw) > limit:
        raise NotIngestMessage(f"message of {len(raw):,} bytes is larger than "
                               f"INGEST_MAX_MESSAGE_BYTES ({limit:,}); not parsed")
    try:
        message = loads(raw)
    except ValueError as exc:
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
            body = pybase64.b64decode(body, validate=True)
        except (TypeError, ValueError, binascii.Error):
            raise NotIngestMessage("body is not valid base64") from None
    try:
        payload = loads(body, exact=exact) if isinstance(body, bytes | str) else body
    except ValueError as exc:
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


def verified_envelope(raw: bytes, envelope, check) -> tuple[object, str | None]:
    """``check(envelope)`` (the version 1 signature check: version 2 signs the bytes sent,
    ``auth.open_batch``); when the signature does not match, read the message again with
    the exact parser and check that: orjson reads an integer of 2**64 or more as a float,
    whose canonical form differs from what was signed."""
    refusal = check(envelope) if isinstance(envelope, dict) else None
    if refusal is None or "does not match" not in refusal:
        return envelope, refusal
    try:
        exact = envelope_of(raw, exact=True)
    except NotIngestMessage:
        return envelope, refusal
    if isinstance(exact, dict) and check(exact) is None:
        return exact, None
    return envelope, refusal
