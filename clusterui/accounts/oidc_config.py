"""OpenID Connect sign-in's settings, from the environment (docs/operations.md, "OpenID
Connect sign-in").

Off unless ``OIDC_ISSUER`` is set. Then ``OIDC_CLIENT_ID`` and ``OIDC_CLIENT_SECRET`` are
required, and every other value is checked here, so a deployment with a typo stops at
start-up with a message naming the variable instead of failing at someone's sign-in. The
provider's endpoints and keys are read from its discovery document at the first sign-in
(clusterui/accounts/oidc_discovery.py), not here: the server starts while the provider is
down, and local accounts keep working.
"""

import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from clusterui.accounts.ldap_config import placeholders
from clusterui.envconfig import env_bool, env_int, env_list, env_str

# The claims copied to the Django user at each sign-in (OpenID Connect Core 1.0, 5.1).
USER_CLAIMS = {"first_name": "given_name", "last_name": "family_name", "email": "email"}
_CLAIM = re.compile(r"^[A-Za-z0-9_:.\-/]+$")


def _claim(name: str, default: str, environ) -> str:
    value = env_str(name, default, environ=environ).strip()
    if not _CLAIM.match(value):
        raise ImproperlyConfigured(f"{name} must be a claim name such as {default!r}, "
                                   f"got {value!r}")
    return value


def oidc_config(environ=None) -> dict | None:
    issuer = env_str("OIDC_ISSUER", "", environ=environ).strip().rstrip("/")
    if not issuer:
        return None
    parts = urlsplit(issuer)
    insecure = env_bool("OIDC_ALLOW_HTTP", False, environ=environ)
    if parts.scheme not in ({"https", "http"} if insecure else {"https"}) or not parts.hostname:
        raise ImproperlyConfigured(
            "OIDC_ISSUER must be the provider's https:// issuer URL, e.g. "
            f"https://keycloak.example.org/realms/hpc, got {issuer!r}"
            + ("" if insecure or parts.scheme != "http" else
               " (plain http only with OIDC_ALLOW_HTTP=1, for a provider on this host)"))
    if parts.query or parts.fragment:
        raise ImproperlyConfigured(f"OIDC_ISSUER has no query or fragment, got {issuer!r}")
    client_id = env_str("OIDC_CLIENT_ID", "", environ=environ).strip()
    if not client_id:
        raise ImproperlyConfigured(
            "OIDC_CLIENT_ID is required when OIDC_ISSUER is set: the client ClusterUI is "
            "registered as at the provider")
    client_secret = env_str("OIDC_CLIENT_SECRET", "", environ=environ).strip()
    if not client_secret:
        raise ImproperlyConfigured(
            "OIDC_CLIENT_SECRET (or OIDC_CLIENT_SECRET_FILE) is required when OIDC_ISSUER "
            "is set: the confidential client's secret")
    scopes = env_list("OIDC_SCOPES", ["openid", "email", "profile"], environ=environ)
    if "openid" not in scopes:
        raise ImproperlyConfigured(
            f"OIDC_SCOPES must include openid (comma-separated), got {','.join(scopes)!r}")
    staff_group = env_str("OIDC_STAFF_GROUP", "", environ=environ).strip()
    scheduler_user = env_str("OIDC_SCHEDULER_USER", "{login}", environ=environ).strip()
    if not placeholders("OIDC_SCHEDULER_USER", scheduler_user):
        raise ImproperlyConfigured(
            f"OIDC_SCHEDULER_USER must hold a placeholder ({{login}} or a claim such as "
            f"{{preferred_username}}), got {scheduler_user!r}")
    return {
        "ISSUER": issuer,
        "CLIENT_ID": client_id,
        "CLIENT_SECRET": client_secret,
        # The button on the sign-in page: "Sign in with <PROVIDER_NAME>".
        "PROVIDER_NAME": env_str("OIDC_PROVIDER_NAME", "single sign-on",
                                 environ=environ).strip() or "single sign-on",
        "SCOPES": scopes,
        "USERNAME_CLAIM": _claim("OIDC_USERNAME_CLAIM", "preferred_username", environ),
        "GROUPS_CLAIM": _claim("OIDC_GROUPS_CLAIM", "groups", environ),
        "STAFF_GROUP": staff_group,
        # A member of the group <prefix><account> leads that account (sees all its jobs),
        # as LDAP_ACCOUNT_LEADER_GROUP_PREFIX; read from the groups claim at each sign-in.
        "ACCOUNT_LEADER_GROUP_PREFIX": env_str("OIDC_ACCOUNT_LEADER_GROUP_PREFIX", "",
                                               environ=environ).strip(),
        "SCHEDULER_USER": scheduler_user,
        # Signing out of ClusterUI also ends the session at the provider (RP-initiated
        # logout): the browser is sent to its end_session_endpoint, and comes back to the
        # sign-in page. Off: signing out ends ClusterUI's session only.
        "SIGN_OUT_AT_PROVIDER": env_bool("OIDC_SIGN_OUT_AT_PROVIDER", False, environ=environ),
        # Verify the provider's certificate against this CA bundle, or the system's.
        "CA_FILE": env_str("OIDC_CA_FILE", "", environ=environ).strip(),
        "TIMEOUT_S": env_int("OIDC_TIMEOUT_S", 5, minimum=1, maximum=60, environ=environ),
        # How far the ID token's clock may be from ours (exp, iat), in seconds.
        "LEEWAY_S": env_int("OIDC_LEEWAY_S", 30, minimum=0, maximum=300, environ=environ),
    }
