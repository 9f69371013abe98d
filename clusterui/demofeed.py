"""The Compose demo profile's simulated cluster, fed with secrets from files.

``python -m clusterui.demofeed key [--state-file PATH]``: make sure the demo cluster's
ingest key exists, with the secret in ``DEMO_INGEST_KEY_FILE`` (the one-shot ``demo-key``
service); with ``--state-file``, also bring the simulator's state file up to where the
database's history of the demo cluster ends (``seed_state``).

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


def ensure_key(state_file: str | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterui.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("ingest_key", "ensure", CLUSTER, "--key-id", KEY_ID,
                 "--secret", _secret("DEMO_INGEST_KEY"))
    if state_file:
        seed_state(state_file)


def seed_state(path: str) -> None:
    """Move the simulator's state file on to where the database's history of the demo
    cluster ends (``manage.py sim_resume``), where the file is missing or behind it: a state
    volume recreated while the database was kept would otherwise have the simulator
    back-fill over the stored hour and give its jobs the stored jobs' ids (one job
    "started" twice). A file ahead of the database (batches still queued) is kept."""
    from clusterui.ingest.management.commands.sim_resume import stored_end
    from collectors.sim import progress

    stored = stored_end(CLUSTER)
    try:
        held = progress.read(path)
    except progress.ProgressError as exc:
        sys.exit(f"demofeed: {exc}")
    if stored["after"] is None or stored["first_job_id"] is None:
        return  # nothing stored to continue (or no job to number after): the file decides
    after, next_job_id = progress.later(held, stored["after"], stored["first_job_id"])
    if held is None or (after, next_job_id) != (held.after, held.next_job_id):
        progress.write(path, progress.Progress(after, next_job_id))
        print(f"demofeed: {path}: the simulator continues after "
              f"{after:.0f} (Unix time), job ids from {next_job_id}", file=sys.stderr)


def run(args: list[str]) -> None:
    from clusterui.envconfig import with_password

    host = os.environ.get("DEMO_BROKER", "redis://collector@redis:6379/0")
    broker = with_password(host, _secret("REDIS_COLLECTOR_PASSWORD"))
    env = dict(os.environ, CLUSTERUI_INGEST_KEY_ID=KEY_ID,
               CLUSTERUI_INGEST_KEY=_secret("DEMO_INGEST_KEY"))
    command = ["clusterui-simcluster", "--cluster", CLUSTER, "--broker-url", broker, *args]
    os.execvpe(command[0], command, env)


def main() -> None:
    args = sys.argv[1:]
    if args == ["key"] or (len(args) == 3 and args[:2] == ["key", "--state-file"]):
        ensure_key(args[2] if len(args) == 3 else None)
    elif args[:1] == ["run"]:
        run(args[1:])
    else:
        sys.exit("usage: python -m clusterui.demofeed key [--state-file PATH] | "
                 "run [simcluster arguments]")


if __name__ == "__main__":
    main()
