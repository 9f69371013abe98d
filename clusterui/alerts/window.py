"""When emails may go out: not during quiet hours, only on the listed weekdays (local time,
settings.TIME_ZONE). Outside that window emails wait; they are never dropped for it."""

import datetime as dt

from django.conf import settings
from django.utils import timezone


def sending_allowed(now: dt.datetime) -> bool:
    local = timezone.localtime(now)
    if local.weekday() not in settings.ALERT_WEEKDAYS:
        return False
    return not in_quiet_hours(local.time())


def in_quiet_hours(t: dt.time) -> bool:
    window = settings.ALERT_QUIET_HOURS
    if window is None:
        return False
    start, end = window
    if start < end:
        return start <= t < end
    return t >= start or t < end  # the window spans midnight


def restricted() -> bool:
    return settings.ALERT_QUIET_HOURS is not None or len(settings.ALERT_WEEKDAYS) < 7


def describe() -> str:
    """The window in words, for the preferences page and the docs."""
    days = sorted(settings.ALERT_WEEKDAYS)
    names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    when = "every day" if len(days) == 7 else ", ".join(names[d] for d in days)
    window = settings.ALERT_QUIET_HOURS
    if window:
        quiet = f"; quiet from {window[0]:%H:%M} to {window[1]:%H:%M}"
    else:
        quiet = ", at any hour"
    return f"{when}{quiet} ({settings.TIME_ZONE})"
