"""Every page in a real browser (Debian's chromium, headless) on a simulated cluster: the
charts render (Plotly's DOM), nothing logs an error, and each page leaves a screenshot in
``test-output/screenshots/``.

The data is the demo's: the simulator's jobs stored through the real collector code and
ingest, then the real detector pass. One walk through the product as a new user would
take it: sign in, the overview, a node, a flagged job and why it was flagged, the lists.
"""

import io
import os
import re
import tempfile
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections

from clusterui.ingest.simulate import simulated_cluster
from clusterui.jobs.models import Job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]

# Playwright's sync API runs an event loop in the test's thread; the ORM calls below run
# outside it, but Django cannot tell.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
PASSWORD = "clusterui-demo"
CHART = ".js-plotly-plot .main-svg"


@pytest.fixture
def demo(live_server, clean_samples):
    """16 simulated nodes x 8 GPUs, half an hour of history ending now, the detectors' pass
    over it, and the demo's logins."""
    # The simulator writes each node's sysfs/proc files at every step: on tmpfs that is
    # about six times faster than on disk.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm, prefix="clusterui-browser-") as root:
        simulated_cluster(nodes=16, hours=0.5, end=time.time(), seed=1, root_dir=root)
    try:
        from clusterui.findings.runner import run_pass
    except ImportError:  # the detectors not installed: the pages still render, unflagged
        run_pass = None
    if run_pass is not None:
        run_pass()
    call_command("demo_users", stdout=io.StringIO())
    return live_server.url


