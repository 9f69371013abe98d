"""Sign-in attempts are rate-limited (in the real Redis cache)."""

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(broker):  # `broker` empties the test Redis, which also holds the cache
    User = get_user_model()
    return (User.objects.create_user("alice", password="right-password-1"),
            User.objects.create_user("bob", password="right-password-2"))


def attempt(client, username, password):
    return client.post("/login/", {"username": username, "password": password})


def test_after_five_failures_even_the_right_password_is_refused_for_a_while(client, users):
    for _ in range(5):
        assert attempt(client, "alice", "guess").status_code == 200  # the form, with an error
    response = attempt(client, "alice", "right-password-1")
    assert response.status_code == 429
    assert "Too many failed sign-in attempts. Try again in 15 minutes." in response.content.decode()
    assert "_auth_user_id" not in client.session
    # Another user is not locked out by alice's attacker.
    assert attempt(client, "bob", "right-password-2").status_code == 302


def test_a_successful_sign_in_clears_the_count(client, users):
    for _ in range(4):
        attempt(client, "alice", "guess")
    assert attempt(client, "alice", "right-password-1").status_code == 302
    client.logout()
    for _ in range(4):
        attempt(client, "alice", "guess")
    assert attempt(client, "alice", "right-password-1").status_code == 302


def test_the_admin_signs_in_through_the_same_page(client):
    response = client.get("/admin/login/?next=/admin/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/admin/"
