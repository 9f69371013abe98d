"""The API tests' cast: alice (owner), bob (colleague, same account), carol (outsider) and
a staff user, each with an API client that authenticates by token."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from clusterui.api.tokens import create_token


@pytest.fixture
def users(db):
    User = get_user_model()
    return {
        "alice": User.objects.create_user("alice", "alice@example.org", "pw"),
        "bob": User.objects.create_user("bob", "bob@example.org", "pw"),
        "carol": User.objects.create_user("carol", "carol@example.org", "pw"),
        "staff": User.objects.create_user("admin", "admin@example.org", "pw", is_staff=True),
    }


@pytest.fixture
def api(users):
    """``api("alice")``: a client sending alice's token, as a script would."""

    def make(name: str) -> APIClient:
        _, key = create_token(users[name], "tests")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make
