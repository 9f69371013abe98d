"""LDAP sign-in's settings: off unless LDAP_SERVER_URI is set, and a precise message for
each mistake (clusterui/accounts/ldap_config.py)."""

import ldap as python_ldap
import pytest
from django.core.exceptions import ImproperlyConfigured

from clusterui.accounts.ldap_config import auth_ldap_settings, ldap_config

BASE = {"LDAP_SERVER_URI": "ldap://ldap.example.org",
        "LDAP_USER_SEARCH_BASE": "ou=people,dc=example,dc=org"}


def test_off_unless_the_uri_is_set():
    assert ldap_config({}) is None
    assert ldap_config({"LDAP_USER_SEARCH_BASE": "ou=people,dc=example,dc=org"}) is None


def test_the_defaults_and_the_bind_password_from_a_file(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    config = ldap_config({**BASE, "LDAP_BIND_DN": "cn=clusterui,dc=example,dc=org",
                          "LDAP_BIND_PASSWORD_FILE": str(secret)})
    assert config["BIND_PASSWORD"] == "s3cret"
    assert (config["USER_FILTER"], config["SCHEDULER_USER"], config["START_TLS"]) == (
        "(uid={login})", "{login}", False)


@pytest.mark.parametrize("environ, message", [
    ({"LDAP_SERVER_URI": "ldap://ldap.example.org"},
     "LDAP_USER_SEARCH_BASE is required when LDAP_SERVER_URI is set: the subtree holding "
     "the users, e.g. ou=people,dc=example,dc=org"),
    ({**BASE, "LDAP_SERVER_URI": "https://ldap.example.org"},
     "LDAP_SERVER_URI must be ldap://host[:port] or ldaps://host[:port], got "
     "'https://ldap.example.org'"),
    ({**BASE, "LDAP_USER_FILTER": "(uid=alice)"},
     "LDAP_USER_FILTER must hold {login} once and nothing else in braces, e.g. "
     "(uid={login}), got '(uid=alice)'"),
    ({**BASE, "LDAP_STAFF_GROUP": "hpc-admins"},
     "LDAP_STAFF_GROUP needs LDAP_GROUP_SEARCH_BASE"),
    ({**BASE, "LDAP_BIND_DN": "cn=clusterui,dc=example,dc=org"},
     "LDAP_BIND_DN is set but LDAP_BIND_PASSWORD (or LDAP_BIND_PASSWORD_FILE) is not"),
    ({**BASE, "LDAP_BIND_DN": "cn=x", "LDAP_BIND_PASSWORD_FILE": "/nonexistent/pw"},
     "LDAP_BIND_PASSWORD_FILE: cannot read '/nonexistent/pw'"),
    ({**BASE, "LDAP_SERVER_URI": "ldaps://ldap.example.org", "LDAP_START_TLS": "1"},
     "LDAP_START_TLS is for ldap:// URIs"),
    ({**BASE, "LDAP_START_TLS": "maybe"}, "LDAP_START_TLS must be a boolean"),
    ({**BASE, "LDAP_SCHEDULER_USER": "hpc"}, "LDAP_SCHEDULER_USER must hold a placeholder"),
    ({**BASE, "LDAP_GROUP_FILTER": "(member={uid})"},
     "LDAP_GROUP_FILTER may only hold {login} and {dn}"),
    ({**BASE, "LDAP_TIMEOUT_S": "0"}, "LDAP_TIMEOUT_S must be at least 1"),
    ({**BASE, "LDAP_ACCOUNT_LEADER_GROUP_PREFIX": "lead-"},
     "LDAP_ACCOUNT_LEADER_GROUP_PREFIX needs LDAP_GROUP_SEARCH_BASE"),
])
def test_a_mistake_is_named(environ, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        ldap_config(environ)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize("environ, message", [
    ({**BASE, "LDAP_GROUP_SEARCH_BASE": "ou=groups,dc=example,dc=org",
      "LDAP_STAFF_GROUP": "cn=hpc-admins,broken"},
     "LDAP_STAFF_GROUP must be a group's cn (e.g. hpc-admins) or its full DN"),
    ({**BASE, "LDAP_CA_FILE": "/nonexistent/ca.pem"},
     "LDAP_CA_FILE: cannot read '/nonexistent/ca.pem'"),
    ({**BASE, "LDAP_USER_DN_TEMPLATE": "uid={login},ou=people,dc=example,dc=org"},
     "LDAP_USER_DN_TEMPLATE and LDAP_USER_SEARCH_BASE are two ways to find the user's "
     "entry: set one of them"),
    ({"LDAP_SERVER_URI": "ldap://ldap.example.org", "LDAP_USER_DN_TEMPLATE": "uid=alice"},
     "LDAP_USER_DN_TEMPLATE must be a DN holding {login} once, e.g. "
     "uid={login},ou=people,dc=example,dc=org, got 'uid=alice'"),
    ({"LDAP_SERVER_URI": "ldap://ldap.example.org", "LDAP_USER_DN_TEMPLATE": "{login}"},
     "LDAP_USER_DN_TEMPLATE must be a DN holding {login} once"),
])
def test_a_mistake_in_a_newer_setting_is_named(environ, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        ldap_config(environ)
    assert str(raised.value).startswith(message)


def test_starttls_always_verifies_the_servers_certificate_against_the_ca_file(tmp_path):
    # django-auth-ldap's AUTH_LDAP_CONNECTION_OPTIONS are python-ldap's set_option calls.
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = auth_ldap_settings(ldap_config({**BASE, "LDAP_START_TLS": "1",
                                               "LDAP_CA_FILE": str(ca)}))
    assert settings["START_TLS"] is True
    options = settings["CONNECTION_OPTIONS"]
    assert options[python_ldap.OPT_X_TLS_REQUIRE_CERT] == python_ldap.OPT_X_TLS_DEMAND
    assert options[python_ldap.OPT_X_TLS_CACERTFILE] == str(ca)
    # NEWCTX applies the TLS options set before it, so it must come last.
    assert list(options)[-1] == python_ldap.OPT_X_TLS_NEWCTX
    plain = auth_ldap_settings(ldap_config(BASE))["CONNECTION_OPTIONS"]
    assert python_ldap.OPT_X_TLS_REQUIRE_CERT not in plain


def test_a_staff_group_by_name_lies_under_the_group_base():
    config = ldap_config({**BASE, "LDAP_GROUP_SEARCH_BASE": "ou=groups,dc=example,dc=org",
                          "LDAP_STAFF_GROUP": "hpc admins+"})
    assert auth_ldap_settings(config)["USER_FLAGS_BY_GROUP"] == {
        "is_staff": r"cn=hpc admins\+,ou=groups,dc=example,dc=org"}
