"""/healthz names each dependency's state, and outages do not flood the admins with mail
(issue 14). Real PostgreSQL and Redis; "down" is a stopped private redis-server or a closed
port, never a mock."""

import logging

from django.core import mail
from django.db import connection
from django.test import Client, RequestFactory

from clusterui.errormail import NotHealthz, RateLimitedAdminEmail
from tests.services import PrivateRedis, free_port


def get(client=None):
    response = (client or Client()).get("/healthz")
    return response.status_code, response.json()


def test_healthz_is_ok_with_every_dependency_up(db, settings):
    assert get() == (200, {"status": "ok", "database": "ok", "broker": "ok", "cache": "ok"})


def test_healthz_names_the_broker_when_its_redis_is_down_and_mails_nobody(db, settings,
                                                                          tmp_path):
    settings.ADMINS = [("Admin", "admin@example.org")]
    redis = PrivateRedis(tmp_path / "redis").start()
    settings.CELERY_BROKER_URL = redis.url
    try:
        assert get()[0] == 200
        redis.stop()
        status, body = get()
    finally:
        redis.stop()
    assert status == 503
    assert body == {"status": "error", "down": ["broker"], "database": "ok",
                    "broker": "down: ConnectionError", "cache": "ok"}
    assert mail.outbox == []  # a 503 of /healthz never mails


def test_healthz_names_the_cache_when_it_is_unreachable(db, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    status, body = get()
    assert status == 503 and body["down"] == ["cache"]
    assert body["cache"] == "down: ConnectionError" and body["broker"] == "ok"


def test_healthz_names_the_database_when_it_is_unreachable(transactional_db):
    saved = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = free_port()  # nothing listens there
    try:
        status, body = get()
    finally:
        connection.close()
        connection.settings_dict["PORT"] = saved
    assert status == 503
    assert body["down"] == ["database"] and body["database"] == "down: OperationalError"
    assert (body["broker"], body["cache"]) == ("ok", "ok")
    assert get()[0] == 200  # and healthy again once it answers


def _error(logger: logging.Logger, message: str, path: str = "/nodes/7", status: int = 500):
    try:
        raise ValueError(f"broken for {path}")
    except ValueError:
        logger.error(message, path, exc_info=True,
                     extra={"status_code": status, "request": RequestFactory().get(path)})


def test_errors_are_not_mailed_by_default(db, settings):
    settings.ADMINS = [("Admin", "admin@example.org")]
    _error(logging.getLogger("django.request"), "Internal Server Error: %s")
    assert mail.outbox == []
    handlers = logging.getLogger("django").handlers
    assert not any(isinstance(h, RateLimitedAdminEmail) for h in handlers)
    assert not any(type(h).__name__ == "AdminEmailHandler" for h in handlers)


def test_error_mails_when_enabled_are_one_per_distinct_error_per_interval(db, settings, broker):
    """ERROR_EMAILS on: the handler settings.LOGGING installs, with the real cache (Redis)
    counting; a hundred occurrences of one error are one mail, without a settings dump."""
    settings.ADMINS = [("Admin", "admin@example.org")]
    settings.ERROR_EMAIL_INTERVAL_S = 600
    logger = logging.getLogger("test.errormail")
    handler = RateLimitedAdminEmail()
    handler.addFilter(NotHealthz())
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for n in range(100):
            _error(logger, "Internal Server Error: %s", path=f"/nodes/{n}")
        assert len(mail.outbox) == 1
        _error(logger, "Something else failed: %s")
        assert len(mail.outbox) == 2
        for _ in range(10):
            _error(logger, "Service Unavailable: %s", path="/healthz", status=503)
        assert len(mail.outbox) == 2
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    first = mail.outbox[0]
    assert first.subject.endswith("ERROR: Internal Server Error: /nodes/0")
    assert "ValueError: broken for /nodes/0" in first.body
    assert "SECRET_KEY" not in first.body and "INSTALLED_APPS" not in first.body
