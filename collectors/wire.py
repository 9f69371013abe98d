"""The ``clusterui.ingest(batch)`` call as bytes on the broker's Redis list, without Celery.

Contract 1 is a Celery task call. kombu's Redis transport stores each published message as
one JSON item ``LPUSH``-ed onto the list named after the queue; a Celery worker ``BRPOP``-s
it from the other end, and the server's bulk consumer (``clusterui.ingest.messages``) reads
the same items. This module writes that item exactly as Celery 5 (message protocol 2) with
kombu's Redis transport does: headers naming the task, properties with a delivery tag, and
the body ``[args, kwargs, embed]`` as base64-encoded JSON. ``tests/collectors/
test_redis_sender.py`` holds it to the item that Celery itself publishes, and the pipeline
tests have real Celery workers and the real bulk consumer store what this sends.

Why not Celery: a GPU node would carry Celery, kombu and their dependencies only to build
this one JSON object; ``redis`` alone is enough to push it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import uuid

TASK_NAME = "clusterui.ingest"
# Celery's canvas fields in the body's third element: no callbacks, no chain, no chord.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def task_message(batch: dict, queue: str, *, task_id: str | None = None,
                 about: dict | None = None) -> bytes:
    """The queue item for ``clusterui.ingest(batch)`` routed to ``queue`` (JSON, UTF-8).
    ``batch`` is the task's argument (an envelope, or a sealed one: ``signing.seal``);
    ``about``, the envelope it carries, names the call in logs (default: ``batch``)."""
    task_id = task_id or str(uuid.uuid4())
    body = json.dumps([[batch], {}, _EMBED]).encode("utf-8")
    about = batch if about is None else about
    agent = about.get("agent") if isinstance(about.get("agent"), dict) else {}
    message = {
        "body": base64.b64encode(body).decode("ascii"),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py",
            "task": TASK_NAME,
            "id": task_id,
            "shadow": None,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": task_id,
            "parent_id": None,
            # What Flower and worker logs show for the call: the batch's identity, not its
            # (possibly megabytes of) samples.
            "argsrepr": f"[<batch node={about.get('node')!r} seq={agent.get('seq')!r}>]",
            "kwargsrepr": "{}",
            "origin": f"clusterui-collector{os.getpid()}@{socket.gethostname()}",
            "ignore_result": True,
            "replaced_task_nesting": 0,
            "stamped_headers": None,
            "stamps": {},
        },
        "properties": {
            "correlation_id": task_id,
            "delivery_mode": 2,  # persistent
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    return json.dumps(message).encode("utf-8")
