import logging
import os
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusterui.findings import scenarios
from clusterui.findings.matrix import generate
from clusterui.findings.matrix import run as matrix
from clusterui.findings.matrix.client import Server, ServerError


def _secret(path: str | None, env: str, what: str, hint: str) -> str:
    if path:
        try:
            value = Path(path).read_text().strip()
        except OSError as e:
            raise CommandError(f"cannot read {what} from {path}: {e.strerror}") from None
    else:
        value = os.environ.get(env, "").strip()
    if not value:
        raise CommandError(f"--through-queue needs {what}: {hint}")
    return value


def _choices(raw: str | None, allowed, what: str, cast=str):
    if not raw:
        return tuple(allowed)
    try:
        chosen = tuple(cast(x) for x in raw.split(","))
    except ValueError:
        raise CommandError(f"--{what}: a comma-separated list, got {raw!r}") from None
    bad = [x for x in chosen if x not in allowed]
    if bad:
        raise CommandError(f"--{what}: {bad[0]!r} is not one of "
                           f"{', '.join(str(a) for a in allowed)}")
    return chosen


class Command(BaseCommand):
    help = ("Run the labelled scenarios and print precision and recall per finding kind. "
            "By default: the simulator's suite through the real collector, ingest and "
            "detector pass at 1 s and 10 s sampling, in this process, rolled back. With "
            "--through-queue: the scenario matrix (its own cases at 1, 2, 10, 30 and 60 s, "
            "delivered live, as a backlog, out of order and with a spool replay) sent over "
            "the broker to a running server, whose findings are read back through its API; "
            "the data stays on that server as simulated nodes of its own cluster.")

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, action="append", dest="intervals",
                            help="in-process suite: sampling interval in seconds, 1 to 60 "
                                 "(repeatable; default: 1 and 10)")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--fail", action="store_true",
                            help="exit with status 1 when a case is misclassified (with "
                                 "--through-queue: when the matrix misses its 0.95 floor)")
        q = parser.add_argument_group("--through-queue")
        q.add_argument("--through-queue", action="store_true",
                       help="run the matrix against a running server (below)")
        q.add_argument("--url", help="the server, e.g. http://127.0.0.1:8000")
        q.add_argument("--token-file", help="a staff user's API token (default: "
                                            "$CLUSTERUI_API_TOKEN)")
        q.add_argument("--broker", help="the server's broker URL (default: this "
                                        "configuration's CELERY_BROKER_URL)")
        q.add_argument("--cluster", default="scenario-matrix")
        q.add_argument("--key-id", help="the cluster's ingest key id")
        q.add_argument("--secret-file", help="that key's cluster secret (default: "
                                             "$CLUSTERUI_INGEST_SECRET)")
        q.add_argument("--rates", help="comma-separated, from 1,2,10,30,60 (default: all)")
        q.add_argument("--shapes", help="comma-separated, from "
                                        f"{','.join(generate.SHAPES)} (default: all)")
        q.add_argument("--stale-after", type=float,
                       help="the server's JOB_STALE_AFTER_S (default: this configuration's)")
        q.add_argument("--timeout", type=float, default=1800.0,
                       help="seconds to wait for the server to finalize every job")

    def handle(self, *args, **options):
        if options["through_queue"]:
            return self._through_queue(options)
        intervals = options["intervals"] or [1.0, 10.0]
        bad = [i for i in intervals if not 1 <= i <= 60]
        if bad:
            raise CommandError(f"--interval must be between 1 and 60 s, got {bad[0]:g}")
        # The simulated collectors log every reading a simulated GPU lacks: not news here.
        # Quietened for this run only (the command also runs inside the test process).
        quiet = {"collectors": logging.ERROR, "clusterui": logging.WARNING}
        before = {name: logging.getLogger(name).level for name in quiet}
        suites = []
        try:
            for name, level in quiet.items():
                logging.getLogger(name).setLevel(level)
            with transaction.atomic():
                for interval in intervals:
                    suites.append(scenarios.run_suite(interval, seed=options["seed"]))
                transaction.set_rollback(True)
        finally:
            for name, level in before.items():
                logging.getLogger(name).setLevel(level)
        self.stdout.write(scenarios.report(suites))
        if options["fail"] and any(s.wrong() for s in suites):
            raise CommandError("some scenarios were misclassified")

    def _through_queue(self, o):
        if not o["url"]:
            raise CommandError("--through-queue needs --url, the running server's address")
        if not o["key_id"]:
            raise CommandError(f"--through-queue needs --key-id: create a key on the server "
                               f"with `manage.py ingest_key create {o['cluster']}`")
        token = _secret(o["token_file"], "CLUSTERUI_API_TOKEN", "an API token",
                        "--token-file or $CLUSTERUI_API_TOKEN (a staff user's, from the "
                        "API tokens page)")
        secret = _secret(o["secret_file"], "CLUSTERUI_INGEST_SECRET", "the cluster secret",
                         "--secret-file or $CLUSTERUI_INGEST_SECRET (printed by "
                         "`manage.py ingest_key create`)")
        rates = _choices(o["rates"], generate.RATES, "rates", int)
        shapes = _choices(o["shapes"], generate.SHAPES, "shapes")
        server = Server(url=o["url"], token=token,
                        broker_url=o["broker"] or settings.CELERY_BROKER_URL,
                        key_id=o["key_id"], cluster_secret=secret,
                        stale_after_s=o["stale_after"] or settings.JOB_STALE_AFTER_S)
        run_id = f"{int(time.time()) % 10**8:08d}"
        plan = generate.build(run=run_id, cluster=o["cluster"], end=time.time() - 60,
                              seed=o["seed"], shapes=shapes, rates=rates)
        self.stderr.write(f"scenario matrix {run_id}: {len(plan.jobs)} jobs, "
                          f"{sum(len(f.batches) for fs in plan.feeds.values() for f in fs)} "
                          f"batches to {o['url']} over {server.broker_url.split('@')[-1]}")
        try:
            result = matrix.run(server, plan, timeout=o["timeout"])
        except ServerError as e:
            raise CommandError(str(e)) from None
        finally:
            server.close()
        self.stdout.write(matrix.report(result))
        if o["fail"] and not result.meets():
            raise CommandError("the scenario matrix is below precision and recall 0.95, or "
                               "raised a finding on a negative, a node or out of order")
