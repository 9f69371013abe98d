"""Settings for the test suite: the real settings, with the environment the tests need.

Tests talk to real services: PostgreSQL (pytest-django creates ``test_<name>``), Redis on
its own database number so a developer's demo on db 0 is never touched, and real Celery
workers started by the tests with the same environment (``tests/conftest.py``).
"""

import os

TEST_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "test-only-secret-key",
    "STATIC_MANIFEST": "0",
    "CELERY_BROKER_URL": os.environ.get("TEST_BROKER_URL", "redis://127.0.0.1:6379/9"),
    "CACHE_URL": os.environ.get("TEST_BROKER_URL", "redis://127.0.0.1:6379/9"),
    # Short enough that a test sees a killed worker's message come back within seconds.
    "CELERY_TASK_TIME_LIMIT": "10",
    "CELERY_VISIBILITY_TIMEOUT": "12",
    "CELERY_UNACKED_RESTORE_INTERVAL": "1",
    "SESSION_COOKIE_SECURE": "0",
    "CSRF_COOKIE_SECURE": "0",
    "SECURE_HSTS_SECONDS": "0",
    "SECURE_SSL_REDIRECT": "0",
    # Most tests feed unsigned batches; the signature tests turn this on themselves.
    "INGEST_REQUIRE_SIGNATURE": "0",
    # Retries wait inside the worker: keep them under the short visibility timeout, and
    # allow enough of them to outlast the fault tests' outages.
    "INGEST_RETRY_BACKOFF_MAX": "5",
    "INGEST_MAX_RETRIES": "200",
    # A killed bulk consumer's in-flight messages come back after this many seconds.
    "INGEST_CONSUMER_TTL_S": "4",
}
for _key, _value in TEST_ENV.items():
    os.environ.setdefault(_key, _value)
# The broker and the cache live in the test Redis database (TEST_BROKER_URL), which tests
# empty (the `broker` fixture): never a demo's, whatever CELERY_BROKER_URL or CACHE_URL the
# developer's environment (or `devstack.py run`) holds.
os.environ["CELERY_BROKER_URL"] = TEST_ENV["CELERY_BROKER_URL"]
os.environ["CACHE_URL"] = TEST_ENV["CACHE_URL"]

from clusterui.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
