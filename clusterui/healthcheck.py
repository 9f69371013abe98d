"""Container health checks, one per service, run by Compose inside the service's own
container (``python -m clusterui.healthcheck web|ingest|worker|beat``): each asks the
service whether it does its work, not only whether a process exists. Exit 0 when healthy,
1 with the reason on stderr when not.

- ``web``: ``/healthz`` answers 200, asked with a Host the server accepts (the first of
  ``ALLOWED_HOSTS``; Host 127.0.0.1 is refused with 400 when it is not listed).
- ``ingest``: a bulk consumer on this host has refreshed its heartbeat in Redis within its
  time to live (each consumer does so while it takes batches, and while it waits).
- ``worker``: the Celery worker on this host answers a ping over the broker.
- ``beat PIDFILE SCHEDULE``: Celery beat's pid file names a live process and its schedule
  file was written within ``BEAT_STALE_S`` (the paths its command was given).
"""

from __future__ import annotations

import glob
import os
import socket
import sys
import time
import urllib.error
import urllib.request

BEAT_STALE_S = 600


class Unhealthy(Exception):
    pass


def _django():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterui.settings")
    import django

    django.setup()
    from django.conf import settings

    return settings


def web() -> str:
    from django.conf import settings

    port = int(os.environ.get("WEB_PORT", "8000"))
    hosts = [h for h in settings.ALLOWED_HOSTS if h not in ("*",) and not h.startswith(".")]
    host = hosts[0] if hosts else "localhost"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/healthz",
                                     headers={"Host": host, "X-Forwarded-Proto": "https"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return f"/healthz {answer.status} (Host {host})"
    except urllib.error.HTTPError as exc:
        raise Unhealthy(f"/healthz answered {exc.code} to Host {host}") from exc
    except OSError as exc:
        raise Unhealthy(f"/healthz: {exc}") from exc


def ingest() -> str:
    import redis
    from django.conf import settings

    from clusterui.ingest.queue import PREFIX

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=5)
    pattern = f"{PREFIX}:ingest:alive:{socket.gethostname()}:*"
    alive = list(client.scan_iter(match=pattern, count=1000))
    if not alive:
        raise Unhealthy(f"no ingest consumer on {socket.gethostname()} has a heartbeat")
    return f"{len(alive)} consumer(s) alive"


def worker() -> str:
    from clusterui.celery import app

    name = f"celery@{socket.gethostname()}"
    replies = app.control.ping(destination=[name], timeout=5)
    if not replies:
        raise Unhealthy(f"{name} did not answer a ping")
    return f"{name} answered"


def beat(pidfile: str = "/tmp/celerybeat.pid",
         schedule: str = "/tmp/celerybeat-schedule") -> str:
    try:
        with open(pidfile) as fh:
            pid = int(fh.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError) as exc:
        raise Unhealthy(f"beat is not running ({pidfile}: {exc})") from exc
    # The schedule is a shelve: one file, or .dat/.dir/.bak beside it, as Python's dbm has it.
    written = [os.stat(p).st_mtime for p in glob.glob(glob.escape(schedule) + "*")]
    if not written:
        raise Unhealthy(f"beat has not written its schedule {schedule}")
    age = time.time() - max(written)
    if age > BEAT_STALE_S:
        raise Unhealthy(f"beat's schedule was last written {age:.0f} s ago")
    return f"beat pid {pid}, schedule written {age:.0f} s ago"


CHECKS = {"web": web, "ingest": ingest, "worker": worker, "beat": beat}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in CHECKS or (len(argv) > 1 and argv[0] != "beat"):
        print(f"usage: python -m clusterui.healthcheck {{{','.join(CHECKS)}}}", file=sys.stderr)
        return 2
    try:
        if argv[0] != "beat":
            _django()
        print(CHECKS[argv[0]](*argv[1:]))
        return 0
    except Unhealthy as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
