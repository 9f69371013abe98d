"""LDAP sign-in's settings, from the environment (docs/operations.md, "LDAP sign-in").

Off unless ``LDAP_SERVER_URI`` is set. Then ``LDAP_USER_SEARCH_BASE`` is required, and
every other value is checked here, so a deployment with a typo stops at start-up with a
message naming the variable instead of failing at someone's sign-in.
"""

import string
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

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
    if not search_base:
        raise ImproperlyConfigured(
            "LDAP_USER_SEARCH_BASE is required when LDAP_SERVER_URI is set: the subtree "
            "holding the users, e.g. ou=people,dc=example,dc=org")
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
        "CA_FILE": env_str("LDAP_CA_FILE", "", environ=environ).strip(),
        "BIND_DN": bind_dn,
        "BIND_PASSWORD": bind_password,
        "USER_SEARCH_BASE": search_base,
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
