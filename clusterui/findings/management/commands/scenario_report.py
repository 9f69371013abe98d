import logging

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusterui.findings import scenarios


class Command(BaseCommand):
    help = ("Run the labelled scenario suite: every simulator behaviour and the negative "
            "cases, through the real collector, ingest and detector pass, at 1 s and 10 s "
            "sampling; print the confusion matrix per finding kind with precision and recall. "
            "Everything it stores is rolled back.")

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, action="append", dest="intervals",
                            help="sampling interval in seconds, 1 to 60 (repeatable; "
                                 "default: 1 and 10)")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--fail", action="store_true",
                            help="exit with status 1 when a case is misclassified")

    def handle(self, *args, **options):
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
