"""Typed readers for settings that come from the environment.

Every reader names the variable it failed on, so a typo in a deployment stops the
server with a message that says what to fix (``ImproperlyConfigured``). A variable
``NAME_FILE`` is read instead of ``NAME`` when it is set, for secrets mounted as files.
"""

import os
from urllib.parse import parse_qs, quote, unquote, urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str, environ=None) -> str | None:
    environ = os.environ if environ is None else environ
    path = environ.get(f"{name}_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {path!r}: {exc}") from exc
    return environ.get(name)


def env_str(name: str, default: str | None = None, *, environ=None) -> str:
    value = _raw(name, environ)
    if value is None:
        if default is None:
            raise ImproperlyConfigured(f"{name} is required and is not set")
        return default
    return value


def env_bool(name: str, default: bool, *, environ=None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None,
            maximum: int | None = None, environ=None) -> int:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {number}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None,
              maximum: float | None = None, environ=None) -> float:
    value = _raw(name, environ)
    if value is None:
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {value!r}")
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {number}")
    return number


def env_retired(name: str, instead: str, *, environ=None) -> None:
    """A variable that no longer exists: refuse to start rather than ignore it silently
    (the operator meant something by it)."""
    if _raw(name, environ) is not None:
        raise ImproperlyConfigured(f"{name} is no longer read: {instead}")


def env_list(name: str, default: list[str], *, environ=None) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_networks(name: str, default: list[str], *, environ=None) -> tuple:
    """Comma-separated addresses or CIDRs (``10.0.0.0/8, 192.0.2.7``) as ip_network objects."""
    import ipaddress

    networks = []
    for item in env_list(name, default, environ=environ):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name} must be comma-separated addresses or CIDRs, got {item!r}") from None
    return tuple(networks)


def with_password(url: str, password: str | None) -> str:
    """``url`` with ``password`` put in, percent-encoded: a generated password holding
    ``@ : / # ? %`` cannot break the URL it is put in (as it did when Compose interpolated
    it into ``postgres://clusterui:${POSTGRES_PASSWORD}@...``). No password: ``url``."""
    if not password:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = quote(unquote(parts.username or ""), safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def env_url(name: str, default: str, *, password: str | None = None, environ=None) -> str:
    """A service URL whose password, when the variable ``password`` (or its ``_FILE``) is
    set, is taken from there rather than written into the URL."""
    value = env_str(name, default, environ=environ)
    return with_password(value, _raw(password, environ) if password else None)


def env_database(name: str, default: str, *, password: str | None = None,
                 environ=None) -> dict:
    """Parse a ``postgres://user:password@host:port/dbname`` URL into Django's form."""
    import dj_database_url

    value = env_url(name, default, password=password, environ=environ)
    scheme = urlsplit(value).scheme
    if scheme not in {"postgres", "postgresql", "pgsql"}:
        raise ImproperlyConfigured(
            f"{name} must be a postgres:// URL (ClusterUI needs PostgreSQL), got scheme {scheme!r}"
        )
    try:
        config = dj_database_url.parse(value, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from exc
    if not config.get("NAME"):
        raise ImproperlyConfigured(f"{name} must name a database, e.g. postgres://host/clusterui")
    return config


def env_email(environ=None) -> dict:
    """SMTP settings from ``EMAIL_URL`` (smtp://user:pass@host:port?tls=1) or ``EMAIL_*``."""
    url = _raw("EMAIL_URL", environ)
    if url:
        parts = urlsplit(url)
        if parts.scheme not in {"smtp", "smtps", "submission"}:
            raise ImproperlyConfigured(
                f"EMAIL_URL must start with smtp://, smtps:// or submission://, got {parts.scheme!r}"
            )
        query = parse_qs(parts.query)
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"EMAIL_URL has a bad port in {url!r}") from None
        return {
            "EMAIL_HOST": parts.hostname or "localhost",
            "EMAIL_PORT": port or {"smtp": 25, "smtps": 465, "submission": 587}[parts.scheme],
            "EMAIL_HOST_USER": unquote(parts.username or ""),
            "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
            "EMAIL_USE_SSL": parts.scheme == "smtps",
            "EMAIL_USE_TLS": parts.scheme == "submission"
            or query.get("tls", ["0"])[0].lower() in _TRUE,
        }
    return {
        "EMAIL_HOST": env_str("EMAIL_HOST", "localhost", environ=environ),
        "EMAIL_PORT": env_int("EMAIL_PORT", 25, minimum=1, maximum=65535, environ=environ),
        "EMAIL_HOST_USER": env_str("EMAIL_USER", "", environ=environ),
        "EMAIL_HOST_PASSWORD": env_str("EMAIL_PASSWORD", "", environ=environ),
        "EMAIL_USE_TLS": env_bool("EMAIL_TLS", False, environ=environ),
        "EMAIL_USE_SSL": env_bool("EMAIL_SSL", False, environ=environ),
    }


def env_choice(name: str, default: str, choices, *, environ=None) -> str:
    """One of ``choices`` (case-insensitive)."""
    value = env_str(name, default, environ=environ).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_mapping(name: str, *, environ=None) -> dict[str, list[str]]:
    """``key=a,b;key2=c`` into ``{"key": ["a", "b"], "key2": ["c"]}`` (empty when unset)."""
    value = _raw(name, environ)
    mapping: dict[str, list[str]] = {}
    for part in (value or "").split(";"):
        if not part.strip():
            continue
        key, sep, items = part.partition("=")
        key = key.strip()
        values = [item.strip() for item in items.split(",") if item.strip()]
        if not sep or not key or not values:
            raise ImproperlyConfigured(
                f"{name} must look like 'key=a,b;other=c', got the part {part.strip()!r}"
            )
        mapping.setdefault(key, []).extend(values)
    return mapping


def env_time_window(name: str, *, environ=None):
    """``HH:MM-HH:MM`` (local time; it may span midnight) as two ``datetime.time``, or None
    when unset or empty."""
    import datetime as dt

    value = (_raw(name, environ) or "").strip()
    if not value:
        return None
    try:
        start, end = (dt.time.fromisoformat(p.strip()) for p in value.split("-"))
    except ValueError:
        raise ImproperlyConfigured(
            f"{name} must be a local time range HH:MM-HH:MM (e.g. 20:00-08:00), got {value!r}"
        ) from None
    if start == end:
        raise ImproperlyConfigured(f"{name} starts and ends at the same time: {value!r}")
    return start, end


_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _weekday(token: str) -> int:
    token = token.strip()
    return _WEEKDAYS.index(token) if token in _WEEKDAYS else _WEEKDAY_NAMES.index(token)


def env_weekdays(name: str, default: str, *, environ=None) -> frozenset[int]:
    """Days of the week as ``mon,tue,...`` or ranges ``mon-fri``; 0 is Monday."""
    value = env_str(name, default, environ=environ)
    days: set[int] = set()
    for part in value.lower().split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            a = _weekday(first)
            b = _weekday(last) if last else a
        except ValueError:
            raise ImproperlyConfigured(
                f"{name} must list days as mon,tue,... or a range like mon-fri, got {value!r}"
            ) from None
        days.update(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    if not days:
        raise ImproperlyConfigured(f"{name} names no day of the week: {value!r}")
    return frozenset(days)
