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
    ({"from": _local(120), "to": _local(5), "metric": "sm"},
     {"from": [_local(120)], "to": [_local(5)]}),
])
def test_the_overviews_usage_link_opens_the_users_page_on_the_same_range(
        client_for, query, expected):
    """The link under the most wasteful users carries the overview's range, and nothing of
    the overview's own (its heat map's metric ran into the range: "?metric=smrange=1h")."""
    from urllib.parse import parse_qs, urlsplit

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
    assert (shown.preset, shown.start.replace(second=0, microsecond=0)) == (
        asked.preset, asked.start.replace(second=0, microsecond=0))
