"""The provider's endpoints, from its discovery document (OpenID Connect Discovery 1.0,
section 4: ``<issuer>/.well-known/openid-configuration``), and mozilla-django-oidc's
settings built from OIDC_* (clusterui/accounts/oidc_config.py) and that document.

The document is fetched at the first sign-in and kept for an hour in this process; a
provider that cannot be reached raises ``ProviderUnavailable`` with a message for the
sign-in page. The ``issuer`` it declares must be OIDC_ISSUER exactly (Discovery 1.0, 4.3).
"""

import threading
import time

import requests
from django.conf import settings
from mozilla_django_oidc.utils import import_from_settings

KEEP_S = 3600
_ENDPOINTS = {"OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
              "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
              "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
              "OIDC_OP_JWKS_ENDPOINT": "jwks_uri"}
_cache: dict[str, tuple[float, dict]] = {}
_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider's discovery document cannot be had."""


class ProviderMismatch(ProviderUnavailable):
    """The discovery document is not one ClusterUI can use: another issuer, no endpoints."""


DOWN = ("The identity provider cannot be reached, so single sign-on is not available just "
        "now; local accounts can still sign in. Try again in a few minutes.")
MISCONFIGURED = ("Single sign-on is misconfigured: the identity provider does not answer as "
                 "OIDC_ISSUER says it should (see the server's log). Local accounts can "
                 "still sign in; tell an administrator.")


def message(exc: ProviderUnavailable) -> str:
    """The sentence for the sign-in page."""
    return MISCONFIGURED if isinstance(exc, ProviderMismatch) else DOWN


def verify(config: dict):
    """What requests' ``verify`` takes: the CA bundle, or True for the system's."""
    return config["CA_FILE"] or True


def metadata(config: dict) -> dict:
    issuer = config["ISSUER"]
    with _lock:
        kept = _cache.get(issuer)
        if kept and time.monotonic() - kept[0] < KEEP_S:
            return kept[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=config["TIMEOUT_S"], verify=verify(config))
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"cannot read {url}: {exc}") from exc
    if not isinstance(document, dict) or document.get("issuer") != issuer:
        declared = document.get("issuer") if isinstance(document, dict) else None
        raise ProviderMismatch(f"{url} declares the issuer {declared!r}, not OIDC_ISSUER "
                                  f"{issuer!r}")
    missing = [key for key in _ENDPOINTS.values() if not document.get(key)]
    if missing:
        raise ProviderMismatch(f"{url} names no {', '.join(missing)}")
    with _lock:
        _cache[issuer] = (time.monotonic(), document)
    return document


def forget() -> None:
    """Drop the kept documents (tests; a provider that moved its endpoints)."""
    with _lock:
        _cache.clear()


def setting(attr: str, *default):
    """mozilla-django-oidc's ``get_settings``: its OIDC_RP_* / OIDC_OP_* settings from
    ClusterUI's OIDC_* variables and the discovery document; any other from Django's."""
    config = settings.OIDC
    if config:
        if attr in _ENDPOINTS:
            return metadata(config)[_ENDPOINTS[attr]]
        fixed = {
            "OIDC_RP_CLIENT_ID": config["CLIENT_ID"],
            "OIDC_RP_CLIENT_SECRET": config["CLIENT_SECRET"],
            "OIDC_RP_SCOPES": " ".join(config["SCOPES"]),
            "OIDC_RP_SIGN_ALGO": "RS256",
            "OIDC_USE_PKCE": True,
            "OIDC_VERIFY_SSL": verify(config),
            "OIDC_TIMEOUT": config["TIMEOUT_S"],
            # The ID token is kept in the session for the provider's sign-out (its hint).
            "OIDC_STORE_ID_TOKEN": config["SIGN_OUT_AT_PROVIDER"],
        }
        if attr in fixed:
            return fixed[attr]
    return import_from_settings(attr, *default)
