"""Redis as a boundary: the ACL that `deploy/redis/start-redis.sh` writes (and Compose runs)
lets a GPU node's credentials queue batches and nothing else.

The shipped script starts a real redis-server of the test's own; the real collector sender
publishes through the collector user; the real bulk consumer takes the batch through the
server's user and stores it. Whatever else the collector user tries is refused by Redis.
"""

import os
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
import yaml

from clusterui.ingest.consumer import Consumer
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.queue import ReliableQueue
from collectors.transport import RedisSender
from tests.factories import node_batch
from tests.services import ROOT, free_port, wait_for

SCRIPT = ROOT / "deploy" / "redis" / "start-redis.sh"
# Characters that break an interpolated URL, and a space: the ACL stores hashes.
SERVER_PASSWORD = "s3rv:er@/#pw"
COLLECTOR_PASSWORD = "coll ector#1"


@pytest.fixture
def acl_redis(tmp_path):
    port = free_port()
    env = {**os.environ, "REDIS_PASSWORD": SERVER_PASSWORD,
           "REDIS_COLLECTOR_PASSWORD_FILE": str(tmp_path / "collector-password"),
           "REDIS_ACL_FILE": str(tmp_path / "users.acl")}
    (tmp_path / "collector-password").write_text(COLLECTOR_PASSWORD + "\n")
    proc = subprocess.Popen(
        ["sh", str(SCRIPT), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--dir", str(tmp_path)],
        env=env, stdout=open(tmp_path / "redis.log", "w"), stderr=subprocess.STDOUT)
    server = redis.Redis(port=port, password=SERVER_PASSWORD, socket_connect_timeout=1)

    def up():
        try:
            return server.ping()
        except redis.exceptions.ConnectionError:
            return False

    try:
        wait_for(up, timeout=20, what="the ACL redis-server")
        yield port, server, tmp_path
    finally:
        proc.terminate()
        proc.wait(20)


def collector_url(port: int) -> str:
    return f"redis://collector:{quote(COLLECTOR_PASSWORD, safe='')}@127.0.0.1:{port}/0"


@pytest.mark.django_db(transaction=True)
def test_a_collector_can_queue_a_batch_that_the_server_stores(acl_redis, clean_samples):
    port, server, _ = acl_redis
    sender = RedisSender(collector_url(port))
    try:
        sender.send(node_batch(node="gpu-acl", seq=1, samples=3))
    finally:
        sender.close()
    consumer = Consumer(queue=ReliableQueue(server, "ingest", ttl_s=60))
    items = consumer.queue.take(10, block_s=0)
    result = consumer.flush(items)
    consumer.queue.ack()
    assert (result.stored, result.refused, result.dead_lettered) == (1, 0, 0)
    assert IngestBatch.objects.get(node__name="gpu-acl").gpu_samples == 3 * 8


@pytest.mark.parametrize("command", [
    ("RPOP", "ingest"),                             # take someone else's batch
    ("LRANGE", "ingest", "0", "-1"),                # read the queue
    ("DEL", "ingest"),                              # drop the queue
    ("LPUSH", "ingest:suspect", "x"),               # another list
    ("LPUSH", "clusterui:deadletter", "x"),
    ("SET", ":1:login-fail:alice", "0"),            # the sign-in rate limiter's counters
    ("SELECT", "1"),                                # the cache's database
    ("EVAL", "return redis.call('DEL','ingest')", "0"),
    ("FLUSHALL",),
    ("KEYS", "*"),
    ("CONFIG", "GET", "*"),
    ("ACL", "LIST"),
    ("SREM", "_kombu.binding.ingest", "x"),
])
def test_the_collector_user_can_do_nothing_else(acl_redis, command):
    port, server, _ = acl_redis
    server.lpush("ingest", "a batch of another node")
    collector = redis.Redis.from_url(collector_url(port))
    with pytest.raises(redis.exceptions.NoPermissionError):
        collector.execute_command(*command)
    assert server.lrange("ingest", 0, -1) == [b"a batch of another node"]


def test_passwords_are_stored_hashed_and_a_missing_one_stops_the_script(acl_redis, tmp_path):
    _, _, directory = acl_redis
    acl = (directory / "users.acl").read_text()
    assert SERVER_PASSWORD not in acl and COLLECTOR_PASSWORD not in acl
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIS_")}
    env["REDIS_PASSWORD"] = "x"
    done = subprocess.run(["sh", str(SCRIPT), "--port", str(free_port())], env=env,
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 2
    assert "REDIS_COLLECTOR_PASSWORD" in done.stderr


def test_compose_runs_the_script_and_gives_collectors_only_the_collector_user():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    redis_service = services["redis"]
    assert "start-redis.sh" in " ".join(redis_service["command"])
    assert any(str(v).startswith("./deploy/redis") for v in redis_service["volumes"])
    # The simulated collector (the pattern for real ones) speaks as the collector user.
    sim = services["simcollector"]
    assert sim["environment"]["DEMO_BROKER"].startswith("redis://collector@")
    assert "redis_collector_password" in sim["secrets"]
    assert "redis_password" not in sim["secrets"]
    # The server's cache (sign-in counters) is a database the collector user cannot select.
    app_env = compose["x-app"]["environment"]
    assert app_env["CACHE_URL"].endswith("/1")
    # The passwords are secret files, never in .env.
    assert "PASSWORD" not in Path(ROOT / ".env.example").read_text()
    assert compose["secrets"]["redis_collector_password"]["file"].startswith("./deploy/secrets/")
