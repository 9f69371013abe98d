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
    # well-formed but impossible: Django's parse_datetime raises instead of saying None
    ("from=2026-11-22T25:00", "from is not a date and time (YYYY-MM-DD HH:MM): '2026-11-22T25:00'"),
    ("from=2026-11-20T10:00&to=2026-02-30T10:00", "to is not a date and time"),
    # a time no sample can have, or past what datetime arithmetic keeps clear of overflow
    ("from=0001-01-01T00:30%2B01:00", "from must lie between 2000-01-01 and 2100-01-01"),
    ("from=2026-11-20T10:00&to=9999-12-31T23:59-05:00",
     "to must lie between 2000-01-01 and 2100-01-01"),
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


@pytest.mark.django_db
def test_every_page_with_a_range_answers_an_impossible_time_with_its_message(client_for):
    """Hour 25 used to reach parse_datetime's ValueError and a server error on each of them."""
    from tests import rows as f

    n = f.node("gpu-a001", gpus=1)
    gpu = n.gpus.get()
    job = f.job("alice", gpus=[gpu])
    client = client_for("staff")
    pages = ["/", "/nodes/history/", f"/nodes/{n.pk}/", f"/gpus/{gpu.pk}/", f"/jobs/{job.pk}/",
             "/users/", "/namespaces/"]
    for page in pages:
        response = client.get(page, {"from": "2026-11-22T25:00"})
        assert response.status_code == 400, page
        assert "from is not a date and time (YYYY-MM-DD HH:MM)" in response.content.decode(), page
