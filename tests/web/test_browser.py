"""Every page in a real browser (Debian's chromium, headless) on a simulated cluster: the
charts render (Plotly's DOM), nothing logs an error, and each page leaves a screenshot in
``test-output/screenshots/``.

The data is the demo's: the simulator's jobs stored through the real collector code and
ingest, then the real detector pass. One walk through the product as a new user would
take it: sign in, the overview, a node, a flagged job and why it was flagged, the lists.
"""

import datetime as dt
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
    assert page.locator(".kpi").count() == 8
    assert page.locator("#kpi-fabric", has_text="fabric →").is_visible()  # staff only
    assert page.locator(".kpi", has_text="node GPU health").is_visible()
    assert page.locator("#chart-heatmap .hm, #chart-heatmap .heatmaplayer").count() >= 1
    assert page.get_by_text("Simulated data").first.is_visible()
    tour.shot("overview")

    # A live page refreshes in place: the heatmap is redrawn, not the page reloaded.
    page.evaluate("window.__marker = 1")
    stamp = page.locator("[data-updated]")
    before = stamp.inner_text()
    page.wait_for_timeout(1100)
    page.evaluate("window.ClusterUI.refresh()")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__marker") == 1
    # "updated 19:23:02", in the page's time zone and format, not the browser's locale's.
    assert re.fullmatch(r"\d\d:\d\d:\d\d", stamp.inner_text()), stamp.inner_text()
    assert stamp.inner_text() != before
    tour.charts_rendered(1)

    # A click on a heatmap cell opens that node.
    box = page.locator("#chart-heatmap .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 32, box["y"] + box["height"] / 16)
    page.wait_for_url(re.compile(r".*/nodes/\d+/$"))
    tour.charts_rendered(7)
    assert page.locator("h1").inner_text() == "gpu-a001"
    tour.shot("node")
    # Node -> GPU: its own page, NVML beside GPM on one chart.
    page.get_by_role("link", name="GPU 3", exact=True).click()
    page.wait_for_url(re.compile(r".*/gpus/\d+/$"))
    tour.charts_rendered(5)
    assert page.locator("h1").inner_text() == "gpu-a001 · GPU 3"
    tour.shot("gpu")
    page.go_back()
    tour.charts_rendered(7)
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
    # Two jobs side by side: tick them, compare.
    boxes = page.locator(".jobs-table tbody input[type=checkbox][name=job]")
    first_two = [boxes.nth(0).get_attribute("aria-label"), boxes.nth(1).get_attribute("aria-label")]
    boxes.nth(0).check()
    boxes.nth(1).check()
    with page.expect_navigation():
        page.get_by_role("button", name="Compare the two ticked jobs").click()
    assert "/jobs/compare/" in page.url
    tour.charts_rendered(1)
    heading = page.locator("h1").inner_text()
    assert all(label.removeprefix("Compare job ") in heading for label in first_two), heading
    tour.shot("job-compare")
    tour.visit("/jobs/?ordering=-wasted")
    page.select_option("select[name=finding]", "idle_gpu")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r".*finding=idle_gpu"))
    assert page.locator(".jobs-table tbody tr").count() >= 1

    # The nodes list, busiest first from its header; a row opens its node.
    tour.visit("/nodes/")
    page.get_by_role("link", name="GPU utilization (NVML)").click()
    page.wait_for_url(re.compile(r".*ordering=-util"))
    assert page.locator(".nodes-table tbody tr").count() == 16
    assert page.locator("th[aria-sort=descending]").inner_text().startswith("GPU utilization")
    tour.shot("nodes")
    first = page.locator(".nodes-table tbody tr td a.strong").first
    name = first.inner_text()
    first.click()
    page.wait_for_url(re.compile(r".*/nodes/\d+/$"))
    assert page.locator("h1").inner_text() == name

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



