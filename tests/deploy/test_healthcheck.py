"""``python -m clusterui.healthcheck``, Compose's per-service checks, run as Compose runs
them (a subprocess; exit 0 is healthy), healthy and unhealthy, against what each service
leaves behind. (Adapted from the h-deploy branch's version of this test.) The stack test
runs every check against the real services; this one covers the unhealthy cases there is
no room for there."""

import os
import re
import socket
import subprocess
import sys
import time

import redis

from clusterui.ingest.queue import ReliableQueue
from tests.services import ROOT

BROKER = os.environ.get("TEST_BROKER_URL", "redis://127.0.0.1:6379/9")


def run_check(*args, **env):
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "clusterui.settings",
               "SECRET_KEY": "healthcheck-test", "CELERY_BROKER_URL": BROKER, **env}
    return subprocess.run([sys.executable, "-m", "clusterui.healthcheck", *args], cwd=ROOT,
                          env=environ, capture_output=True, text=True, timeout=60)


def test_web_down_is_unhealthy():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket is closed
    result = run_check("web", WEB_PORT=str(port), ALLOWED_HOSTS="clusterui.example.org")
    assert result.returncode == 1 and "unhealthy: /healthz" in result.stderr


def test_ingest_is_healthy_only_while_a_consumer_on_this_host_heartbeats():
    client = redis.Redis.from_url(BROKER)
    queue = ReliableQueue(client, queue="ingest", ttl_s=5)
    client.delete(queue.alive_key)
    down = run_check("ingest")
    assert down.returncode == 1 and "no ingest consumer" in down.stderr
    queue.heartbeat()
    try:
        assert run_check("ingest").returncode == 0
    finally:
        client.delete(queue.alive_key)
    assert run_check("ingest").returncode == 1


def test_beat_needs_a_live_process_and_a_recently_written_schedule(tmp_path):
    pidfile, schedule = tmp_path / "beat.pid", tmp_path / "celerybeat-schedule"
    missing = run_check("beat", str(pidfile), str(schedule))
    assert missing.returncode == 1 and "beat is not running" in missing.stderr
    pidfile.write_text(f"{os.getpid()}\n")  # a live process
    unwritten = run_check("beat", str(pidfile), str(schedule))
    assert unwritten.returncode == 1 and "has not written its schedule" in unwritten.stderr
    (tmp_path / "celerybeat-schedule.dat").write_bytes(b"")  # dbm.dumb's files
    assert run_check("beat", str(pidfile), str(schedule)).returncode == 0
    old = time.time() - 3600
    os.utime(tmp_path / "celerybeat-schedule.dat", (old, old))
    stale = run_check("beat", str(pidfile), str(schedule))
    assert stale.returncode == 1 and re.search(r"last written 36\d\d s ago", stale.stderr)
    pidfile.write_text("999999999\n")  # no such process
    assert run_check("beat", str(pidfile), str(schedule)).returncode == 1
