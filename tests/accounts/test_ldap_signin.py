"""LDAP sign-in through the real sign-in form, against a real OpenLDAP (tests/accounts/
slapd.py): users and groups from the directory, staff from LDAP_STAFF_GROUP at each
sign-in, the login mapped to the scheduler's user name, axes counting wrong passwords, and
local accounts working whether or not the directory answers."""

import ldap as python_ldap
import pytest
from django.contrib.auth import get_user_model

from clusterui.accounts.ldap_config import ldap_config
from clusterui.accounts.views import DIRECTORY_DOWN
from clusterui.jobs.models import Job
from tests import rows
from tests.accounts import slapd as fixture
from tests.accounts.slapd import PASSWORDS

pytestmark = pytest.mark.django_db
WRONG = "Please enter a correct username and password"
BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend",
            "clusterui.accounts.ldap_backend.LDAPBackend"]


def configure(settings, uri, tmp_path, **extra):
    secret = tmp_path / "ldap-bind-password"
    secret.write_text(fixture.SERVICE_PASSWORD + "\n")
    settings.LDAP = ldap_config({
        "LDAP_SERVER_URI": uri, "LDAP_BIND_DN": fixture.SERVICE_DN,
        "LDAP_BIND_PASSWORD_FILE": str(secret), "LDAP_USER_SEARCH_BASE": fixture.PEOPLE,
        "LDAP_GROUP_SEARCH_BASE": fixture.GROUPS, "LDAP_STAFF_GROUP": "hpc-admins",
        "LDAP_TIMEOUT_S": "2", **extra})
    settings.AUTHENTICATION_BACKENDS = BACKENDS


@pytest.fixture
def ldap(settings, slapd, tmp_path, broker):  # `broker` empties the cache's Redis
    configure(settings, slapd, tmp_path)
    return slapd


def attempt(client, username, password):
    return client.post("/login/", {"username": username, "password": password},
                       REMOTE_ADDR="192.0.2.10")


def signed_in(response) -> bool:
    return response.status_code == 302 and response["Location"] == "/"


def set_staff_members(uri, members):
    conn = python_ldap.initialize(uri)
    try:
        conn.simple_bind_s(fixture.ROOT_DN, fixture.ROOT_PASSWORD)
        conn.modify_s(f"cn=hpc-admins,{fixture.GROUPS}",
                      [(python_ldap.MOD_REPLACE, "memberUid", [m.encode() for m in members])])
    finally:
        conn.unbind_s()


def test_a_directory_user_signs_in_and_sees_exactly_their_own_jobs(client, ldap):
    mine, _theirs = rows.job("alice"), rows.job("bob")
    assert signed_in(attempt(client, "alice", PASSWORDS["alice"]))
    alice = get_user_model().objects.get(username="alice")
    assert (alice.is_staff, alice.has_usable_password()) == (False, False)
    assert (alice.first_name, alice.last_name, alice.email) == (
        "Alice", "Archer", "alice@example.org")
    assert alice.directory_account.dn == f"uid=alice,{fixture.PEOPLE}"
    assert list(Job.objects.visible_to(alice)) == [mine]
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 200
    assert [j["user"] for j in response.json()["results"]] == ["alice"]


def test_staff_comes_from_the_group_and_goes_at_the_next_sign_in(client, ldap):
    rows.job("alice")
    try:
        assert signed_in(attempt(client, "bob", PASSWORDS["bob"]))
        bob = get_user_model().objects.get(username="bob")
        assert bob.is_staff and Job.objects.visible_to(bob).count() == 1
        client.logout()
        set_staff_members(ldap, [])
        assert signed_in(attempt(client, "bob", PASSWORDS["bob"]))
        bob.refresh_from_db()
        assert not bob.is_staff and Job.objects.visible_to(bob).count() == 0
    finally:
        set_staff_members(ldap, ["bob"])


def test_the_login_maps_to_the_scheduler_user(client, settings, slapd, tmp_path, broker):
    # Sign in with the email address; the scheduler knows the user by uid.
    configure(settings, slapd, tmp_path, LDAP_USER_FILTER="(mail={login})",
              LDAP_SCHEDULER_USER="{uid}")
    hers = rows.job("carol")
    rows.job("carol@example.org")
    assert signed_in(attempt(client, "carol@example.org", PASSWORDS["carol"]))
    carol = get_user_model().objects.get(username="carol@example.org")
    assert carol.directory_account.scheduler_user == "carol"
    assert list(Job.objects.visible_to(carol)) == [hers]


def test_a_leader_group_shows_the_accounts_jobs(client, settings, slapd, tmp_path, broker):
    configure(settings, slapd, tmp_path, LDAP_ACCOUNT_LEADER_GROUP_PREFIX="lead-")
    nlp, _vision = rows.job("alice", account="nlp"), rows.job("alice", account="vision")
    assert signed_in(attempt(client, "carol", PASSWORDS["carol"]))
    carol = get_user_model().objects.get(username="carol")
    assert carol.directory_account.led_accounts == ["nlp"]
    assert list(Job.objects.visible_to(carol)) == [nlp]
    assert [j["id"] for j in client.get("/api/v1/jobs/").json()["results"]] == [nlp.pk]
    client.logout()
    assert signed_in(attempt(client, "alice", PASSWORDS["alice"]))  # a member, no leader
    assert get_user_model().objects.get(username="alice").directory_account.led_accounts == []


