"""The time range a page shows, from its query string: a preset (``range=1h|6h|24h|7d``)
or a custom ``from``/``to``. A range without ``to`` ends now and is *live*: the page
refreshes itself. Bad input is a ``TimeRangeError`` with a message for the user.
"""

import datetime as dt
from dataclasses import dataclass
from urllib.parse import urlencode

from django.utils import timezone

from clusterui.telemetry.timebounds import EARLIEST, LATEST, parse_iso

PRESETS = {
    "1h": dt.timedelta(hours=1),
    "6h": dt.timedelta(hours=6),
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
}
PRESET_LABELS = {"1h": "1 h", "6h": "6 h", "24h": "24 h", "7d": "7 d"}
# A custom range longer than this is refused: the raw tables keep about this much anyway.
MAX_SPAN = dt.timedelta(days=31)
PARAMS = ("range", "from", "to")


class TimeRangeError(ValueError):
    pass


@dataclass(frozen=True)
class TimeRange:
    start: dt.datetime
    end: dt.datetime
    preset: str | None  # "1h"... or None for a custom (or page-specific) range
    live: bool  # ends now: the page refreshes

    @property
    def span(self) -> dt.timedelta:
        return self.end - self.start

    @property
    def label(self) -> str:
        if self.preset in PRESET_LABELS:
            return f"last {PRESET_LABELS[self.preset]}"
        local = timezone.localtime
        fmt = "%Y-%m-%d %H:%M"
        end = "now" if self.live else local(self.end).strftime(fmt)
        return f"{local(self.start).strftime(fmt)} – {end}"


def _parse_time(raw: str, name: str) -> dt.datetime:
    value = parse_iso(raw.strip().replace(" ", "T", 1))
    if value is None:
        raise TimeRangeError(f"{name} is not a date and time (YYYY-MM-DD HH:MM): {raw!r}")
    if not EARLIEST <= value < LATEST:  # aware: year 1 an hour east of UTC is before year 1
        raise TimeRangeError(f"{name} must lie between {EARLIEST:%Y-%m-%d} and "
                             f"{LATEST:%Y-%m-%d}: {raw!r}")
    return value


def parse(params, *, default: str = "1h", now: dt.datetime | None = None) -> TimeRange:
    """The range asked for in ``params`` (a QueryDict or dict)."""
    now = now or timezone.now()
    raw_from = (params.get("from") or "").strip()
    raw_to = (params.get("to") or "").strip()
    if raw_from or raw_to:
        if not raw_from:
            raise TimeRangeError("a custom range needs a start (from)")
        start = _parse_time(raw_from, "from")
        end = _parse_time(raw_to, "to") if raw_to else now
        if end > now:
            end = now
        if end <= start:
            raise TimeRangeError("the range must end after it starts (and start in the past)")
        if end - start > MAX_SPAN:
            raise TimeRangeError(f"a range can span at most {MAX_SPAN.days} days")
        return TimeRange(start, end, None, live=not raw_to or end == now)
    preset = (params.get("range") or default).strip()
    if preset not in PRESETS:
        raise TimeRangeError(f"range must be one of {', '.join(PRESETS)}, got {preset!r}")
    return TimeRange(now - PRESETS[preset], now, preset, live=True)


def parse_or_default(params, *, default: str = "1h", now=None) -> tuple[TimeRange, str | None]:
    """Like ``parse``, but a bad request falls back to the default range and returns the
    message to show next to the picker."""
    try:
        return parse(params, default=default, now=now), None
    except TimeRangeError as exc:
        return parse({}, default=default, now=now), str(exc)


def as_query(tr: TimeRange, params) -> str:
    """The range ``tr`` (read from ``params``) as a query string that another page with a
    range picker reads as the same range: its preset (the default one too), or the custom
    start and end as given."""
    if tr.preset is not None:
        return urlencode({"range": tr.preset})
    return urlencode([(k, params[k].strip()) for k in ("from", "to")
                      if (params.get(k) or "").strip()])


def without_range(params) -> str:
    """The query string minus the range parameters (and the page number), for the
    picker's links to keep a page's other filters."""
    kept = [(k, v) for k in params for v in params.getlist(k) if k not in (*PARAMS, "page")]
    return urlencode(kept)