def test_the_top_bar_fits_a_laptop_screen(live_server, browser):
    """A staff member's top bar is the longest (two clusters' selector, the Ingest and Admin
    links): at 1280 and 1024 px it wraps onto a second line rather than making every page
    scroll sideways, and every link stays inside it and on the screen."""
    import datetime as dt

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from clusterui.fabric.models import PortErrors, PortLink
    from tests import rows as f

    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)
    node = f.node("gpu-a001", gpus=1)
    f.node("gpu-b001", gpus=1, cluster_name="a-longer-cluster-name")
    # A port on the fabric page with every column full: degraded, traffic, a long counters
    # cell (the table scrolls inside its card, the page does not).
    now = timezone.now()
    nic = node.nics.get()
    PortLink.objects.create(nic=nic, ts=now, link_state=4, phys_state=5, link_width=1,
                            link_gbps=100.0, nominal_gbps=400.0, nominal_width=4,
                            counters_saturated=2, active_seen=now)
    PortErrors.objects.create(nic=nic, ts=now - dt.timedelta(minutes=1), symbol_error=7200,
                              link_error_recovery=60, port_rcv_errors=720,
                              port_xmit_discards=12345, local_link_integrity_errors=3)
    tour = Tour(browser, live_server.url, "admin")
    for width in (1280, 1024):
        tour.page.set_viewport_size({"width": width, "height": 800})
        for path in (f"/nodes/{node.pk}/", "/fabric/"):
            tour.visit(path)
            overflow = tour.page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow == 0, f"at {width} px {path} scrolls {overflow} px sideways"
        bar = tour.page.locator("header.topbar").bounding_box()
        for item in ("text=Sign out", "text=Alert emails", "nav >> text=Admin",
                     "#cluster-picker"):
            box = tour.page.locator(f"header.topbar >> {item}").bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (width, item, box)
            assert bar["y"] <= box["y"] and box["y"] + box["height"] <= bar["y"] + bar["height"]
        tour.shot(f"topbar-{width}")
    assert tour.errors == []
    tour.context.close()


# Each drawn chart: its width, its plot area's width, where its legend stands.
CHART_BOXES = """() => [...document.querySelectorAll('[data-figure].js-plotly-plot')].map(el => ({
  id: el.id, width: el.clientWidth, plot: el._fullLayout._size.w,
  legend: el._fullLayout.showlegend ? el._fullLayout.legend.orientation : null}))"""


def test_a_phone_reads_a_job_and_its_node(live_server, browser):
    """The page an alert email links to, opened on a phone (400 px): nothing makes the page
    scroll sideways (a wide table scrolls inside its card), and every chart keeps most of
    its width for the plot, its legend in rows above it rather than a column beside it
    (which left the network chart's plot a sliver). Widened to a desktop the same page puts
    the per-GPU legends back beside their plots."""
    from django.contrib.auth import get_user_model

    from tests import rows as f

    get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    start = now - dt.timedelta(minutes=30)
    node = f.node("gpu-p001", gpus=8, nics=2)
    gpus = list(node.gpus.all())
    job = f.job("alice", gpus=gpus, started_at=start, name="phone-check")
    f.gpu_samples(gpus, start, now, every_s=30, job=job, util=lambda g, k: 10.0 * g.index)
    f.nic_samples(list(node.nics.all()), start, now, every_s=30)

    tour = Tour(browser, live_server.url, "ops")
    page = tour.page
    for path in (f"/jobs/{job.pk}/", f"/nodes/{node.pk}/", "/jobs/", "/nodes/"):
        page.set_viewport_size({"width": 400, "height": 800})
        tour.visit(path)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow == 0, f"at 400 px {path} scrolls {overflow} px sideways"
        charts = page.evaluate(CHART_BOXES)
        if path.startswith(f"/jobs/{job.pk}"):
            assert {"chart-util", "chart-activity"} <= {c["id"] for c in charts}
            tour.shot("phone-job")
        for c in charts:
            assert c["plot"] >= 0.6 * c["width"], (path, c)
            assert c["legend"] in (None, "h"), (path, c)
        if path == f"/nodes/{node.pk}/":
            page.set_viewport_size({"width": 1440, "height": 900})
            # The resize handler redraws once the window settles.
            page.wait_for_function(
                "document.getElementById('chart-util')._fullLayout.legend.orientation === 'v'")
            assert page.evaluate("document.documentElement.scrollWidth "
                                 "- document.documentElement.clientWidth") == 0
    assert tour.errors == []
    tour.context.close()


