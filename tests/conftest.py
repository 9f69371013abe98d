import pytest
import redis
from django.conf import settings
from django.db import connection

from clusterui.telemetry import partitions
from clusterui.telemetry.metrics import SAMPLE_TABLES
from tests.services import Worker


@pytest.fixture(autouse=True)
def _forget_partitions():
    """A test's partitions go with its rolled-back transaction: so must this process's
    memory of them, or the next test's first flush writes into one that is gone (the
    writer then retries, which is not what that test is about)."""
    yield
    partitions.forget_known()


def _redis(url: str) -> redis.Redis:
    client = redis.Redis.from_url(url, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"Redis is not reachable at {url} ({exc}). Start it: make services",
                    pytrace=False)
    return client


@pytest.fixture(scope="session")
def broker_url() -> str:
    return settings.CELERY_BROKER_URL


@pytest.fixture
def broker(broker_url):
    """The test broker's Redis, emptied before and after each test that uses it."""
    client = _redis(broker_url)
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def clean_samples(transactional_db):
    """Transactional tests commit data; the raw sample tables are not Django-managed, so
    empty them too (Django's flush empties the rest)."""
    yield
    with connection.cursor() as cur:
        cur.execute(f"TRUNCATE {', '.join(SAMPLE_TABLES)}")


@pytest.fixture
def worker(broker, clean_samples, broker_url):
    """One real Celery worker consuming the ingest queue for this test."""
    w = Worker(broker_url).start()
    yield w
    w.stop()


@pytest.fixture
def make_worker(broker, clean_samples, broker_url):
    """Start as many real workers as a test needs; all are stopped after it."""
    started: list[Worker] = []

    def make(**kwargs) -> Worker:
        w = Worker(broker_url, **kwargs).start()
        started.append(w)
        return w

    yield make
    for w in started:
        w.stop()
