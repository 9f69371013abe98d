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
