"""Sign-in with the site's OpenID Connect provider (Keycloak, Okta, ...), next to the local
accounts and LDAP, over mozilla-django-oidc's authorization code flow (with PKCE).

mozilla-django-oidc exchanges the code and fetches userinfo; this backend checks the ID
token itself, because the library checks only its signature and nonce: RS256 with a key
from the provider's JWKS, ``iss`` = OIDC_ISSUER, ``aud`` holding OIDC_CLIENT_ID (and
``azp`` naming it when there are several), ``exp`` not passed, ``iat`` present. A token
that fails any of these is refused with a message saying which (``Refused``), shown on the
sign-in page (clusterui/accounts/oidc_views.py).

Then the Django user is written as the LDAP backend writes it: found by the provider's
subject (``<issuer>#<sub>`` in DirectoryAccount), created on first sign-in with no usable
password under the login of OIDC_USERNAME_CLAIM, its names and email copied, ``is_staff``
from OIDC_STAFF_GROUP in the OIDC_GROUPS_CLAIM at every sign-in, the accounts led from the
groups named OIDC_ACCOUNT_LEADER_GROUP_PREFIX + account likewise, and the scheduler user
name from OIDC_SCHEDULER_USER. A login that names a local (or LDAP) account is refused: the
provider never takes an account over.
"""

import logging

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from clusterui.accounts import oidc_discovery
from clusterui.accounts.choices import AccountSource
from clusterui.accounts.models import DirectoryAccount
from clusterui.accounts.oidc_config import USER_CLAIMS

log = logging.getLogger(__name__)


class Refused(Exception):
    """A sign-in the provider vouched for, or tried to, that ClusterUI will not accept; the
    message is for the person signing in."""


def _endpoint(attr):
    return property(lambda self: oidc_discovery.setting(attr))


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def groups(claims: dict, claim: str) -> set[str]:
    value = claims.get(claim)
    if isinstance(value, str):  # one group, or a space-separated list (some providers)
        return set(value.split())
    if isinstance(value, list | tuple):
        return {str(group) for group in value}
    return set()


def scheduler_user(config: dict, login: str, claims: dict) -> str:
    values = {k: v for k, v in claims.items() if isinstance(v, str | int)}
    try:
        name = config["SCHEDULER_USER"].format(**{**values, "login": login}).strip()
    except KeyError as exc:
        raise Refused(f"The identity provider sent no {exc.args[0]} claim, which "
                      "OIDC_SCHEDULER_USER needs; ask an administrator.") from None
    if not name:
        raise Refused("OIDC_SCHEDULER_USER gives an empty scheduler user name for you; ask an "
                      "administrator.")
    return name


def not_a_password_attempt(request, credentials) -> bool:
    """django-axes' AXES_WHITELIST_CALLABLE: an OpenID Connect callback (the only caller of
    ``authenticate`` with a ``nonce``) is neither counted nor locked. It guesses no password
    here (the provider checked it, behind its own limits), and with no user name axes would
    count every refused token against the address alone, locking everyone behind it out of
    single sign-on after five."""
    return "nonce" in (credentials or {})


