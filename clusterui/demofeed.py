"""The Compose demo profile's simulated cluster, fed with secrets from files.

``python -m clusterui.demofeed key``: make sure the demo cluster's ingest key exists, with
the secret in ``DEMO_INGEST_KEY_FILE`` (the one-shot ``demo-key`` service).

``python -m clusterui.demofeed run [simcluster arguments]``: run ``clusterui-simcluster``
signing every node's batches with its key derived from that secret, and pushing as the
Redis ``collector`` user whose password is in ``REDIS_COLLECTOR_PASSWORD_FILE`` (put into
the broker URL percent-encoded). The simulated data is labelled simulated in the UI.
"""

from __future__ import annotations

import os
import sys

CLUSTER = os.environ.get("DEMO_CLUSTER", "demo")
KEY_ID = os.environ.get("DEMO_INGEST_KEY_ID", "demo-1")


def _secret(name: str) -> str:
    path = os.environ.get(f"{name}_FILE")
    if not path:
        sys.exit(f"demofeed: set {name}_FILE")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError as exc:
        sys.exit(f"demofeed: {name}_FILE={path}: {exc}")


def ensure_key() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterui.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("ingest_key", "ensure", CLUSTER, "--key-id", KEY_ID,
                 "--secret", _secret("DEMO_INGEST_KEY"))


def run(args: list[str]) -> None:
    from clusterui.envconfig import with_password

    host = os.environ.get("DEMO_BROKER", "redis://collector@redis:6379/0")
    broker = with_password(host, _secret("REDIS_COLLECTOR_PASSWORD"))
    env = dict(os.environ, CLUSTERUI_INGEST_KEY_ID=KEY_ID,
               CLUSTERUI_INGEST_KEY=_secret("DEMO_INGEST_KEY"))
    command = ["clusterui-simcluster", "--cluster", CLUSTER, "--broker-url", broker, *args]
    os.execvpe(command[0], command, env)


def main() -> None:
    if sys.argv[1:2] == ["key"]:
        ensure_key()
    elif sys.argv[1:2] == ["run"]:
        run(sys.argv[2:])
    else:
        sys.exit("usage: python -m clusterui.demofeed key | run [simcluster arguments]")


if __name__ == "__main__":
    main()
