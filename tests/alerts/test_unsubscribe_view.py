"""The signed unsubscribe link in every email: works without a login, asks before acting
on GET, acts on POST (one-click included), and refuses a forged link."""

import pytest
from django.test import Client

from clusterui.alerts.models import OptOut
from clusterui.alerts.preferences import unsubscribe_token
from clusterui.alerts.tasks import send_alerts
from tests.alerts.factories import make_finding, make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def link(smtp, cast):
    make_finding(make_job("alice"))
    send_alerts()
    header = smtp.received[0].message["List-Unsubscribe"].strip()
    path = header.strip("<>").removeprefix("http://clusterui.test")
    assert path in smtp.received[0].text  # the same link is in the body
    return path


def test_get_asks_first_and_post_unsubscribes_without_a_login(link, smtp):
    anonymous = Client(enforce_csrf_checks=True)
    page = anonymous.get(link)
    assert page.status_code == 200
    assert "Stop emails about <strong>Low GPU utilization</strong>?" in page.content.decode()
    assert not OptOut.objects.exists()  # a link scanner's GET changes nothing

    done = anonymous.post(link, {"action": "unsubscribe"})
    assert done.status_code == 200
    assert "will no longer email you about <strong>Low GPU utilization</strong>" in (
        done.content.decode())
    assert set(OptOut.objects.values_list("address", "category")) == {
        ("alice@example.org", "low_utilization")}

    make_finding(make_job("alice"))
    send_alerts()
    assert len(smtp.received) == 1  # no new email of that kind

    anonymous.post(link, {"action": "resubscribe"})
    assert not OptOut.objects.exists()


def test_one_click_unsubscribe_from_the_mail_client(link):
    response = Client(enforce_csrf_checks=True).post(
        link, "List-Unsubscribe=One-Click",
        content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200
    assert OptOut.objects.filter(address="alice@example.org", category="low_utilization").exists()


def test_stop_all_alert_emails(link, smtp):
    Client().post(link, {"action": "all"})
    job = make_job("alice")
    make_finding(job, kind="throttling")
    make_finding(job, kind="gpu_errors")
    assert send_alerts()["queued"] == 0
    assert len(smtp.received) == 1


def test_a_forged_or_cut_link_is_refused(client, link):
    token = link.rstrip("/").rsplit("/", 1)[1]
    forged = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    response = client.get(f"/alerts/unsubscribe/{forged}/")
    assert response.status_code == 400
    assert "This unsubscribe link is not valid" in response.content.decode()
    assert client.post(f"/alerts/unsubscribe/{forged}/").status_code == 400
    assert not OptOut.objects.exists()


def test_a_link_for_an_unknown_category_is_refused(client, db):
    token = unsubscribe_token("alice@example.org", "cat_videos")
    response = client.post(f"/alerts/unsubscribe/{token}/")
    assert response.status_code == 400
    assert "no longer has (cat_videos)" in response.content.decode()


def test_an_unknown_action_is_refused(client, link):
    response = client.post(link, {"action": "explode"})
    assert response.status_code == 400
    assert "Unknown action: explode." in response.content.decode()
