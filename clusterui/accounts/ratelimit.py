"""Sign-in attempts are rate-limited per user name and per client address, in the shared
cache (Redis), so every web process sees the same counts."""

import hashlib

from django.conf import settings
from django.core.cache import cache


def _key(kind: str, value: str) -> str:
    return f"login-fail:{kind}:{hashlib.sha256(value.lower().encode()).hexdigest()[:32]}"


def client_address(request) -> str:
    # Behind the proxy the deployment documents, the first X-Forwarded-For hop is the client.
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if forwarded and settings.LOGIN_TRUST_X_FORWARDED_FOR:
        return forwarded.split(",")[0].strip()
    return request.META.get("REMOTE_ADDR", "")


def _limits(username: str, address: str):
    return (
        (_key("user", username), settings.LOGIN_MAX_FAILURES_PER_USER),
        (_key("addr", address), settings.LOGIN_MAX_FAILURES_PER_ADDRESS),
    )


def blocked(username: str, address: str) -> bool:
    return any((cache.get(key) or 0) >= limit for key, limit in _limits(username, address))


def record_failure(username: str, address: str) -> None:
    window = settings.LOGIN_FAILURE_WINDOW_S
    for key, _ in _limits(username, address):
        if cache.add(key, 1, timeout=window):
            continue
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=window)


def reset(username: str) -> None:
    cache.delete(_key("user", username))
