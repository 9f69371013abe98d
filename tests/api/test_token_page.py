"""/settings/tokens/: create an API token (its key shown once), see them, revoke one."""

import re

import pytest
from rest_framework.test import APIClient

from clusterui.api.models import ApiToken
from clusterui.api.tokens import create_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(client, users):
    client.force_login(users["alice"])
    return client


def works(key: str) -> bool:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api.get("/api/v1/jobs/").status_code == 200


def test_sign_in_is_required(client):
    response = client.get("/settings/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_page_is_linked_from_every_page(alice):
    html = alice.get("/settings/tokens/").content.decode()
    assert 'href="/settings/tokens/"' in html


def test_create_shows_the_key_once_and_it_works(alice, users):
    response = alice.post("/settings/tokens/", {"name": "laptop"})
    assert response.status_code == 302 and response["Location"] == "/settings/tokens/"
    html = alice.get("/settings/tokens/").content.decode()
    (key,) = re.findall(r'id="new-token-key">(cui_[A-Za-z0-9_-]+)<', html)
    assert "Copy the key now" in html and "laptop" in html
    assert works(key)
    again = alice.get("/settings/tokens/").content.decode()
    assert key not in again and key[:12] in again  # only its prefix from now on
    assert ApiToken.objects.get(user=users["alice"]).name == "laptop"


def test_the_list_shows_my_tokens_and_when_each_was_last_used(alice, users):
    _, key = create_token(users["alice"], "cron job")
    create_token(users["bob"], "bobs secret")
    assert works(key)
    html = alice.get("/settings/tokens/").content.decode()
    assert "cron job" in html and "bobs secret" not in html
    row = html[html.index("cron job"):]
    assert "never" not in row[:row.index("</tr>")]


def test_revoke(alice, users):
    token, key = create_token(users["alice"], "old laptop")
    response = alice.post(f"/settings/tokens/{token.id}/revoke/")
    assert response.status_code == 302
    html = alice.get("/settings/tokens/").content.decode()
    assert "is revoked" in html and "You have no API tokens" in html
    assert not works(key)


def test_cannot_revoke_someone_elses_token(alice, users):
    token, key = create_token(users["bob"], "bobs")
    assert alice.post(f"/settings/tokens/{token.id}/revoke/").status_code == 404
    assert works(key)


def test_revoke_needs_a_post(alice, users):
    token, _ = create_token(users["alice"], "x")
    assert alice.get(f"/settings/tokens/{token.id}/revoke/").status_code == 405


def test_a_name_is_required_and_the_count_is_bounded(alice, users, settings):
    assert alice.post("/settings/tokens/", {"name": "  "}).status_code == 400
    settings.API_TOKENS_PER_USER = 2
    create_token(users["alice"], "a")
    create_token(users["alice"], "b")
    response = alice.post("/settings/tokens/", {"name": "c"})
    assert response.status_code == 400
    assert "You already have 2 tokens, the most allowed" in response.content.decode()
    assert ApiToken.objects.filter(user=users["alice"]).count() == 2
