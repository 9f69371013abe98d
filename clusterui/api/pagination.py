"""Limit/offset pagination that refuses bad values instead of silently ignoring them."""

from rest_framework import pagination
from rest_framework.exceptions import ValidationError

MAX_LIMIT = 1000
MAX_OFFSET = 10**9


def _int_param(request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise ValidationError({name: f"must be an integer from {lo} to {hi}, got {raw!r}"})
    return value


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """``?limit=&offset=``; the answer carries ``count``, ``next``, ``previous``, ``results``."""

    max_limit = MAX_LIMIT

    def get_limit(self, request):
        return _int_param(request, self.limit_query_param, self.default_limit, 1, MAX_LIMIT)

    def get_offset(self, request):
        return _int_param(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view):
        params = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, MAX_LIMIT), self.offset_query_param: (0, MAX_OFFSET)}
        for param in params:
            lo, hi = bounds[param["name"]]
            param["schema"].update(minimum=lo, maximum=hi)
        return params
