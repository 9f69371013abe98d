"""/settings/alerts/: a user turns kinds of alert email off and on for themselves."""

import pytest
from django.urls import reverse

from clusterui.alerts.choices import CATEGORY_HELP, DIGEST
from clusterui.alerts.models import AlertEmail, OptOut
from clusterui.alerts.tasks import send_alerts
from tests.alerts.factories import make_finding, make_job, make_user

pytestmark = pytest.mark.django_db
URL = "/settings/alerts/"


def test_the_page_needs_a_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_it_shows_the_address_the_kinds_and_the_limits(client, cast, settings,
                                                      django_assert_num_queries):
    settings.ALERT_DAILY_LIMIT = 7
    settings.ALERT_QUIET_HOURS = None
    OptOut.objects.create(address="alice@example.org", category="idle_gpu")
    client.force_login(cast["owner"])
    # session, user, opt-outs, the job-end summary's opt-in, recent emails, the
    # navigation's cluster list (web/cluster_choice.py)
    with django_assert_num_queries(6):
        page = client.get(URL).content.decode()
    assert "alice@example.org" in page
    assert 'value="low_utilization" checked' in page
    assert 'value="idle_gpu">' in page  # off: unticked
    assert 'value="digest"' not in page  # not an admin
    assert "At most <strong>7</strong> alert emails per person a day" in page
    assert "Emails go out every day, at any hour (UTC).</li>" in page


def test_turning_a_kind_off_stops_its_emails(client, cast, smtp):
    client.force_login(cast["owner"])
    # Every category the page offers a researcher, but low_utilization.
    kinds = [str(c) for c in CATEGORY_HELP if c not in ("low_utilization", DIGEST)]
    assert {"idle_gpu", "straggler", "job_end"} <= set(kinds)
    response = client.post(URL, {"enabled": kinds})
    assert response.status_code == 302
    assert set(OptOut.objects.values_list("address", "category")) == {
        ("alice@example.org", "low_utilization")}
    assert "Your alert settings are saved." in client.get(URL).content.decode()

    job = make_job("alice")
    make_finding(job)
    make_finding(job, kind="idle_gpu", evidence={"idle_gpus": 7})
    send_alerts()
    assert ["Idle allocated GPU" in m.subject for m in smtp.received] == [True]

    client.post(URL, {"enabled": [*kinds, "low_utilization"]})
    assert not OptOut.objects.exists()


def test_the_recent_emails_say_what_happened_to_each(client, cast, smtp, settings):
    settings.ALERT_DAILY_LIMIT = 1
    make_finding(make_job("alice"))
    make_finding(make_job("alice"))
    send_alerts()
    client.force_login(cast["owner"])
    page = client.get(URL).content.decode()
    assert page.count("Sent</span>") == 1
    assert "daily limit of 1 emails reached" in page


def test_an_unknown_kind_is_refused_with_a_reason(client, cast):
    client.force_login(cast["owner"])
    response = client.post(URL, {"enabled": ["low_utilization", "cat_videos"]})
    assert response.status_code == 400
    assert "Unknown category: cat_videos." in response.content.decode()
    assert not OptOut.objects.exists()


def test_a_user_without_an_address_is_told_so(client, db):
    user = make_user("noaddr", email="")
    client.force_login(user)
    assert "ClusterUI has no email address for you" in client.get(URL).content.decode()
    assert client.post(URL, {"enabled": []}).status_code == 400


def test_a_login_the_address_pattern_cannot_take_is_told_why(client, db, settings):
    settings.ALERT_EMAIL_PATTERN = "{user}@hpc.example.org"
    client.force_login(make_user("dana@example.org", email=""))
    page = " ".join(client.get(URL).content.decode().split())
    assert "ClusterUI has no email address for you" in page
    assert "your login cannot be put into the site's address pattern" in page
    # A plain login takes the pattern.
    client.force_login(make_user("dana", email=""))
    assert "sent to <strong>dana@hpc.example.org</strong>" in client.get(URL).content.decode()


def test_staff_can_turn_the_digest_off(client, cast):
    client.force_login(cast["staff"])
    page = client.get(URL).content.decode()
    assert 'value="digest" checked' in page
    client.post(URL, {"enabled": ["low_utilization"]})
    assert ("ops@example.org", "digest") in set(
        OptOut.objects.values_list("address", "category"))
    assert not AlertEmail.objects.exists()


def test_the_sending_window_is_stated(client, cast, settings):
    import datetime as dt

    settings.ALERT_QUIET_HOURS = (dt.time(20), dt.time(8))
    settings.ALERT_WEEKDAYS = frozenset(range(5))
    client.force_login(cast["owner"])
    page = client.get(URL).content.decode()
    assert ("Emails go out Mon, Tue, Wed, Thu, Fri; quiet from 20:00 to 08:00 (UTC). Outside "
            "that window they wait; none is dropped.") in page
