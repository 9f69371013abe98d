"""The cluster selector in a real browser (Debian's chromium, headless): two simulated
clusters stored through the real collector code and ingest; choosing one in the
navigation scopes the overview and is still chosen on the next page. Screenshots in
``test-output/screenshots/``."""

import io
import os
import re
import tempfile
import time

import pytest
from django.core.management import call_command

from clusterui.ingest.simulate import simulated_cluster
from tests.web.test_browser import Tour, browser  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def two_clusters(live_server, clean_samples):
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    for name, nodes, seed in (("gpu-a", 3, 1), ("gpu-b", 2, 2)):
        with tempfile.TemporaryDirectory(dir=shm, prefix="clusterui-browser-") as root:
            simulated_cluster(nodes=nodes, gpus=4, hours=0.1, end=time.time(), seed=seed,
                              cluster=name, root_dir=root)
    call_command("demo_users", stdout=io.StringIO())
    return live_server.url


def test_choosing_a_cluster_scopes_the_pages(two_clusters, browser):  # noqa: F811
    tour = Tour(browser, two_clusters, "admin")
    page = tour.page
    tour.charts_rendered(1)
    picker = page.locator("#cluster-picker")
    assert picker.is_visible()
    assert picker.locator("option").all_inner_texts() == ["All clusters", "gpu-a", "gpu-b"]
    assert page.locator(".kpi").first.inner_text().startswith("20\n")  # 5 nodes x 4 GPUs

    with page.expect_navigation():
        picker.select_option("gpu-b")
    assert re.search(r"[?&]cluster=gpu-b", page.url)
    tour.charts_rendered(1)
    assert page.locator("#kpi-scope").inner_text().startswith("Cluster gpu-b, now")
    assert page.locator(".kpi").first.inner_text().startswith("8\n")  # 2 nodes x 4 GPUs
    assert page.locator("#cluster-picker").input_value() == "gpu-b"
    tour.shot("cluster-chosen-overview")

    # Colour the heatmap by SM activity (GPM): the switch keeps the cluster chosen.
    with page.expect_navigation():
        page.get_by_role("group", name="Colour the GPUs by").get_by_text("SM activity").click()
    tour.charts_rendered(1)
    assert re.search(r"[?&]metric=sm", page.url)
    assert page.locator("h2").first.inner_text().startswith("SM activity (GPM) now")
    assert page.locator("#cluster-picker").input_value() == "gpu-b"
    tour.shot("cluster-chosen-overview-sm")

    tour.visit("/nodes/")
    assert page.locator("#cluster-picker").input_value() == "gpu-b"
    assert page.locator("table tbody tr").count() == 2
    tour.shot("cluster-chosen-nodes")

    tour.visit("/ingest/health/")
    assert page.locator("h1").inner_text() == "Ingest health · gpu-b"
    assert page.locator("#cluster-picker").input_value() == "gpu-b"
    tour.shot("cluster-chosen-ingest-health")
    tour.visit("/nodes/")

    with page.expect_navigation():
        page.locator("#cluster-picker").select_option("")
    assert page.locator("table tbody tr").count() == 5
    assert not tour.errors, tour.errors
