"""Sign-in limits: django-axes locks a (user name, address) pair, never a whole address's
users; the attempt gate limits one address guessing many names (real Redis, real DB)."""

import ipaddress

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from clusterui.accounts import attempt_gate

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.2"
PAIR_LOCKED = "Too many failed sign-in attempts for this user from your address. Try again in 15 minutes."
ADDRESS_LOCKED = "Too many failed sign-in attempts from your address. Try again in 15 minutes."


@pytest.fixture
def users(broker):  # `broker` empties the test Redis, which also holds the cache
    User = get_user_model()
    return (User.objects.create_user("alice", password="right-password-1"),
            User.objects.create_user("bob", password="right-password-2"),
            User.objects.create_superuser("admin", password="right-password-3"))


@pytest.fixture
def behind_proxy(settings):
    settings.LOGIN_TRUSTED_PROXIES = (ipaddress.ip_network(f"{PROXY}/32"),)


def attempt(client, username, password, remote=PROXY, forwarded=None):
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return client.post("/login/", {"username": username, "password": password}, **extra)


def signed_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == "/"


def test_after_five_failures_the_pair_is_refused_with_a_message(client, users):
    for _ in range(4):
        response = attempt(client, "alice", "guess")
        assert response.status_code == 200  # the form, with an error
        assert "Please enter a correct username and password" in response.content.decode()
    assert attempt(client, "alice", "guess").status_code == 429  # the fifth locks
    response = attempt(client, "alice", "right-password-1")
    assert response.status_code == 429
    assert PAIR_LOCKED in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_ten_wrong_passwords_from_the_proxy_address_lock_out_no_other_user(client, users):
    # No trusted proxies configured: every user arrives with the proxy's address.
    for _ in range(10):
        attempt(client, "alice", "guess")
    assert attempt(client, "alice", "right-password-1").status_code == 429
    assert signed_in(attempt(client, "bob", "right-password-2"))
    client.logout()
    assert signed_in(attempt(client, "admin", "right-password-3"))


def test_behind_a_trusted_proxy_the_attacker_cannot_lock_the_user_out(client, users,
                                                                       behind_proxy):
    for _ in range(10):
        attempt(client, "alice", "guess", forwarded="203.0.113.9")
    assert attempt(client, "alice", "right-password-1",
                   forwarded="203.0.113.9").status_code == 429
    # Alice, from her own address through the same proxy, signs in.
    assert signed_in(attempt(client, "alice", "right-password-1", forwarded="198.51.100.7"))


def test_a_client_written_forwarded_for_does_not_change_the_address(client, users,
                                                                     behind_proxy):
    # The attacker writes a new address each time; the proxy appends the real one.
    for n in range(5):
        attempt(client, "alice", "guess", forwarded=f"192.0.2.{n}, 203.0.113.9")
    response = attempt(client, "alice", "right-password-1",
                       forwarded="192.0.2.99, 203.0.113.9")
    assert response.status_code == 429 and PAIR_LOCKED in response.content.decode()


def test_forwarded_for_from_an_untrusted_peer_is_ignored(client, users):
    for n in range(5):
        attempt(client, "alice", "guess", remote="203.0.113.9", forwarded=f"192.0.2.{n}")
    assert attempt(client, "alice", "right-password-1", remote="203.0.113.9",
                   forwarded="198.51.100.7").status_code == 429


def test_a_successful_sign_in_clears_the_count(client, users):
    for _ in range(4):
        attempt(client, "alice", "guess")
    assert signed_in(attempt(client, "alice", "right-password-1"))
    client.logout()
    for _ in range(4):
        attempt(client, "alice", "guess")
    assert signed_in(attempt(client, "alice", "right-password-1"))


def test_one_address_guessing_many_names_is_refused_and_others_are_not(client, users,
                                                                        behind_proxy,
                                                                        settings):
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 6
    for n in range(6):
        assert attempt(client, f"user{n}", "guess", forwarded="203.0.113.9").status_code == 200
    response = attempt(client, "alice", "right-password-1", forwarded="203.0.113.9")
    assert response.status_code == 429 and ADDRESS_LOCKED in response.content.decode()
    assert signed_in(attempt(client, "bob", "right-password-2", forwarded="198.51.100.7"))


def test_signin_reset_address_lets_the_address_in_again(client, users, behind_proxy,
                                                         settings):
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 6
    for _ in range(5):
        attempt(client, "alice", "guess", forwarded="203.0.113.9")
    attempt(client, "nobody", "guess", forwarded="203.0.113.9")
    assert attempt(client, "bob", "right-password-2",
                   forwarded="203.0.113.9").status_code == 429
    call_command("signin_reset_address", "203.0.113.9")
    assert signed_in(attempt(client, "alice", "right-password-1", forwarded="203.0.113.9"))


def test_axes_reset_username_unlocks_an_account(client, users):
    for _ in range(5):
        attempt(client, "alice", "guess")
    assert attempt(client, "alice", "right-password-1").status_code == 429
    call_command("axes_reset_username", "alice")
    assert signed_in(attempt(client, "alice", "right-password-1"))


def test_the_admin_signs_in_through_the_same_page(client):
    response = client.get("/admin/login/?next=/admin/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/admin/"


def test_an_attempt_that_waits_too_long_for_its_turn_is_refused(client, users, monkeypatch):
    monkeypatch.setattr(attempt_gate, "WAIT_S", 0.3)
    with attempt_gate.one_at_a_time("alice", PROXY) as turn:  # another attempt's check
        assert turn
        response = attempt(client, "alice", "right-password-1")
    assert response.status_code == 429
    assert "Another sign-in attempt for this user is still being checked" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert signed_in(attempt(client, "alice", "right-password-1"))  # its turn came
