from django.core.management.base import BaseCommand

from clusterui.findings.runner import run_pass


class Command(BaseCommand):
    help = ("Run one detector pass now (what Celery beat runs every BEAT_DETECTORS_S): job "
            "efficiency and findings for running jobs and jobs that just ended.")

    def handle(self, *args, **options):
        r = run_pass()
        if r.locked_out:
            self.stdout.write("another detector pass is running; nothing done")
            return
        self.stdout.write(
            f"{r.jobs} jobs, {r.judged} judged, {r.finalized} finalized; findings: "
            f"{r.opened} opened, {r.updated} updated, {r.closed} closed; {r.seconds:.2f} s"
        )
