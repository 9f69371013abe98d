"""LDAP sign-in's settings, from the environment (docs/operations.md, "LDAP sign-in").

Off unless ``LDAP_SERVER_URI`` is set. Then ``LDAP_USER_SEARCH_BASE`` is required, and
every other value is checked here, so a deployment with a typo stops at start-up with a
message naming the variable instead of failing at someone's sign-in.

``ldap_config`` reads and checks the ``LDAP_*`` variables; ``auth_ldap_settings`` maps
them onto django-auth-ldap's ``AUTH_LDAP_*`` settings, which
clusterui/accounts/ldap_backend.py hands to django-auth-ldap's LDAPBackend.
"""

import os
import string
from urllib.parse import urlsplit

import ldap
from django.core.exceptions import ImproperlyConfigured
from django_auth_ldap.config import LDAPSearch
from ldap import dn

from clusterui.accounts.ldap_groups import FilterGroupType
from clusterui.envconfig import env_bool, env_int, env_str

# The directory attributes copied to the Django user at each sign-in.
USER_ATTRIBUTES = {"first_name": "givenName", "last_name": "sn", "email": "mail"}


def placeholders(name: str, template: str) -> list[str]:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc} in {template!r}") from None
    if any(not f or not f.replace("-", "").replace("_", "").isalnum() for f in fields):
        raise ImproperlyConfigured(
            f"{name} may only hold {{login}}, {{dn}} or {{attribute}} placeholders, got "
            f"{template!r}")
    return fields


def ldap_config(environ=None) -> dict | None:
    uri = env_str("LDAP_SERVER_URI", "", environ=environ).strip()
    if not uri:
        return None
    scheme = urlsplit(uri).scheme
    if scheme not in {"ldap", "ldaps"} or not urlsplit(uri).hostname:
        raise ImproperlyConfigured(
            f"LDAP_SERVER_URI must be ldap://host[:port] or ldaps://host[:port], got {uri!r}")
    search_base = env_str("LDAP_USER_SEARCH_BASE", "", environ=environ).strip()
    dn_template = env_str("LDAP_USER_DN_TEMPLATE", "", environ=environ).strip()
    if dn_template:
        if search_base:
            raise ImproperlyConfigured(
                "LDAP_USER_DN_TEMPLATE and LDAP_USER_SEARCH_BASE are two ways to find the "
                "user's entry: set one of them")
        if (placeholders("LDAP_USER_DN_TEMPLATE", dn_template) != ["login"]
                or not dn.is_dn(dn_template.format(login="x"))):
            raise ImproperlyConfigured(
                f"LDAP_USER_DN_TEMPLATE must be a DN holding {{login}} once, e.g. "
                f"uid={{login}},ou=people,dc=example,dc=org, got {dn_template!r}")
    elif not search_base:
        raise ImproperlyConfigured(
            "LDAP_USER_SEARCH_BASE is required when LDAP_SERVER_URI is set: the subtree "
            "holding the users, e.g. ou=people,dc=example,dc=org (or LDAP_USER_DN_TEMPLATE, "
            "e.g. uid={login},ou=people,dc=example,dc=org, to bind without a search)")
    user_filter = env_str("LDAP_USER_FILTER", "(uid={login})", environ=environ).strip()
    if placeholders("LDAP_USER_FILTER", user_filter) != ["login"]:
        raise ImproperlyConfigured(
            f"LDAP_USER_FILTER must hold {{login}} once and nothing else in braces, e.g. "
            f"(uid={{login}}), got {user_filter!r}")
    group_base = env_str("LDAP_GROUP_SEARCH_BASE", "", environ=environ).strip()
    group_filter = env_str(
        "LDAP_GROUP_FILTER", "(|(memberUid={login})(member={dn})(uniqueMember={dn}))",
        environ=environ).strip()
    if not set(placeholders("LDAP_GROUP_FILTER", group_filter)) <= {"login", "dn"}:
        raise ImproperlyConfigured(
            f"LDAP_GROUP_FILTER may only hold {{login}} and {{dn}}, got {group_filter!r}")
    staff_group = env_str("LDAP_STAFF_GROUP", "", environ=environ).strip()
    if staff_group and not group_base:
        raise ImproperlyConfigured(
            "LDAP_STAFF_GROUP needs LDAP_GROUP_SEARCH_BASE: the subtree holding the groups, "
            "e.g. ou=groups,dc=example,dc=org")
    if "=" in staff_group and not dn.is_dn(staff_group):
        raise ImproperlyConfigured(
            f"LDAP_STAFF_GROUP must be a group's cn (e.g. hpc-admins) or its full DN (e.g. "
            f"cn=hpc-admins,ou=groups,dc=example,dc=org), got {staff_group!r}")
    leader_prefix = env_str("LDAP_ACCOUNT_LEADER_GROUP_PREFIX", "", environ=environ).strip()
    if leader_prefix and not group_base:
        raise ImproperlyConfigured(
            "LDAP_ACCOUNT_LEADER_GROUP_PREFIX needs LDAP_GROUP_SEARCH_BASE: the subtree "
            "holding the groups, e.g. ou=groups,dc=example,dc=org")
    scheduler_user = env_str("LDAP_SCHEDULER_USER", "{login}", environ=environ).strip()
    if not placeholders("LDAP_SCHEDULER_USER", scheduler_user):
        raise ImproperlyConfigured(
            f"LDAP_SCHEDULER_USER must hold a placeholder ({{login}} or a directory "
            f"attribute such as {{uid}}), got {scheduler_user!r}")
    start_tls = env_bool("LDAP_START_TLS", False, environ=environ)
    if start_tls and scheme == "ldaps":
        raise ImproperlyConfigured(
            "LDAP_START_TLS is for ldap:// URIs; an ldaps:// URI is TLS from the start")
    ca_file = env_str("LDAP_CA_FILE", "", environ=environ).strip()
    if ca_file and not os.access(ca_file, os.R_OK):
        raise ImproperlyConfigured(f"LDAP_CA_FILE: cannot read {ca_file!r}")
    bind_dn = env_str("LDAP_BIND_DN", "", environ=environ).strip()
    bind_password = env_str("LDAP_BIND_PASSWORD", "", environ=environ)
    if bind_dn and not bind_password:
        raise ImproperlyConfigured(
            "LDAP_BIND_DN is set but LDAP_BIND_PASSWORD (or LDAP_BIND_PASSWORD_FILE) is not")
    return {
        "SERVER_URI": uri,
        "START_TLS": start_tls,
        # Verify the server's certificate (ldaps:// or StartTLS) against this CA bundle, or
        # the system's when empty.
        "CA_FILE": ca_file,
        "BIND_DN": bind_dn,
        "BIND_PASSWORD": bind_password,
        "USER_SEARCH_BASE": search_base,
        # Instead of the search: the user's DN from the login, bound as directly.
        "USER_DN_TEMPLATE": dn_template,
        "USER_FILTER": user_filter,
        "GROUP_SEARCH_BASE": group_base,
        "GROUP_FILTER": group_filter,
        "STAFF_GROUP": staff_group,
        # A member of the group <prefix><account> leads that account: sees all its jobs.
        "ACCOUNT_LEADER_GROUP_PREFIX": leader_prefix,
        "SCHEDULER_USER": scheduler_user,
        "TIMEOUT_S": env_int("LDAP_TIMEOUT_S", 5, minimum=1, maximum=60,
                               environ=environ),
    }


