"""One shape for every API error: ``{"error": "<message>"}`` with the right 4xx status.

DRF's own handler decides the status (401, 403, 404, 405, 406, 415, 429, 400); this one
rewrites the body, flattening validation errors into one readable sentence such as
``from: expected an ISO 8601 time or Unix seconds, got 'yesterday'``.
"""

from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import ValidationError
from rest_framework.views import exception_handler as drf_exception_handler

from clusterui.telemetry.series import SeriesError


def flatten(detail, field: str = "") -> list[str]:
    """``{"a": ["x"], "b": {"c": ["y"]}}`` -> ``["a: x", "b.c: y"]``."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            name = "" if key in ("non_field_errors", "__all__") else str(key)
            out += flatten(value, f"{field}.{name}" if field and name else field or name)
        return out
    if isinstance(detail, list | tuple):
        return [line for item in detail for line in flatten(item, field)]
    return [f"{field}: {detail}" if field else str(detail)]


def exception_handler(exc, context):
    if isinstance(exc, SeriesError):
        exc = ValidationError(str(exc))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: Django's 500 handling and logging take it from here
    data = response.data
    if isinstance(data, dict) and set(data) == {"detail"}:
        data = data["detail"]
    response.data = {"error": "; ".join(flatten(data)) or "Bad request."}
    return response


@csrf_exempt
@login_not_required
def not_found(request, path=""):
    """Anything under /api/v1/ that no endpoint matches. A path given without its trailing
    slash (``/api/v1/jobs/7/metrics``) is served by the endpoint it names, with no redirect."""
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            return match.func(request, *match.args, **match.kwargs)
    return JsonResponse({"error": f"No API endpoint at {request.path}."}, status=404)
