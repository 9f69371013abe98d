"""The test settings, with passwords checked by the counting hasher (for gunicorn workers
started by tests/accounts/test_parallel_signin.py)."""

from clusterui.settings_test import *  # noqa: F403

PASSWORD_HASHERS = ["tests.accounts.hashers.CountingHasher"]
