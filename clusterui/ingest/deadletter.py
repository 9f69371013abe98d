"""Messages that kept failing are set aside here, never retried forever nor dropped silently.

The list lives in the broker's Redis (the database may be what is failing) under
``clusterui:deadletter``: each entry holds the task, the reason and the envelope. The health
page shows its length; ``docs/operations.md`` says how to re-queue or drop the entries.
"""

import datetime as dt
import json
import logging

import redis
from celery import Task
from django.conf import settings

log = logging.getLogger(__name__)
KEY = "clusterui:deadletter"
RECENT_KEY = "clusterui:deadletter:recent"
RECENT_MAX = 200


def excerpt(envelope, limit: int = 2000) -> str:
    try:
        text = json.dumps(envelope, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(envelope).__name__} that cannot be shown: too deep or not JSON>"
    return text[:limit]


def client(timeout: float = 5) -> redis.Redis:
    """The broker's Redis, where the dead letters (and the ingest queue) live."""
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=timeout,
                                socket_connect_timeout=timeout)


def push(task_name: str, args, reason: str) -> None:
    entry = {
        "task": task_name,
        "failed_at": dt.datetime.now(dt.UTC).isoformat(),
        "reason": reason[:2000],
        "args": args,
    }
    try:
        payload = json.dumps(entry)
    except (TypeError, ValueError, RecursionError):
        entry["args"] = excerpt(args, 1_000_000)
        payload = json.dumps(entry)
    summary = json.dumps({"task": task_name, "failed_at": entry["failed_at"],
                          "reason": entry["reason"][:500]})
    with client().pipeline(transaction=True) as pipe:
        pipe.rpush(KEY, payload)
        # What the health page lists: the newest reasons, without reading the entries
        # themselves (each may hold a megabyte of the message).
        pipe.lpush(RECENT_KEY, summary)
        pipe.ltrim(RECENT_KEY, 0, RECENT_MAX - 1)
        pipe.execute()


def entries(limit: int = 50) -> list[dict]:
    return [json.loads(raw) for raw in client().lrange(KEY, 0, limit - 1)]


def recent(redis_client=None, limit: int = RECENT_MAX) -> list[dict]:
    """The newest messages set aside: when, which task, why (newest first)."""
    redis_client = redis_client or client()
    out = []
    for raw in redis_client.lrange(RECENT_KEY, 0, limit - 1):
        entry = json.loads(raw)
        entry["failed_at"] = dt.datetime.fromisoformat(entry["failed_at"])
        out.append(entry)
    return out


class DeadLetterOnFailure(Task):
    """A task base that sets a finally failed message aside with its reason."""

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        reason = f"{type(exc).__name__}: {exc}"
        try:
            push(self.name, list(args), reason)
            log.error("task %s %s dead-lettered after retries: %s", self.name, task_id, reason)
        except Exception:  # the broker itself is unreachable: the log is all that is left
            log.exception("task %s %s failed (%s) and could not be dead-lettered",
                          self.name, task_id, reason)