class OIDCBackend(OIDCAuthenticationBackend):
    # Read at sign-in, not when Django loads the backend (at every request's get_user and
    # every password sign-in), so nothing here talks to the provider until it is used.
    OIDC_OP_TOKEN_ENDPOINT = _endpoint("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = _endpoint("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = _endpoint("OIDC_OP_JWKS_ENDPOINT")
    OIDC_RP_CLIENT_ID = _endpoint("OIDC_RP_CLIENT_ID")
    OIDC_RP_CLIENT_SECRET = _endpoint("OIDC_RP_CLIENT_SECRET")
    OIDC_RP_SIGN_ALGO = "RS256"
    OIDC_RP_IDP_SIGN_KEY = None

    def __init__(self, *args, **kwargs):
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr, *args):
        return oidc_discovery.setting(attr, *args)

    def get_user(self, user_id):
        """Django's: a user made inactive is signed out at their next request
        (mozilla-django-oidc's own returns inactive users too)."""
        return ModelBackend.get_user(self, user_id)

    def authenticate(self, request, **kwargs):
        """Only the callback's call (it passes ``nonce``); never a password sign-in."""
        if (not settings.OIDC or request is None or "nonce" not in kwargs
                or "username" in kwargs or "password" in kwargs):
            return None
        try:
            return super().authenticate(request, **kwargs)
        except Refused as exc:
            log.warning("OIDC: refused a sign-in: %s", exc)
            request.oidc_refused = str(exc)
        except oidc_discovery.ProviderUnavailable as exc:
            log.error("OIDC: the provider's discovery failed: %s", exc)
            request.oidc_refused = oidc_discovery.message(exc)
        except requests.HTTPError as exc:
            log.error("OIDC: the provider refused a request: %s", exc)
            request.oidc_refused = ("The identity provider refused to complete the sign-in "
                                    f"({_provider_error(exc.response)}). Try again; if it "
                                    "goes on, ask an administrator.")
        except requests.RequestException as exc:
            log.error("OIDC: cannot reach the provider: %s", exc)
            request.oidc_refused = oidc_discovery.DOWN
        except SuspiciousOperation as exc:  # mozilla-django-oidc's own checks (JWKS, claims)
            log.warning("OIDC: refused a sign-in: %s", exc)
            request.oidc_refused = f"The sign-in was refused: {exc}"
        return None

    def verify_token(self, token, **kwargs):
        config = settings.OIDC
        try:
            key = self.retrieve_matching_jwk(token)
        except (jwt.InvalidTokenError, KeyError, SuspiciousOperation):
            raise Refused("The sign-in was refused: the token is not signed with any of the "
                          "identity provider's keys.") from None
        try:
            payload = jwt.decode(
                token, key, algorithms=["RS256"], audience=config["CLIENT_ID"],
                issuer=config["ISSUER"], leeway=config["LEEWAY_S"],
                options={"require": ["exp", "iat", "iss", "aud", "sub"]})
        except jwt.ExpiredSignatureError:
            raise Refused("The sign-in was refused: the identity provider's token has "
                          "expired. Try again; if it goes on, this server's clock may be "
                          "wrong.") from None
        except jwt.InvalidAudienceError:
            raise Refused("The sign-in was refused: the identity provider's token was "
                          f"issued for another application, not for ClusterUI (client "
                          f"{config['CLIENT_ID']}).") from None
        except jwt.InvalidIssuerError:
            raise Refused("The sign-in was refused: the token was issued by another "
                          "identity provider than this server's (OIDC_ISSUER).") from None
        except jwt.InvalidSignatureError:
            raise Refused("The sign-in was refused: the token's signature does not match "
                          "the identity provider's keys.") from None
        except jwt.InvalidTokenError as exc:
            raise Refused(f"The sign-in was refused: the identity provider's token is not "
                          f"valid ({exc}).") from None
        audience = payload["aud"]
        if isinstance(audience, list) and len(audience) > 1 and (
                payload.get("azp") != config["CLIENT_ID"]):
            raise Refused("The sign-in was refused: the identity provider's token was "
                          "issued to another application (azp).")
        if payload.get("nonce") != kwargs.get("nonce"):
            raise Refused("The sign-in was refused: the answer does not belong to this "
                          "browser's sign-in (nonce). Start again.")
        return payload

    def get_or_create_user(self, access_token, id_token, payload):
        config = settings.OIDC
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload["sub"]:  # Core 1.0, 5.3.2: MUST match
            raise Refused("The sign-in was refused: the identity provider's user "
                          "information is about someone else than its token.")
        claims = {**payload, **userinfo}
        login = _text(claims.get(config["USERNAME_CLAIM"])).strip()
        if not login or len(login) > 150:
            raise Refused(f"The identity provider sent no usable {config['USERNAME_CLAIM']} "
                          "claim (OIDC_USERNAME_CLAIM) to name your account; ask an "
                          "administrator.")
        identity = f"{config['ISSUER']}#{payload['sub']}"
        try:
            user = self._sync(config, login, identity, claims,
                              scheduler_user(config, login, claims))
        except IntegrityError:  # the same person's first sign-in twice at once
            raise Refused("Another sign-in for you was being recorded at the same moment. "
                          "Try again.") from None
        if not self.user_can_authenticate(user):
            raise Refused(f"The account {login} is disabled here; ask an administrator.")
        return user

    @transaction.atomic
    def _sync(self, config, login, identity, claims, scheduler_name):
        User = self.UserModel
        account = (DirectoryAccount.objects.select_for_update().select_related("user")
                   .filter(source=AccountSource.OIDC, dn=identity).first())
        holder = User._default_manager.filter(**{User.USERNAME_FIELD: login}).first()
        if account is None and holder is not None:
            raise Refused(f"An account named {login} already exists here and is not linked to "
                          "your identity at the provider, so it cannot sign in this way. Sign "
                          "in with its password, or ask an administrator.")
        if account is not None and holder is not None and holder != account.user:
            raise Refused(f"The identity provider now calls you {login}, a name another "
                          "account here has; ask an administrator.")
        if account is None:
            user = User._default_manager.create(**{User.USERNAME_FIELD: login})
            user.set_unusable_password()
        else:
            user = account.user
            setattr(user, User.USERNAME_FIELD, login)  # renamed at the provider
        for field, claim in USER_CLAIMS.items():
            setattr(user, field, _text(claims.get(claim))[:150])
        member_of = groups(claims, config["GROUPS_CLAIM"])
        if config["STAFF_GROUP"]:
            user.is_staff = config["STAFF_GROUP"] in member_of
        user.save()
        prefix = config["ACCOUNT_LEADER_GROUP_PREFIX"]
        led = sorted(g[len(prefix):] for g in member_of
                     if prefix and g.startswith(prefix) and len(g) > len(prefix))
        DirectoryAccount.objects.update_or_create(
            user=user, defaults={"source": AccountSource.OIDC, "dn": identity[:512],
                                 "scheduler_user": scheduler_name[:64],
                                 "led_accounts": led})
        return user


def _provider_error(response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return f"HTTP {response.status_code}"
    detail = body.get("error_description")
    return f"{body['error']}: {detail}"[:200] if isinstance(detail, str) else body["error"]

