"""The job page's Scheduler block in a real browser (Debian's chromium, headless): visible
with each fact and its source, no script error, a screenshot in test-output/screenshots/."""

import datetime as dt

import pytest
from django.utils import timezone

from clusterui.jobs.models import Job
from tests import rows as f
from tests.web.test_browser import PASSWORD, Tour, browser  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]


def test_the_scheduler_block_says_each_fact_and_its_source(live_server, browser):  # noqa: F811
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("alice", password=PASSWORD)
    n = f.node("gpu-a001", gpus=2)
    gpus = list(n.gpus.order_by("index"))
    started = timezone.now() - dt.timedelta(hours=3)
    ended = started + dt.timedelta(hours=2, minutes=10)
    job = f.job("alice", gpus=gpus, state="ended", started_at=started, ended_at=ended,
                name="llama-ft", efficiency={"allocated": 4.3, "used": 3.1})
    f.gpu_samples(gpus, started, ended, job=job, util=lambda g, k: 80.0)
    Job.objects.filter(pk=job.pk).update(
        time_limit_s=4 * 3600, submitted_at=started - dt.timedelta(minutes=7, seconds=30),
        exit_state="timeout", exit_code=0, exit_signal=15)
    k8s = f.job("alice", gpus=[], name="notebook")
    Job.objects.filter(pk=k8s.pk).update(scheduler="kubernetes")

    tour = Tour(browser, live_server.url, "alice")
    page = tour.page
    tour.visit(f"/jobs/{job.pk}/", charts=1)
    block = page.locator("#scheduler")
    assert block.is_visible()
    text = block.inner_text()
    for shown in ("ran 2 h 10 min of 4 h 00 min requested (54 %)", "Timed out, signal 15",
                  "7 min", "Slurm's TimeLimit, from scontrol when the collector first saw",
                  "from scontrol when the collector saw the job end"):
        assert shown in text, shown
    block.scroll_into_view_if_needed()
    tour.shot("job-scheduler")

    tour.visit(f"/jobs/{k8s.pk}/")
    assert "ClusterUI asks no scheduler about Kubernetes pods" in page.locator(
        "#scheduler").inner_text()
    tour.shot("job-scheduler-kubernetes")
    assert tour.errors == []
    tour.context.close()
