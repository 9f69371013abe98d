"""GET /api/v1/tokens/ and DELETE /api/v1/tokens/<id>/: a user's own tokens, never a key."""

import pytest

from clusterui.api.models import ApiToken
from clusterui.api.tokens import create_token

pytestmark = pytest.mark.django_db


def test_list_shows_only_my_tokens_and_never_a_key(api, users):
    client = api("alice")  # creates alice's "tests" token
    create_token(users["alice"], "cron")
    create_token(users["bob"], "bobs")
    body = client.get("/api/v1/tokens/").json()
    assert [t["name"] for t in body["results"]] == ["cron", "tests"]
    assert set(body["results"][0]) == {"id", "name", "prefix", "created_at", "last_used_at"}


def test_revoke_my_token(api, users):
    client = api("alice")
    token, key = create_token(users["alice"], "old laptop")
    response = client.delete(f"/api/v1/tokens/{token.id}/")
    assert response.status_code == 204
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_cannot_revoke_someone_elses_token(api, users):
    token, _ = create_token(users["bob"], "bobs")
    response = api("alice").delete(f"/api/v1/tokens/{token.id}/")
    assert response.status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_a_token_can_revoke_itself(api, users):
    client = api("alice")
    own = ApiToken.objects.get(user=users["alice"])
    assert client.delete(f"/api/v1/tokens/{own.id}/").status_code == 204
    assert client.get("/api/v1/tokens/").status_code == 401
