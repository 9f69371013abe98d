from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse


@login_not_required
def healthz(request):
    """Liveness for load balancers: the database answers. No login, no data."""
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return JsonResponse({"status": "ok"})
    except Exception as exc:  # any failure means "not healthy"; say which part
        return JsonResponse({"status": "error", "database": type(exc).__name__}, status=503)
