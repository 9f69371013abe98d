"""Error emails to the admins that an outage cannot turn into a flood (issue 14).

Django's ``AdminEmailHandler`` mails every logged error: every 500, and every 503 that
/healthz answers while a dependency is down (a load balancer polls it), each with the
request and a settings dump. ``settings.LOGGING`` uses this handler instead, and only when
``ERROR_EMAILS`` is on: one short mail (the log line and its traceback) per distinct error
per ``ERROR_EMAIL_INTERVAL_S``, counted in the shared cache so that all web processes
share the budget. When the cache is down too, a per-process count takes its place.
"""

import hashlib
import logging
import time

from django.conf import settings

_local: dict[str, float] = {}  # fallback when the cache is unreachable


def error_key(record: logging.LogRecord) -> str:
    """What makes two errors "the same": logger, place in the code, exception type, the
    message's template (not its arguments: a path or an id differs every time)."""
    exc = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
    where = f"{record.name}|{record.pathname}:{record.lineno}|{exc}|{record.msg}"
    return "errormail:" + hashlib.sha1(where.encode("utf-8", "replace")).hexdigest()


def first_in_interval(key: str, interval_s: int) -> bool:
    """True once per ``interval_s`` for ``key``."""
    try:
        from django.core.cache import cache

        return bool(cache.add(key, 1, timeout=interval_s))
    except Exception:  # noqa: BLE001 - the cache is down (maybe the very error reported)
        now = time.monotonic()
        if now - _local.get(key, -interval_s - 1) < interval_s:
            return False
        _local[key] = now
        return True


class NotHealthz(logging.Filter):
    """Drop /healthz's 503 responses: the body already names what is down."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        path = getattr(request, "path", "") or ""
        return not (getattr(record, "status_code", None) == 503 and path.rstrip("/")
                    .endswith("/healthz"))


class RateLimitedAdminEmail(logging.Handler):
    """Mail the admins one short message per distinct error per interval."""

    def emit(self, record: logging.LogRecord) -> None:
        if not settings.ADMINS:
            return
        if not first_in_interval(error_key(record), settings.ERROR_EMAIL_INTERVAL_S):
            return
        try:
            from django.core.mail import mail_admins

            subject = f"{record.levelname}: {record.getMessage()}"
            subject = " ".join(subject.split())[:200]
            body = (self.format(record) + "\n\n(Further occurrences of this error are not "
                    f"mailed for {settings.ERROR_EMAIL_INTERVAL_S} s; see the log.)")
            mail_admins(subject, body, fail_silently=True)
        except Exception:  # noqa: BLE001 - a logging handler must never raise
            self.handleError(record)