def test_history_and_trends_draw_from_the_rollups(live_server, browser):
    """A week of history, rolled up by compaction: the nodes x time heatmap and the usage
    trends draw in the browser, and a row of the heatmap opens its node."""
    from django.contrib.auth import get_user_model

    from clusterui.telemetry import compaction
    from tests import rows as f

    get_user_model().objects.create_user("ops", password=PASSWORD, is_staff=True)
    now = dt.datetime.now(dt.UTC)
    nodes = [f.node(f"gpu-h{i:03d}", gpus=2, latest=False) for i in range(12)]
    for day in (2, 5):
        start = (now - dt.timedelta(days=day)).replace(minute=0, second=0, microsecond=0)
        for i, n in enumerate(nodes):
            gpus = list(n.gpus.all())
            job = f.job(f"user{i % 3}", account=f"acct{i % 2}", gpus=gpus, state="ended",
                        started_at=start, ended_at=start + dt.timedelta(hours=2))
            f.gpu_samples(gpus, start, start + dt.timedelta(hours=2), every_s=60, job=job,
                          util=lambda g, k, i=i: (8 * i + k) % 100)
    compaction.compact()

    tour = Tour(browser, live_server.url, "ops")
    page = tour.page
    tour.visit("/nodes/history/?range=7d", charts=1)
    assert page.locator("#chart-history .heatmaplayer").count() == 1
    tour.shot("cluster-history")
    page.get_by_role("link", name="GPU power", exact=True).click()
    page.wait_for_url(re.compile(r".*metric=power"))
    tour.charts_rendered(1)
    # A click on the first row, in the middle of its node's job two days ago, opens it.
    box = page.locator("#chart-history .nsewdrag").first.bounding_box()
    first = (now - dt.timedelta(days=7)).replace(minute=0, second=0, microsecond=0)
    job_middle = (now - dt.timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    span = (now.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1) - first)
    x = (job_middle + dt.timedelta(hours=1) - first) / span
    page.mouse.click(box["x"] + box["width"] * x, box["y"] + 3)
    page.wait_for_url(re.compile(r".*/nodes/\d+/$"))
    assert page.locator("h1").inner_text() == "gpu-h000"

    tour.visit("/trends/?by=account&period=30d", charts=1)
    assert page.locator("#chart-trend .barlayer .trace").count() == 2  # acct0, acct1
    rows = page.locator("table.trends-table tbody tr").all_inner_texts()
    assert [r.split("\t")[0] for r in rows] == ["acct0", "acct1"]
    tour.shot("trends")
    page.get_by_role("link", name="Energy (kWh)").click()
    page.wait_for_url(re.compile(r".*metric=energy_kwh"))
    tour.charts_rendered(1)
    assert tour.errors == []
    tour.context.close()


# --- Every link and control, and where each lands -------------------------------------

# What one page tells the walk: its links (with whether they sit in a segmented control),
# the segmented controls' selected entries, the filter forms' values, the h1, the pager.
PAGE_FACTS = """() => ({
  h1: (document.querySelector('h1') || {}).innerText || '',
  links: [...document.querySelectorAll('a[href]')].map(a => ({
    href: a.href, text: a.innerText.trim(), seg: !!a.closest('.seg'),
    download: a.hasAttribute('download')})),
  segOn: [...document.querySelectorAll('.seg a.on')].map(a => a.href),
  fields: Object.fromEntries([...document.querySelectorAll(
      'form[method=get] select[name], form[method=get] input[name]:not([type=hidden])')]
      .map(e => [e.name, e.value])),
  pager: (document.querySelector('.pagination .muted') || {}).innerText || '',
  ordering: (document.querySelector('[data-ordering]') || {dataset: {}}).dataset.ordering
    || null,
})"""
SKIP_PREFIXES = ("/static/", "/admin/", "/api/", "/logout/")
# Query parameters that pick what a list holds (whose jobs, which nodes): one value stands
# for the others in the walk's kinds of page, as one node's page stands for every node's.
# A control (a sort, a range, a grouping, a metric, a page) keeps its value in the kind.
FILTER_VALUES = frozenset({"account", "user", "namespace", "health", "node", "state",
                           "severity", "kind", "q"})


