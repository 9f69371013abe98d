"""Who may read ``/metrics``: a bearer token, an allowed network, or nobody."""

import pytest

pytestmark = pytest.mark.django_db

TOKEN = "metrics-access-token-0123456789"


def get(client, **headers):
    return client.get("/metrics", **headers)


def test_nobody_while_neither_is_set(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = "", ()
    response = get(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 403
    assert b"set METRICS_TOKEN or METRICS_ALLOWED_NETWORKS" in response.content


def test_the_bearer_token(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    missing = get(client)
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert get(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 401
    assert get(client, HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    ok = get(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b"# TYPE clusterui_ingest_broker_up gauge" in ok.content


def test_an_allowed_network(client, settings):
    from ipaddress import ip_network

    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = (ip_network("10.0.0.0/8"),)
    assert get(client, REMOTE_ADDR="10.1.2.3").status_code == 200
    outside = get(client, REMOTE_ADDR="192.0.2.1")
    assert outside.status_code == 403 and b"METRICS_ALLOWED_NETWORKS" in outside.content
    # A forwarded-for header from an untrusted peer changes nothing.
    assert get(client, REMOTE_ADDR="192.0.2.1",
               HTTP_X_FORWARDED_FOR="10.1.2.3").status_code == 403
    # With a token as well, a scrape from elsewhere may bring it.
    settings.METRICS_TOKEN = TOKEN
    assert get(client, REMOTE_ADDR="192.0.2.1",
               HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


def test_a_signed_in_user_is_not_enough(client, settings, django_user_model):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = TOKEN, ()
    client.force_login(django_user_model.objects.create_user("admin", is_staff=True))
    assert get(client).status_code == 401


def test_a_short_token_is_refused_at_start():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={"DJANGO_SETTINGS_MODULE": "clusterui.settings", "SECRET_KEY": "x", "DEBUG": "1",
             "METRICS_TOKEN": "short", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "METRICS_TOKEN must be at least 16 characters" in done.stderr
