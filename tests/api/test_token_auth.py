"""Authentication: ``Authorization: Token <key>`` (or ``Bearer``), or the browser session."""

import datetime as dt
import hashlib

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from clusterui.api.models import ApiToken
from clusterui.api.tokens import create_token
from tests.api import factories

pytestmark = pytest.mark.django_db


def client_with(header: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    return client


@pytest.fixture
def key(users):
    return create_token(users["alice"], "laptop")[1]


@pytest.mark.parametrize("scheme", ["Token", "Bearer", "token"])
def test_a_valid_key_authenticates(key, scheme):
    response = client_with(f"{scheme} {key}").get("/api/v1/jobs/")
    assert response.status_code == 200


@pytest.mark.parametrize(("header", "message"), [
    ("Token cui_not-a-real-key", "Invalid or revoked token."),
    ("Token not-even-our-format", "Invalid or revoked token."),
    ("Token", "Malformed Authorization header: expected 'Token <key>'."),
    ("Token a b", "Malformed Authorization header: expected 'Token <key>'."),
])
def test_a_bad_key_is_401(key, header, message):
    response = client_with(header).get("/api/v1/jobs/")
    assert response.status_code == 401
    assert response.json() == {"error": message}


def test_a_revoked_key_stops_working(key, users):
    ApiToken.objects.filter(user=users["alice"]).delete()
    assert client_with(f"Token {key}").get("/api/v1/jobs/").status_code == 401


def test_a_deactivated_users_key_stops_working(key, users):
    users["alice"].is_active = False
    users["alice"].save()
    assert client_with(f"Token {key}").get("/api/v1/jobs/").status_code == 401


def test_only_a_hash_of_the_key_is_stored(key):
    token = ApiToken.objects.get()
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key.startswith(token.prefix) and len(token.prefix) == 12 and len(key) == 44
    stored = [str(v) for v in ApiToken.objects.values_list().get()]
    assert key not in stored


def test_last_use_is_recorded_without_a_write_per_request(key, django_assert_num_queries):
    factories.job("alice")
    client = client_with(f"Token {key}")
    assert ApiToken.objects.get().last_used_at is None
    # token, its last-use update, the viewer's per-cluster names, count, page
    with django_assert_num_queries(5):
        client.get("/api/v1/jobs/")
    used = ApiToken.objects.get().last_used_at
    assert timezone.now() - used < dt.timedelta(seconds=5)
    with django_assert_num_queries(4):  # within a minute: no update
        client.get("/api/v1/jobs/")
    ApiToken.objects.update(last_used_at=used - dt.timedelta(minutes=2))
    client.get("/api/v1/jobs/")
    assert ApiToken.objects.get().last_used_at > used


def test_a_browser_session_authenticates_and_is_not_redirected(users):
    anonymous = APIClient().get("/api/v1/jobs/")
    assert anonymous.status_code == 401  # not the login page's 302
    browser = APIClient()
    browser.force_login(users["alice"])
    assert browser.get("/api/v1/jobs/").status_code == 200
