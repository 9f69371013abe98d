"""API keys: made once, shown once, stored as a hash, checked on every API request.

A key looks like ``cui_<40 url-safe characters>`` (240 random bits). It is sent as
``Authorization: Token <key>`` (or ``Bearer <key>``). Because keys are long and random, a
plain SHA-256 is the right hash: there is nothing to brute-force, and the lookup stays
one indexed query.
"""

import datetime as dt
import hashlib
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions

from clusterui.api.models import ApiToken

KEY_PREFIX = "cui_"
SHOWN_PREFIX_LEN = len(KEY_PREFIX) + 8
# last_used_at is written at most this often per token: not one UPDATE per request.
LAST_USED_RESOLUTION = dt.timedelta(seconds=60)
KEYWORDS = (b"token", b"bearer")


class TokenLimitReached(Exception):
    pass


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_token(user, name: str) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns it with its key, which is not stored anywhere."""
    with transaction.atomic():
        # Lock the user's row so two concurrent creations cannot both pass the limit.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if ApiToken.objects.filter(user=user).count() >= settings.API_TOKENS_PER_USER:
            raise TokenLimitReached(
                f"You already have {settings.API_TOKENS_PER_USER} tokens, the most allowed: "
                "revoke one you no longer use first.")
        key = KEY_PREFIX + secrets.token_urlsafe(30)
        token = ApiToken.objects.create(user=user, name=name.strip(),
                                        prefix=key[:SHOWN_PREFIX_LEN], key_hash=hash_key(key))
    return token, key


def user_for_key(key: str):
    """The active user a key belongs to (recording the use), or ``None``."""
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key)).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


class TokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <key>`` or ``Authorization: Bearer <key>``."""

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: expected 'Token <key>'.")
        try:
            key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        user = user_for_key(key) if key.startswith(KEY_PREFIX) else None
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return user, None

    def authenticate_header(self, request):
        return 'Token realm="api"'
