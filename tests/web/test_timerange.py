"""The time-range picker's parsing."""

import datetime as dt

import pytest
from django.http import QueryDict

from clusterui.web import timerange

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def parse(query: str, **kw):
    return timerange.parse(QueryDict(query), now=NOW, **kw)


def test_presets_end_now_and_are_live():
    tr = parse("range=6h")
    assert (tr.start, tr.end, tr.preset, tr.live) == (NOW - dt.timedelta(hours=6), NOW, "6h",
                                                       True)
    assert parse("", default="7d").span == dt.timedelta(days=7)
    assert tr.label == "last 6 h"


def test_custom_ranges():
    tr = parse("from=2026-11-22T08:00&to=2026-11-22T09:30")
    assert (tr.start, tr.end, tr.live) == (NOW.replace(hour=8), NOW.replace(hour=9, minute=30),
                                           False)
    assert tr.label == "2026-11-22 08:00 – 2026-11-22 09:30"
    open_ended = parse("from=2026-11-22 10:00")
    assert open_ended.end == NOW and open_ended.live
    assert parse("from=2026-11-22T10:00%2B02:00&to=2026-11-22T11:00%2B02:00").start == \
        NOW.replace(hour=8)


@pytest.mark.parametrize(("query", "message"), [
    ("range=2w", "range must be one of 1h, 6h, 24h, 7d, got '2w'"),
    ("to=2026-11-22T09:00", "a custom range needs a start (from)"),
    ("from=soon", "from is not a date and time (YYYY-MM-DD HH:MM): 'soon'"),
    ("from=2026-11-22T10:00&to=2026-11-22T09:00", "the range must end after it starts"),
    ("from=2026-12-22T10:00", "the range must end after it starts"),
    ("from=2026-01-01T00:00", "a range can span at most 31 days"),
])
def test_bad_ranges_say_what_is_wrong(query, message):
    with pytest.raises(timerange.TimeRangeError, match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        parse(query)


def test_a_bad_range_falls_back_to_the_default_with_its_message():
    tr, error = timerange.parse_or_default(QueryDict("range=nope"), default="24h", now=NOW)
    assert tr.preset == "24h" and error.startswith("range must be one of")


def test_other_parameters_are_kept_for_the_picker_links():
    assert timerange.without_range(QueryDict("by=account&range=1h&page=3&q=x")) == "by=account&q=x"