def _query(url: str) -> dict[str, list[str]]:
    from urllib.parse import parse_qs, urlsplit

    return parse_qs(urlsplit(url).query, keep_blank_values=True)


def _landed_where_it_said(url: str, facts: dict) -> list[str]:
    """What a user clicking ``url`` would find wrong on the page it opened."""
    import datetime as dt
    from urllib.parse import urlsplit

    from clusterui.inventory.models import Node

    problems = []
    path, query = urlsplit(url).path, _query(url)
    problems += [f"a parameter named {key!r}: the link wrote its '?' twice" for key in query
                 if key.startswith("?")]
    if m := re.fullmatch(r"/nodes/(\d+)/", path):
        name = Node.objects.get(pk=int(m.group(1))).name
        if facts["h1"].strip() != name:
            problems.append(f"opened node {name} but the page is {facts['h1']!r}")
    if m := re.fullmatch(r"/gpus/(\d+)/", path):
        from clusterui.inventory.models import Gpu

        gpu = Gpu.objects.select_related("node").get(pk=int(m.group(1)))
        if facts["h1"].strip() != f"{gpu.node.name} · GPU {gpu.index}":
            problems.append(f"opened {gpu.node.name} GPU {gpu.index}, the page is "
                            f"{facts['h1']!r}")
    if m := re.fullmatch(r"/jobs/(\d+)/", path):
        external = Job.objects.get(pk=int(m.group(1))).external_id
        if external not in facts["h1"]:
            problems.append(f"opened job {external} but the page is {facts['h1']!r}")
    if "page" in query and f"Page {query['page'][0]} of" not in facts["pager"]:
        problems.append(f"asked for page {query['page'][0]}, the pager says {facts['pager']!r}")
    if "ordering" in query and facts["ordering"] not in (None, query["ordering"][0]):
        problems.append(f"sorted by {query['ordering'][0]} asked, the table is sorted by "
                        f"{facts['ordering']}")
    for key, values in query.items():
        shown = facts["fields"].get(key)
        if shown is None or key in ("from", "to"):
            continue
        if shown != values[0]:
            problems.append(f"{key}={values[0]} asked, the form shows {key}={shown!r}")
    if query.get("from"):  # a custom range: the form shows what was asked, to the minute
        asked = dt.datetime.fromisoformat(query["from"][0])
        if facts["fields"].get("from", "")[:16] != asked.strftime("%Y-%m-%dT%H:%M"):
            problems.append(f"from={query['from'][0]} asked, the form shows "
                            f"{facts['fields'].get('from')!r}")
    return problems


