import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.cache import cache
from django.db import connection
from django.http import JsonResponse

PROBE_TIMEOUT_S = 2


def _database() -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT 1")


def _broker() -> None:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL,
                                  socket_timeout=PROBE_TIMEOUT_S,
                                  socket_connect_timeout=PROBE_TIMEOUT_S)
    try:
        client.ping()
    finally:
        client.close()


def _cache() -> None:
    cache.get("healthz:probe")  # a round trip; a missing key is a fine answer


CHECKS = {"database": _database, "broker": _broker, "cache": _cache}


@login_not_required
def healthz(request):
    """Liveness for load balancers and monitors: each dependency's state, by name.

    200 ``{"status": "ok", "database": "ok", "broker": "ok", "cache": "ok"}``; when any is
    down, 503 with ``"status": "error"``, ``"down": [names]`` and, for each one down, the
    exception's type. No login, no data. Never mailed to the admins (``clusterui.errormail``).
    """
    body: dict = {}
    down = []
    for name, check in CHECKS.items():
        try:
            check()
            body[name] = "ok"
        except Exception as exc:  # any failure means "not healthy"; say which part and why
            body[name] = f"down: {type(exc).__name__}"
            down.append(name)
            if name == "database":
                connection.close()  # a broken connection must not outlive the outage
    if down:
        return JsonResponse({"status": "error", "down": down, **body}, status=503)
    return JsonResponse({"status": "ok", **body})
