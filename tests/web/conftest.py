"""The web tests' cast: alice (owner of the jobs under test), bob (a colleague in the same
account, who must not see them) and a staff user; each with a signed-in test client."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client


@pytest.fixture
def users(db):
    User = get_user_model()
    return {
        "alice": User.objects.create_user("alice", "alice@example.org", "pw"),
        "bob": User.objects.create_user("bob", "bob@example.org", "pw"),
        "staff": User.objects.create_user("admin", "admin@example.org", "pw", is_staff=True),
    }


@pytest.fixture
def client_for(users):
    """``client_for("alice")``: a test client signed in as alice."""

    def make(name: str) -> Client:
        client = Client()
        client.force_login(users[name])
        return client

    return make
