"""Passwords with characters that mean something in a URL (@ : / # ? %) reach PostgreSQL,
Redis and Celery whole: they are given apart from the URL (DATABASE_PASSWORD,
REDIS_PASSWORD or their _FILE) and put in percent-encoded. Compose used to interpolate them
into the URLs, where a generated password broke them."""

import shutil
import socket
import subprocess
import time

import dj_database_url
import pytest
import redis
from kombu.utils.url import url_to_parts

from clusterui.envconfig import env_database, env_url, with_password

HOSTILE = "p@ss:w/rd#1?x=%41&y"


def test_every_client_reads_back_the_password_as_given(tmp_path):
    db = with_password("postgres://clusterui@postgres:5432/clusterui", HOSTILE)
    assert dj_database_url.parse(db)["PASSWORD"] == HOSTILE
    assert dj_database_url.parse(db)["HOST"] == "postgres"
    broker = with_password("redis://redis:6379/0", HOSTILE)
    assert url_to_parts(broker).password == HOSTILE and url_to_parts(broker).hostname == "redis"
    assert redis.connection.parse_url(broker)["password"] == HOSTILE
    # From a file, as Compose secrets give it; the URL itself holds none.
    (tmp_path / "pw").write_text(HOSTILE + "\n")
    env = {"DATABASE_URL": "postgres://clusterui@postgres:5432/clusterui",
           "DATABASE_PASSWORD_FILE": str(tmp_path / "pw")}
    assert env_database("DATABASE_URL", "", password="DATABASE_PASSWORD",
                        environ=env)["PASSWORD"] == HOSTILE
    assert env_url("CACHE_URL", "redis://redis:6379/1", password="REDIS_PASSWORD",
                   environ={}) == "redis://redis:6379/1"


def test_a_real_redis_accepts_the_password_through_the_url(tmp_path):
    server = shutil.which("redis-server")
    assert server, "redis-server is needed (apt-get install redis-server)"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path),
                             "--requirepass", HOSTILE], stdout=subprocess.DEVNULL)
    try:
        url = with_password(f"redis://127.0.0.1:{port}/0", HOSTILE)
        for _ in range(100):
            try:
                assert redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("the private redis-server did not start")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(f"redis://:wrong@127.0.0.1:{port}/0").ping()
    finally:
        proc.terminate()
        proc.wait(10)