def _percent_template(template: str, **names: str) -> str:
    """A ``{login}``-style template (checked above) as the ``%(user)s``-style one that
    django-auth-ldap's LDAPSearch fills in, escaping each value for a filter."""
    return template.replace("%", "%%").format(**{k: f"%({v})s" for k, v in names.items()})


def staff_group_dn(config: dict) -> str:
    """LDAP_STAFF_GROUP as a DN: a DN as given, a bare name as ``cn=<name>`` directly under
    LDAP_GROUP_SEARCH_BASE."""
    group = config["STAFF_GROUP"]
    if "=" in group:
        return group
    return f"cn={dn.escape_dn_chars(group)},{config['GROUP_SEARCH_BASE']}"


def auth_ldap_settings(config: dict) -> dict:
    """django-auth-ldap's settings (without their ``AUTH_LDAP_`` prefix) for a checked
    ``ldap_config``."""
    options = {ldap.OPT_NETWORK_TIMEOUT: config["TIMEOUT_S"], ldap.OPT_TIMEOUT: config["TIMEOUT_S"],
               ldap.OPT_REFERRALS: 0}
    if config["START_TLS"] or config["SERVER_URI"].startswith("ldaps://"):
        options[ldap.OPT_X_TLS_REQUIRE_CERT] = ldap.OPT_X_TLS_DEMAND
        if config["CA_FILE"]:
            options[ldap.OPT_X_TLS_CACERTFILE] = config["CA_FILE"]
        options[ldap.OPT_X_TLS_NEWCTX] = 0  # last: applies the TLS options above
    attributes = sorted({*USER_ATTRIBUTES.values(),
                         *(f for f in placeholders("LDAP_SCHEDULER_USER", config["SCHEDULER_USER"])
                           if f not in ("login", "dn"))})
    values = {
        "SERVER_URI": config["SERVER_URI"],
        "START_TLS": config["START_TLS"],
        "CONNECTION_OPTIONS": options,
        "BIND_DN": config["BIND_DN"],
        "BIND_PASSWORD": config["BIND_PASSWORD"] if config["BIND_DN"] else "",
        "USER_ATTR_MAP": dict(USER_ATTRIBUTES),
        "ALWAYS_UPDATE_USER": True,
        "PERMIT_EMPTY_PASSWORD": False,
        "CACHE_TIMEOUT": 0,
    }
    if config["USER_DN_TEMPLATE"]:
        values["USER_DN_TEMPLATE"] = _percent_template(config["USER_DN_TEMPLATE"], login="user")
        # Read the user's attributes and groups as the user, without a service account.
        values["BIND_AS_AUTHENTICATING_USER"] = not config["BIND_DN"]
        values["USER_ATTRLIST"] = attributes
    else:
        values["USER_SEARCH"] = LDAPSearch(
            config["USER_SEARCH_BASE"], ldap.SCOPE_SUBTREE,
            _percent_template(config["USER_FILTER"], login="user"), attributes)
    if config["GROUP_SEARCH_BASE"]:
        values["GROUP_SEARCH"] = LDAPSearch(config["GROUP_SEARCH_BASE"], ldap.SCOPE_SUBTREE,
                                            "(objectClass=*)", ["cn"])
        values["GROUP_TYPE"] = FilterGroupType(
            _percent_template(config["GROUP_FILTER"], login="login", dn="dn"))
    if config["STAFF_GROUP"]:
        values["USER_FLAGS_BY_GROUP"] = {"is_staff": staff_group_dn(config)}
    return values
