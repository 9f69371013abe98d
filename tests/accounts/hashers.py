"""A password hasher that counts, in Redis, the passwords it checks: the parallel sign-in
tests read the count from the test process while gunicorn workers do the checking."""

import time

import redis
from django.conf import settings
from django.contrib.auth.hashers import MD5PasswordHasher

COUNT_KEY = "test:passwords-checked"


def counter() -> redis.Redis:
    return redis.Redis.from_url(settings.CACHES["default"]["LOCATION"])


class CountingHasher(MD5PasswordHasher):
    algorithm = "counted_md5"

    def verify(self, password, encoded):
        counter().incr(COUNT_KEY)
        # A real hasher's cost (PBKDF2, Django's default, takes a few hundred milliseconds)
        # is the window in which parallel attempts all read "not locked yet".
        time.sleep(0.05)
        return super().verify(password, encoded)