@pytest.mark.timeout(600)
def test_every_link_and_control_on_every_page_lands_where_it_says(demo, browser):
    """A staff user's walk: every same-site link on every page reached from the overview is
    followed. Each page (each node, each job) and each control once per kind of page (the
    6 h button of one node's page stands for every node's; one GPU page for all 128; the
    sorts of one account's jobs for every account's: ``FILTER_VALUES``) is opened in the
    browser (HTTP 200, no script error) and checked against where it says it
    goes (a node's page is that node, page 2 is page 2, a range or grouping toggle is
    selected on the page it opens, a sort is the table's, a filter's value is still chosen);
    every other link is fetched and must answer 200. Then every option of every filter,
    every range preset and a custom range are chosen as a user would, with the form's own
    button."""
    from urllib.parse import urlsplit

    tour = Tour(browser, demo, "admin")
    page = tour.page
    queue: dict[str, str | None] = {demo + "/": None}  # url -> the toggle's text, if one
    opened: set[str] = set()
    kinds: set[tuple] = set()
    fetch_only: set[str] = set()
    downloads: set[str] = set()  # a file, not a page: fetched, never opened
    problems: list[str] = []
    links = toggles = 0
    while queue:
        # Some 140 pages on this cluster, and each control of each kind of page (about 300
        # in all): a walk that goes on is following links that make new links (a query
        # string that grows), not pages.
        assert len(opened) < 800, "\n".join(["the walk does not end", *problems[:20]])
        url, toggle = next(iter(queue.items()))
        del queue[url]
        opened.add(url)
        response = page.goto(url)
        if response.status != 200:
            problems.append(f"{url}: HTTP {response.status}")
            continue
        facts = page.evaluate(PAGE_FACTS)
        problems += [f"{url}: {p}" for p in _landed_where_it_said(page.url, facts)]
        if toggle is not None:
            toggles += 1
            if not any(_query(o) == _query(url) for o in facts["segOn"]):
                problems.append(f"toggle {toggle!r} ({url}) is not the selected one on the "
                                f"page it opens ({facts['segOn']})")
        for link in facts["links"]:
            target = link["href"].split("#")[0]
            parts = urlsplit(target)
            if f"{parts.scheme}://{parts.netloc}" != demo or parts.path.startswith(
                    SKIP_PREFIXES):
                continue
            links += 1
            if link["download"]:
                downloads.add(target)
                continue
            # Every page once (each node, each job), and each control once per kind of
            # page: the 6 h button of one node's page stands for every node's.
            # An empty parameter is no filter: "?health=&ordering=name" is "?ordering=name".
            kind = (re.sub(r"/\d+/", "/N/", parts.path),
                    tuple(sorted((k, "*" if k in FILTER_VALUES else v[0])
                                 for k, v in _query(target).items() if v[0])))
            page_once = not parts.query and not parts.path.startswith("/gpus/")
            if target in opened or target in queue:
                continue
            if kind in kinds and not page_once:
                fetch_only.add(target)
                continue
            kinds.add(kind)
            queue[target] = link["text"] if link["seg"] else None
    for url in sorted(fetch_only - opened):
        status = page.request.get(url).status
        if status != 200:
            problems.append(f"{url}: HTTP {status}")
    for url in sorted(downloads):
        got = page.request.get(url)
        if got.status != 200 or not got.headers["content-type"].startswith("text/csv"):
            problems.append(f"{url}: HTTP {got.status} {got.headers['content-type']}")
    assert downloads, "the jobs and findings lists link to their CSV"
    print(f"walk: {len(opened)} pages opened, {len(fetch_only - opened)} more fetched, "
          f"{toggles} toggles, {links} links read")
    assert problems == [], "\n".join(problems[:40])
    # The walk went everywhere: all 16 nodes, the jobs, the lists and their toggles.
    assert len(opened) > 60 and toggles > 10, (len(opened), toggles, links)

    # The filters: every option of every select, submitted with the form's own button.
    submitted = 0
    for path, form in (("/jobs/", "form.filters"), ("/findings/", "form.filters")):
        tour.visit(path)
        for name in page.locator(f"{form} select").evaluate_all("s => s.map(e => e.name)"):
            options = page.locator(f"{form} select[name={name}] option").evaluate_all(
                "os => os.map(o => o.value)")
            for value in options:
                tour.visit(path)
                page.select_option(f"{form} select[name={name}]", value)
                with page.expect_navigation():
                    page.locator(form).get_by_role("button", name="Apply").click()
                submitted += 1
                assert _query(page.url).get(name, [""]) == [value], (page.url, name, value)
                shown = page.locator(f"{form} select[name={name}]").input_value()
                assert shown == value, f"{path}: chose {name}={value}, the form shows {shown}"
    assert submitted > 30

    # The range picker on a node page: each preset, then a custom range from the form.
    from clusterui.inventory.models import Node

    tour.visit(f"/nodes/{Node.objects.get(name='gpu-a001').pk}/", charts=7)
    presets = page.locator(".range-picker .seg a").all_inner_texts()
    for label in presets:
        page.locator(".range-picker .seg a", has_text=label).first.click()
        page.wait_for_load_state()
        assert page.locator(".range-picker .seg a.on").inner_text() == label
        tour.charts_rendered(7)
    # A custom range inside the data draws every chart; one before it says so on each.
    from django.utils import timezone as tz

    now = tz.localtime()
    inside = [(now - dt.timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M") for m in (25, 5)]
    for (start, end), drawn in ((inside, 7), (("2020-01-01T00:00", "2020-01-01T06:00"), 0)):
        if page.locator(".custom-range").is_hidden():
            page.locator("[data-custom-toggle]").click()
        page.fill("input[name=from]", start)
        page.fill("input[name=to]", end)
        with page.expect_navigation():
            page.locator(".custom-range").get_by_role("button", name="Apply").click()
        assert page.locator("[data-custom-toggle]").get_attribute("class") == "on"
        assert page.input_value("input[name=from]") == start
        assert page.input_value("input[name=to]") == end
        if drawn:
            tour.charts_rendered(drawn)
        else:
            # Every chart slot of the page (11 on a node page: activity, GPM, memory, power,
            # temperature, network, NVLink, PCIe, jobs) says there is nothing in the range.
            slots = page.locator("[id^='chart-']").count()
            assert slots >= 11 and page.locator(".chart-empty").count() == slots
            assert page.locator(".js-plotly-plot").count() == 0

    assert tour.errors == []
    tour.context.close()


def _bulk_cluster(nodes: int, gpus: int = 8) -> None:
    """``nodes`` nodes of ``gpus`` GPUs, each with a "now" sample, written in bulk."""
    from django.utils import timezone

    from clusterui.inventory.models import Gpu, Node
    from clusterui.telemetry.models import GpuLatest
    from tests import rows

    now = timezone.now()
    cluster = rows.cluster(f"size-{nodes}")
    made = Node.objects.bulk_create([
        Node(cluster=cluster, name=f"n{nodes}-{i:04d}", first_seen=now, last_seen=now,
             reported_at=now, sample_interval_s=10.0) for i in range(nodes)])
    made_gpus = Gpu.objects.bulk_create([
        Gpu(node=n, uuid=f"GPU-{n.name}-{g}", index=g, model="NVIDIA H100 80GB HBM3",
            first_seen=now, last_seen=now) for n in made for g in range(gpus)])
    GpuLatest.objects.bulk_create([
        GpuLatest(gpu=g, ts=now, util_pct=float((g.index * 13 + g.node_id) % 100))
        for g in made_gpus])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nodes", [1, 64, 1000])
def test_the_heatmap_in_the_browser_at_1_64_and_1000_nodes(live_server, browser, nodes):
    """The overview's heatmap as the browser holds it (the figure's data, not pixels): one
    column per node up to a band of 100, every node once, no tick without its name, and
    in-cell numbers only where they fit (the 16-node demo is the walk's)."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)
    _bulk_cluster(nodes)
    tour = Tour(browser, live_server.url, "admin")
    tour.charts_rendered(1)
    fig = tour.page.evaluate("""() => {
        const el = document.getElementById('chart-heatmap');
        const cells = el._fullData[1];  // the trace as Plotly decoded it (binary arrays)
        const ids = new Set();
        let columns = 0;
        for (const row of Array.from(cells.customdata)) {
          columns = Math.max(columns, row.length);
          for (const v of Array.from(row)) if (v !== null && !Number.isNaN(v)) ids.add(v);
        }
        return {columns, nodes: ids.size, text: !!(el.data[1].text),
                tickvals: (el.layout.xaxis.tickvals || []).length,
                ticktext: (el.layout.xaxis.ticktext || []).length};
    }""")
    assert fig["nodes"] == nodes
    assert fig["columns"] == (nodes if nodes <= 48 else min(nodes, 100))
    assert fig["tickvals"] == fig["ticktext"]
    assert fig["text"] == (nodes <= 48)
    tour.shot(f"overview-{nodes}-nodes")
    assert tour.errors == []
    tour.context.close()
