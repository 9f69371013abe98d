"""A do-nothing task under the ingest task's own settings: the Celery ceiling the ingest
benchmark compares against (loaded into a bench worker with ``-I benchmarks.noop_tasks``)."""

from celery import shared_task


@shared_task(name="clusterui.bench.noop", acks_late=True, ignore_result=True)
def noop(envelope):
    return None
