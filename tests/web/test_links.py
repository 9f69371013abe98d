"""Links that carry the page's query string go where they say: the next page is page 2
(Django's {% querystring %} writes its own "?": "??page=2" showed page 1 again), and the
users page's grouping toggle switches the grouping. Each link is taken from the rendered
page and followed, as a browser would."""

import re
from html import unescape

import pytest
from django.urls import reverse

from clusterui.web.views.jobs import PAGE_SIZE
from tests import rows as f

pytestmark = pytest.mark.django_db


def href(page: str, text: str) -> str:
    match = re.search(r'<a href="([^"]*)"[^>]*>\s*' + re.escape(text), page)
    assert match, f"no link {text!r} on the page"
    return unescape(match.group(1))


def test_next_and_previous_move_between_pages_of_the_jobs_list(client_for):
    for k in range(PAGE_SIZE + 5):
        f.job("alice", external_id=f"70{k:03d}")
    client = client_for("staff")
    url = reverse("jobs")
    first = client.get(url, {"state": "running"})
    first_ids = {j.external_id for j in first.context["page"].object_list}
    link = href(first.content.decode(), "Next →")
    assert link.startswith("?") and not link.startswith("??")
    second = client.get(url + link)
    assert second.context["page"].number == 2
    second_ids = {j.external_id for j in second.context["page"].object_list}
    assert len(second_ids) == 5 and not second_ids & first_ids
    assert "state=running" in link  # the filter is kept
    back = client.get(url + href(second.content.decode(), "← Previous"))
    assert back.context["page"].number == 1


def test_the_grouping_toggle_switches_to_accounts(client_for):
    f.job("alice", account="nlp", efficiency={"allocated": 4, "used": 1})
    client = client_for("staff")
    url = reverse("users")
    link = href(client.get(url).content.decode(), "By account")
    response = client.get(url + link)
    assert response.context["group"] == "account"
    assert [r["name"] for r in response.context["rows"]] == ["nlp"]


def _local(ago_min: int) -> str:
    import datetime as dt

    from django.utils import timezone

    return (timezone.localtime() - dt.timedelta(minutes=ago_min)).strftime("%Y-%m-%dT%H:%M")


@pytest.mark.parametrize("query, expected", [
    ({"metric": "sm", "range": "6h"}, {"range": ["6h"]}),
    ({"metric": "sm"}, {"range": ["24h"]}),  # the overview's default range, said outright
    ({"from": 120, "to": 5, "metric": "sm"}, {"from": 120, "to": 5}),  # minutes ago
], ids=["preset", "default", "custom"])
def test_the_overviews_usage_link_opens_the_users_page_on_the_same_range(
        client_for, query, expected):
    """The link under the most wasteful users carries the overview's range, and nothing of
    the overview's own (its heat map's metric ran into the range: "?metric=smrange=1h")."""
    from urllib.parse import parse_qs, urlsplit

    # A custom range's times are taken now, not when the tests were collected (the job
    # below must be active in it).
    at = {k: _local(v) for k, v in query.items() if k in ("from", "to")}  # once each
    query = {**query, **at}
    expected = {**expected, **{k: [v] for k, v in at.items()}}
    node = f.node()
    f.job("alice", gpus=list(node.gpus.all()), efficiency={"allocated": 10, "used": 2},
          external_id="1")
    client = client_for("staff")
    home = client.get(reverse("home"), query)
    assert home.context["range_error"] is None
    link = href(home.content.decode(), "Usage by user and account")
    assert urlsplit(link).path == reverse("users")
    assert parse_qs(urlsplit(link).query) == expected
    users = client.get(link)
    assert users.status_code == 200 and users.context["range_error"] is None
    shown, asked = users.context["range"], home.context["range"]
    assert shown.preset == asked.preset
    if asked.preset is None:  # a preset's start moves with the clock between the requests
        assert (shown.start, shown.end) == (asked.start, asked.end)
