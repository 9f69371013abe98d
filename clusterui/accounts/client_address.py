"""The address a sign-in attempt really comes from, behind trusted proxies.

``REMOTE_ADDR`` is the peer that opened the connection. When it is one of
``LOGIN_TRUSTED_PROXIES`` (comma-separated CIDRs), that proxy appended the address it saw
to ``X-Forwarded-For``; so the header is read from the RIGHT, skipping hops that are
themselves trusted proxies, and the first hop that is not one is the client. Everything
left of that hop was written by the client and is never believed: a client that sends
``X-Forwarded-For: 1.2.3.4`` does not change its address. A peer that is not a trusted
proxy is the client, whatever header it sends.

This is the rule of MDN's X-Forwarded-For page ("trusted proxy list"). django-ipware was
looked at: its trusted proxies are matched as string prefixes, not networks, so a dozen
lines with ``ipaddress`` do it instead.
"""

import ipaddress

from django.conf import settings


def _ip(text: str):
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address, proxies) -> bool:
    return address is not None and any(address in network for network in proxies)


def resolve(remote_addr: str, forwarded_for: str, proxies) -> str:
    """The client's address from a connection's peer and its X-Forwarded-For header."""
    current = _ip(remote_addr)
    if not _trusted(current, proxies):
        return str(current) if current is not None else remote_addr
    for hop in reversed([h for h in forwarded_for.split(",") if h.strip()]):
        address = _ip(hop)
        if address is None:  # a trusted proxy writes addresses; stop at the one that did
            break
        current = address
        if not _trusted(current, proxies):
            break
    return str(current)


def client_address(request) -> str:
    """django-axes' AXES_CLIENT_IP_CALLABLE, and the address the sign-in gate counts by."""
    return resolve(request.META.get("REMOTE_ADDR", ""),
                   request.META.get("HTTP_X_FORWARDED_FOR", ""),
                   settings.LOGIN_TRUSTED_PROXIES)