def test_a_wrong_password_fails_as_usual_and_counts_toward_the_lockout(client, ldap):
    for _ in range(4):
        response = attempt(client, "alice", "guess")
        assert response.status_code == 200 and WRONG in response.content.decode()
    assert attempt(client, "alice", "guess").status_code == 429  # the fifth locks
    assert attempt(client, "alice", PASSWORDS["alice"]).status_code == 429
    assert "_auth_user_id" not in client.session


def test_an_empty_password_or_a_filter_injection_does_not_sign_in(client, ldap):
    assert attempt(client, "alice", "").status_code == 200
    response = attempt(client, "*", PASSWORDS["alice"])
    assert response.status_code == 200 and WRONG in response.content.decode()


def test_a_user_neither_in_the_directory_nor_local_fails(client, ldap):
    response = attempt(client, "mallory", "whatever-1")
    assert response.status_code == 200 and WRONG in response.content.decode()
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_local_accounts_keep_working_and_are_never_taken_over(client, ldap):
    User = get_user_model()
    User.objects.create_user("dave", password="local-password-1")
    User.objects.create_user("alice", password="local-password-2")  # a directory name too
    assert signed_in(attempt(client, "dave", "local-password-1"))
    client.logout()
    response = attempt(client, "alice", PASSWORDS["alice"])  # the directory's password
    assert response.status_code == 200 and WRONG in response.content.decode()
    assert signed_in(attempt(client, "alice", "local-password-2"))
    assert not hasattr(User.objects.get(username="alice"), "directory_account")


def test_directory_down_local_accounts_sign_in_and_directory_users_are_told(
        client, settings, tmp_path, broker):
    configure(settings, f"ldap://127.0.0.1:{fixture.free_port()}", tmp_path)
    get_user_model().objects.create_user("dave", password="local-password-1")
    response = attempt(client, "alice", PASSWORDS["alice"])
    assert response.status_code == 200
    assert DIRECTORY_DOWN in response.content.decode()
    assert signed_in(attempt(client, "dave", "local-password-1"))


def test_a_staff_group_given_by_its_dn(client, settings, slapd, tmp_path, broker):
    configure(settings, slapd, tmp_path, LDAP_STAFF_GROUP=f"cn=hpc-admins,{fixture.GROUPS}")
    assert signed_in(attempt(client, "bob", PASSWORDS["bob"]))
    assert get_user_model().objects.get(username="bob").is_staff
    client.logout()
    assert signed_in(attempt(client, "alice", PASSWORDS["alice"]))
    assert not get_user_model().objects.get(username="alice").is_staff


def test_filter_characters_in_a_login_are_only_a_wrong_login(client, ldap):
    for login in ("alice)(uid=*", "al%ice", "alice*", "\\2a"):
        response = attempt(client, login, PASSWORDS["alice"])
        assert response.status_code == 200 and WRONG in response.content.decode(), login


def test_the_login_in_another_case_is_the_same_user_and_scheduler_user(client, ldap):
    mine = rows.job("alice")
    assert signed_in(attempt(client, "Alice", PASSWORDS["alice"]))
    client.logout()
    assert signed_in(attempt(client, "alice", PASSWORDS["alice"]))
    alice = get_user_model().objects.get(username__iexact="alice")
    assert (alice.username, alice.directory_account.scheduler_user) == ("alice", "alice")
    assert list(Job.objects.visible_to(alice)) == [mine]


def test_an_entry_without_the_scheduler_users_attribute_cannot_sign_in(
        client, settings, slapd, tmp_path, broker):
    # The fixture's people have no employeeNumber: no scheduler name, so no user at all.
    configure(settings, slapd, tmp_path, LDAP_SCHEDULER_USER="{employeeNumber}")
    response = attempt(client, "alice", PASSWORDS["alice"])
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="alice").exists()


def test_a_failing_group_search_fails_the_sign_in_and_creates_no_user(
        client, settings, slapd, tmp_path, broker):
    # A group base that does not exist: slapd answers noSuchObject to the group search.
    configure(settings, slapd, tmp_path, LDAP_STAFF_GROUP="",
              LDAP_GROUP_SEARCH_BASE=f"ou=nowhere,{fixture.SUFFIX}",
              LDAP_ACCOUNT_LEADER_GROUP_PREFIX="lead-")
    response = attempt(client, "carol", PASSWORDS["carol"])
    assert response.status_code == 200 and DIRECTORY_DOWN in response.content.decode()
    assert not get_user_model().objects.filter(username="carol").exists()


def test_a_dn_template_binds_as_the_user_without_a_service_account(
        client, settings, slapd, tmp_path, broker):
    configure(settings, slapd, tmp_path, LDAP_USER_SEARCH_BASE="", LDAP_BIND_DN="",
              LDAP_USER_DN_TEMPLATE=f"uid={{login}},{fixture.PEOPLE}")
    assert signed_in(attempt(client, "bob", PASSWORDS["bob"]))
    bob = get_user_model().objects.get(username="bob")
    # Names and groups read as bob himself: the fixture lets only bound users read.
    assert (bob.first_name, bob.email, bob.is_staff) == ("Bob", "bob@example.org", True)
    assert bob.directory_account.dn == f"uid=bob,{fixture.PEOPLE}"
    client.logout()
    response = attempt(client, "alice", PASSWORDS["bob"])
    assert response.status_code == 200 and WRONG in response.content.decode()
    response = attempt(client, "mallory", "whatever-1")
    assert response.status_code == 200 and WRONG in response.content.decode()
