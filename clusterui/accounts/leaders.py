"""ACCOUNT_LEADERS: who leads which accounts, from the environment (docs/operations.md,
"Account leaders"). A leader sees every job of their accounts (clusterui/jobs/visibility.py).

``nlp=alice,bob;gpu-b/vision=carol``: alice and bob lead the account ``nlp`` on every
cluster, carol leads ``vision`` on the cluster ``gpu-b`` only (accounts are per cluster
where clusters have schedulers of their own). Keys are accounts, values are logins.
"""

from django.core.exceptions import ImproperlyConfigured

from clusterui.envconfig import env_mapping


def account_leaders(environ=None) -> dict[str, frozenset[tuple[str | None, str]]]:
    """``{login: {(cluster name or None, account), ...}}``."""
    led: dict[str, set[tuple[str | None, str]]] = {}
    for key, logins in env_mapping("ACCOUNT_LEADERS", environ=environ).items():
        cluster, slash, account = key.rpartition("/")
        if slash and (not cluster.strip() or not account.strip()):
            raise ImproperlyConfigured(
                f"ACCOUNT_LEADERS: {key!r} must be an account or cluster/account, "
                f"e.g. nlp=alice or gpu-b/nlp=alice")
        for login in logins:
            led.setdefault(login, set()).add((cluster.strip() or None, account.strip()))
    return {login: frozenset(pairs) for login, pairs in led.items()}
