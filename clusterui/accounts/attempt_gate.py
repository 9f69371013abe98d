"""What django-axes leaves open: parallel guessing, and one address trying many names.

django-axes counts failures per (user name, address) pair and refuses a locked pair, but
it reads the count before the password is checked and writes it after: twenty attempts sent
at once all read "0 failures" and all get their password checked. So each pair passes
through a short Redis lock: attempts for one pair are checked one at a time, and the
sixth sees the fifth's failure. Different pairs do not wait for each other.

Axes cannot count one address across user names without also locking every user of that
address, so that counter lives here: after ``LOGIN_MAX_FAILURES_PER_ADDRESS`` failures in
``LOGIN_FAILURE_WINDOW_S`` the address is refused. The address is the real client's
(``client_address``), so behind a trusted proxy it is never the proxy's.
"""

import functools
import hashlib
from contextlib import contextmanager

import redis
from django.conf import settings

# How long an attempt waits for the one before it (a password check takes well under a
# second), and how long a lock outlives a process that died holding it.
WAIT_S = 10
LOCK_TTL_S = 30


@functools.cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def _redis() -> redis.Redis:
    return _client(settings.CACHES["default"]["LOCATION"])


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _address_key(address: str) -> str:
    return f"clusterui:signin:address:{_digest(address)}"


@contextmanager
def one_at_a_time(username: str, address: str):
    """Hold the pair's lock around the password check; yields False when the wait ran out."""
    lock = _redis().lock(f"clusterui:signin:pair:{_digest(username, address)}",
                         timeout=LOCK_TTL_S, blocking_timeout=WAIT_S)
    acquired = lock.acquire()
    try:
        yield acquired
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:  # held past LOCK_TTL_S: already expired
                pass


def address_failures(address: str) -> int:
    return int(_redis().get(_address_key(address)) or 0)


def address_blocked(address: str) -> bool:
    return address_failures(address) >= settings.LOGIN_MAX_FAILURES_PER_ADDRESS


def record_address_failure(address: str) -> None:
    """Count a failure; the window starts at the first one (atomic: SET NX then INCR)."""
    key = _address_key(address)
    with _redis().pipeline(transaction=True) as pipe:
        pipe.set(key, 0, ex=settings.LOGIN_FAILURE_WINDOW_S, nx=True)
        pipe.incr(key)
        pipe.execute()


def reset_address(address: str) -> bool:
    """Forget an address's failures; True when it had any."""
    return bool(_redis().delete(_address_key(address)))
