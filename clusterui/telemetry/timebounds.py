"""The times a query may name (a page's custom range, an API parameter), and how they are
read: samples cannot predate 2000 (ingest refuses them: ``ingest/validate.py``, ``MIN_TS``),
and the upper bound keeps datetime arithmetic far from overflow."""

import datetime as dt

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

UNIX_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(2100, 1, 1, tzinfo=dt.UTC)


def parse_iso(raw: str, *, bare_date: bool = False) -> dt.datetime | None:
    """An ISO 8601 time, aware (one without an offset is in the server's TIME_ZONE); with
    ``bare_date``, a date alone is its midnight. None when ``raw`` is not one, a well-formed
    but impossible one (hour 25, 30 February) included: Django's parsers raise on those
    instead of returning None."""
    try:
        value = parse_datetime(raw)
        if value is None and bare_date and (day := parse_date(raw)) is not None:
            value = dt.datetime.combine(day, dt.time())
    except ValueError:
        return None
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value)
    return value