@pytest.fixture
def browser(live_server, clean_samples):
    """Chromium, started after the data is in and closed before the tables are emptied."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (make test does it "
                    "when run as root)", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()
        # ORM calls made while Playwright's loop runs get their own connections (Django
        # keys them by async context): close them, or the test database cannot be dropped.
        connections.close_all()


class Tour:
    """A signed-in page that records console errors and takes screenshots."""

    def __init__(self, browser, base: str, user: str):
        self.base = base
        self.context = browser.new_context(viewport={"width": 1440, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"{self.page.url}: {m.text}")
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"{self.page.url}: {e}"))
        self.page.goto(f"{base}/login/")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        if user == "admin":
            self.shot("login")
        self.page.fill("#id_username", user)
        self.page.fill("#id_password", PASSWORD)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(f"{base}/")

    def visit(self, path: str, *, charts: int = 0):
        response = self.page.goto(self.base + path)
        assert response.status == 200, f"{path}: HTTP {response.status}"
        self.charts_rendered(charts)

    def charts_rendered(self, charts: int):
        if charts:
            self.page.wait_for_function(
                f"document.querySelectorAll('{CHART}').length >= {charts}")
        drawn = self.page.locator(".js-plotly-plot").count()
        expected = self.page.locator("[data-figure]").count()
        assert drawn == expected, f"{self.page.url}: {drawn} of {expected} charts drawn"

    def shot(self, name: str):
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_a_new_user_sees_the_cluster_and_why_a_job_was_flagged(demo, browser):
    tour = Tour(browser, demo, "admin")
    page = tour.page

    # The overview: KPIs, the heatmap, open findings, waste.
    tour.charts_rendered(1)
    assert page.locator(".kpi").count() == 6
    assert page.locator("#chart-heatmap .hm, #chart-heatmap .heatmaplayer").count() >= 1
    assert page.get_by_text("Simulated data").first.is_visible()
    tour.shot("overview")

    # A live page refreshes in place: the heatmap is redrawn, not the page reloaded.
    page.evaluate("window.__marker = 1")
    page.evaluate("window.ClusterUI.refresh()")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__marker") == 1
    tour.charts_rendered(1)

    # A click on a heatmap cell opens that node.
    box = page.locator("#chart-heatmap .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 32, box["y"] + box["height"] / 16)
    page.wait_for_url(re.compile(r".*/nodes/\d+/$"))
    tour.charts_rendered(7)
    assert page.locator("h1").inner_text() == "gpu-a001"
    tour.shot("node")
    page.get_by_role("link", name="6 h", exact=True).click()
    page.wait_for_url(re.compile(r".*range=6h"))
    tour.charts_rendered(7)

    # The most severe open finding leads to its job, which explains itself.
    page.goto(demo + "/")
    page.locator("[data-live=findings] .list a").first.click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/#finding-\d+$"))
    tour.charts_rendered(5)
    assert page.locator(".finding .explanation").first.inner_text()
    assert page.locator(".finding .suggestion").first.inner_text().startswith("What to do:")
    assert page.locator(".finding .evidence dd").count() >= 3
    tour.shot("job-flagged")

    # A communication-bound job: its network and GPU activity on one time axis.
    comm = Job.objects.filter(findings__kind="comm_bound").first()
    assert comm is not None, "the simulated cluster always runs a communication-bound job"
    tour.visit(f"/jobs/{comm.pk}/", charts=5)
    assert page.locator("#chart-activity .scatterlayer .trace").count() >= 3
    assert "Communication-bound" in page.locator("#findings").inner_text()
    tour.shot("job-comm-bound")

    # The lists.
    tour.visit("/jobs/?ordering=-wasted")
    assert page.locator(".jobs-table tbody tr").count() >= 10
    tour.shot("jobs")
    page.select_option("select[name=finding]", "idle_gpu")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r".*finding=idle_gpu"))
    assert page.locator(".jobs-table tbody tr").count() >= 1

    tour.visit("/findings/")
    rows = page.locator(".findings-table tbody tr")
    assert rows.count() >= 5
    tour.shot("findings")
    title = rows.first.locator("td").nth(1).locator("a, .strong").first.inner_text()
    rows.first.get_by_role("button", name="Acknowledge").click()
    page.wait_for_load_state()
    assert f"Acknowledged: {title}" in page.locator(".messages").inner_text()

    tour.visit("/users/", charts=1)
    tour.shot("users")
    tour.visit("/users/?by=account&range=24h", charts=1)

    # The staff's ingest health page.
    tour.visit("/ingest/health/")
    assert page.locator("nav a.active").inner_text() == "Ingest"
    assert "No gaps" in page.locator("#gaps").inner_text()
    tour.shot("ingest-health")

    assert tour.errors == []
    tour.context.close()


def test_a_researcher_sees_only_their_own_jobs(live_server, browser):
    from django.contrib.auth import get_user_model

    from tests import rows as f

    get_user_model().objects.create_user("alice", password=PASSWORD)
    n = f.node("gpu-a001", gpus=4)
    gpus = list(n.gpus.all())
    mine = f.job("alice", gpus=gpus[:2], efficiency={"allocated": 4, "used": 1})
    theirs = f.job("bob", gpus=gpus[2:], efficiency={"allocated": 4, "used": 3})
    f.finding(mine, title="Low GPU utilization: 25 % on 2 GPUs")
    f.finding(theirs, title="Bob's finding")

    tour = Tour(browser, live_server.url, "alice")
    page = tour.page
    tour.charts_rendered(1)
    assert "Bob's finding" not in page.content()

    tour.visit("/jobs/")
    assert page.locator(".jobs-table tbody tr td:nth-child(2)").all_inner_texts() == ["alice"]
    tour.shot("jobs-researcher")
    tour.visit(f"/jobs/{mine.pk}/")
    assert "Low GPU utilization: 25 % on 2 GPUs" in page.locator("#findings").inner_text()
    tour.visit("/findings/")
    assert page.locator(".findings-table tbody tr").count() == 1
    tour.visit("/users/", charts=1)
    assert page.locator("table.grid tbody tr").all_inner_texts()[0].startswith("alice")

    assert tour.context.request.get(f"{live_server.url}/jobs/{theirs.pk}/").status == 404
    assert tour.errors == []
    tour.context.close()

