from celery import shared_task

from clusterui.findings.runner import run_pass


@shared_task(name="clusterui.findings.run_detectors", ignore_result=True)
def run_detectors() -> int:
    """One detector pass over running jobs and those that just ended (``runner``).

    Overlapping runs are harmless: a pass that finds another one running returns at once.
    """
    return run_pass().jobs
