"""``?format=csv`` on the jobs, findings and users lists: every row the pages show under the
same filters and in the same order, read from the rendered pages' tables (all of their
pages), with the figures the pages round; the users page's JSON link gives the same rows."""

import csv
import datetime as dt
import io
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from clusterui.findings.choices import FindingKind
from clusterui.web.templatetags.web_format import hours
from tests import rows as f

pytestmark = pytest.mark.django_db

FORMULA = "=HYPERLINK(\"http://evil.example\",\"x\")"
KIND_LABELS = dict(FindingKind.choices)


class Table(HTMLParser):
    """The rows of the page's table body: each a list of (text, first link's title) cells."""

    def __init__(self):
        super().__init__()
        self.rows, self.in_body, self.cell = [], False, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows.append([])
        elif self.in_body and tag == "td":
            self.cell = {"text": "", "title": None, "links": []}
        elif self.cell is not None and tag == "a":
            self.cell["links"].append(attrs.get("title"))
            if self.cell["title"] is None:
                self.cell["title"] = attrs.get("title")

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_body = False
        elif tag == "td" and self.cell is not None:
            self.cell["text"] = " ".join(self.cell["text"].split())
            self.rows[-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell["text"] += data


def page_rows(client, url, params) -> list[list[dict]]:
    """Every row of every page of the list, in order."""
    out, page = [], 1
    while True:
        response = client.get(url, {**params, "page": page})
        assert response.status_code == 200
        table = Table()
        table.feed(response.content.decode())
        out += table.rows
        if page >= response.context["page"].paginator.num_pages:
            return out
        page += 1


def csv_rows(client, url, params) -> list[dict]:
    response = client.get(url, {**params, "format": "csv"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment; filename=\"clusterui-")
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture
def jobs(db):
    """55 of alice's jobs (more than one page of 50) and 3 of bob's: figures, ties, jobs
    without figures, findings open and closed, awkward names."""
    now = timezone.now()
    node = f.node("gpu-a001", gpus=8)
    gpus = list(node.gpus.all())
    made = []
    for k in range(55):
        efficiency = None if k % 7 == 3 else {"allocated": 10.0 + k % 5, "used": k % 9}
        name = (FORMULA if k == 4 else 'a "quoted", multi\nline name' if k == 5
                else f"train-{k}")
        made.append(f.job("alice", gpus=gpus[k % 8:k % 8 + 1], external_id=str(1000 + k),
                          name=name, account="nlp" if k % 2 else "vision",
                          state="ended" if k % 5 == 0 else "running",
                          started_at=now - dt.timedelta(minutes=5 * (k % 20)),
                          ended_at=now - dt.timedelta(minutes=1) if k % 5 == 0 else None,
                          efficiency=efficiency))
    for k in range(3):
        f.job("bob", external_id=str(2000 + k), efficiency={"allocated": 5.0, "used": 1.0})
    for k, job in enumerate(made[:30]):
        f.finding(job, kind=("low_utilization", "idle_gpu", "throttling")[k % 3],
                  severity=("info", "warning", "critical")[k % 3],
                  state="closed" if k % 4 == 0 else "open", wasted=float(k % 4))
    f.finding(None, kind="gpu_errors", node=node, severity="critical", wasted=0.0)
    return made


def figure(value: str) -> str:
    """A CSV figure as the page shows it."""
    return hours(float(value)) if value else "–"


def assert_jobs_match(page, rows):
    assert [p[0]["title"] for p in page] == [r["job_id"] for r in rows]
    for p, r in zip(page, rows, strict=True):
        _, user, account, state, _, gpus, gpu_h, eff, wasted, findings, _ = p
        assert user["text"] == r["user"]
        assert account["text"].startswith(r["account"])
        assert state["text"] == r["state"]
        assert gpus["text"] == r["gpus"]
        assert gpu_h["text"] == figure(r["gpu_hours"])
        assert wasted["text"] == figure(r["wasted_gpu_hours"])
        if r["efficiency_pct"]:
            assert eff["text"] == f"{round(float(r['efficiency_pct']))} %"
        else:
            assert eff["text"] == "not computed yet"
        kinds = [KIND_LABELS[k] for k in r["open_findings"].split()]
        assert (findings["text"] if kinds else "") == " ".join(kinds)


@pytest.mark.parametrize("params", [
    {},
    {"ordering": "-wasted"},
    {"ordering": "efficiency"},
    {"ordering": "-gpu_hours"},
    {"ordering": "user"},
    {"account": "nlp", "ordering": "-efficiency"},
    {"state": "running", "finding": "idle_gpu"},
    {"q": "train-1"},
], ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_jobs_csv_rows_are_the_pages_rows(client_for, jobs, params):
    client = client_for("alice")
    page, rows = page_rows(client, "/jobs/", params), csv_rows(client, "/jobs/", params)
    assert rows, "the filters match something"
    assert_jobs_match(page, rows)
    if not params:
        assert len(rows) == 55  # every page, not the first


def test_jobs_csv_values(client_for, jobs):
    rows = {r["job_id"]: r for r in csv_rows(client_for("alice"), "/jobs/", {})}
    assert set(rows) == {str(1000 + k) for k in range(55)}  # alice's only
    first = rows["1001"]
    assert (first["cluster"], first["scheduler"], first["user"], first["account"]) == (
        "test", "slurm", "alice", "nlp")
    assert float(first["gpu_hours"]) == 11.0 and float(first["wasted_gpu_hours"]) == 10.0
    assert float(first["efficiency_pct"]) == pytest.approx(100 / 11)
    assert first["open_findings"] == "idle_gpu"
    assert first["url"] == f"http://testserver/jobs/{jobs[1].pk}/"
    assert rows["1003"]["efficiency_pct"] == "" and rows["1003"]["gpu_hours"] == ""
    assert rows["1003"]["measured_pct"] == ""  # no figures yet
    assert first["measured_pct"] == ""  # figures from before ClusterUI kept measured_from
    assert rows["1004"]["name"] == "'" + FORMULA  # not run as a formula by a spreadsheet
    assert rows["1005"]["name"] == 'a "quoted", multi\nline name'
    assert rows["1000"]["ended_at"].endswith("Z") and rows["1000"]["state"] == "ended"


def test_staff_sees_everyones_jobs(client_for, jobs):
    rows = csv_rows(client_for("staff"), "/jobs/", {"user": "bob"})
    assert [r["job_id"] for r in rows] == ["2002", "2001", "2000"]


@pytest.mark.parametrize("params", [
    {}, {"state": ""}, {"state": "closed"}, {"ordering": "-wasted", "state": ""},
    {"severity": "critical"}, {"kind": "idle_gpu", "account": "nlp"},
], ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "default (open)")
def test_findings_csv_rows_are_the_pages_rows(client_for, jobs, params):
    client = client_for("staff")
    page = page_rows(client, "/findings/", params)
    rows = csv_rows(client, "/findings/", params)
    assert rows
    assert len(page) == len(rows)
    for p, r in zip(page, rows, strict=True):
        severity, finding, job, node, _, _, wasted, _ = p
        assert finding["text"].startswith(r["title"])
        assert KIND_LABELS[r["kind"]] in finding["text"]
        assert ("· closed" in finding["text"]) == (r["state"] == "closed")
        assert (job["title"] or "") == r["job_id"]
        assert node["text"] == (r["node"] or "–")
        assert wasted["text"] == hours(float(r["wasted_gpu_hours"]))
        assert r["severity"] in severity["text"].lower()
    if not params:
        assert {r["state"] for r in rows} == {"open"}


def test_findings_csv_values(client_for, jobs):
    rows = csv_rows(client_for("alice"), "/findings/", {"state": ""})
    assert len(rows) == 30  # alice's; the node finding is staff's
    assert {r["user"] for r in rows} == {"alice"}
    row = next(r for r in rows if r["job_id"] == "1001")
    assert (row["kind"], row["severity"], row["cluster"]) == ("idle_gpu", "warning", "test")
    assert row["suggestion"] == "Request fewer GPUs." and row["explanation"]
    assert row["url"].startswith(f"http://testserver/jobs/{jobs[1].pk}/#finding-")
    node = next(r for r in csv_rows(client_for("staff"), "/findings/", {})
                if r["kind"] == "gpu_errors")
    assert (node["node"], node["job_id"], node["cluster"]) == ("gpu-a001", "", "test")
    assert node["measured_pct"] == ""  # a node's finding: no job, no run to measure


def test_a_partly_measured_jobs_share_is_in_both_csvs(client_for, jobs):
    """Job 1001 was sampled for its last 2 minutes of 5: 40 % measured, in the jobs CSV and
    beside its idle-GPU finding's (whole-run) waste; a throttling finding's is not a
    whole-run waste, so it has none."""
    eff = jobs[1].efficiency
    eff.measured_from = eff.window_end - dt.timedelta(minutes=2)
    eff.save()
    f.finding(jobs[1], kind="throttling", title="Throttled", wasted=0.0)
    job = {r["job_id"]: r for r in csv_rows(client_for("alice"), "/jobs/", {})}["1001"]
    assert float(job["measured_pct"]) == pytest.approx(40.0, abs=0.01)
    found = [r for r in csv_rows(client_for("alice"), "/findings/", {"state": ""})
             if r["job_id"] == "1001"]
    assert {r["kind"]: r["measured_pct"] for r in found} == {
        "idle_gpu": job["measured_pct"], "throttling": ""}


def test_bad_filters_and_too_many_rows(client_for, jobs, settings):
    client = client_for("alice")
    bad = client.get("/jobs/", {"active_from": "yesterday", "format": "csv"})
    assert bad.status_code == 400 and b"active_from" in bad.content
    bad = client.get("/findings/", {"severity": "dire", "format": "csv"})
    assert bad.status_code == 400 and b"severity" in bad.content
    settings.EXPORT_MAX_ROWS = 54
    refused = client.get("/jobs/", {"format": "csv"})
    assert refused.status_code == 400 and b"More than 54 rows" in refused.content
    assert client.get("/jobs/", {"format": "csv", "account": "nlp"}).status_code == 200


def test_the_pages_link_to_their_csv(client_for, jobs):
    client = client_for("alice")
    page = client.get("/jobs/", {"account": "nlp", "ordering": "-wasted", "page": 2})
    assert b'href="?account=nlp&amp;ordering=-wasted&amp;format=csv"' in page.content
    page = client.get("/findings/", {"severity": "critical"})
    assert b'href="?severity=critical&amp;format=csv"' in page.content


@pytest.fixture
def usage(db):
    """53 users with a job this week (more than one page of 50), a job of last month that
    only a longer range reaches, jobs without figures, a user name a spreadsheet would run."""
    now = timezone.now()
    for k in range(53):
        user = FORMULA if k == 7 else f"user{k:02d}"
        f.job(user, account=f"acct{k % 4}", external_id=str(3000 + k),
              efficiency=None if k % 9 == 4 else {"allocated": 10.0 + k % 6, "used": k % 7})
    f.job("user01", account="acct9", external_id="3999", state="ended",
          started_at=now - dt.timedelta(days=20), ended_at=now - dt.timedelta(days=19),
          efficiency={"allocated": 100.0, "used": 1.0})


def assert_usage_matches(page, rows, group):
    assert [p[0]["text"] for p in page] == [r[group].removeprefix("'") for r in rows]
    for p, r in zip(page, rows, strict=True):
        _, jobs, gpu_h, used, wasted, eff, measured, _ = p
        assert jobs["text"] == r["jobs"]
        assert (gpu_h["text"], used["text"], wasted["text"]) == (
            hours(float(r["gpu_hours"])), hours(float(r["used_gpu_hours"])),
            hours(float(r["wasted_gpu_hours"])))
        if r["efficiency_pct"]:
            assert eff["text"] == f"{float(r['efficiency_pct']):.0f} %"
        else:
            assert eff["text"] == "not computed yet"
        assert measured["text"] == (f"{float(r['measured_pct']):.0f} %" if r["measured_pct"]
                                    else "–")


@pytest.mark.parametrize("params", [
    {}, {"by": "account"}, {"range": "24h"},
    {"by": "account", "from": "LONG"},  # a custom range that reaches last month's job
], ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_users_csv_rows_are_the_pages_rows(client_for, usage, params):
    if params.get("from") == "LONG":
        start = timezone.localtime() - dt.timedelta(days=25)
        params = {**params, "from": start.strftime("%Y-%m-%dT%H:%M")}
    client = client_for("staff")
    group = params.get("by", "user")
    page, rows = page_rows(client, "/users/", params), csv_rows(client, "/users/", params)
    assert rows, "the filters match something"
    assert list(rows[0]) == [group, "jobs", "gpu_hours", "used_gpu_hours", "wasted_gpu_hours",
                             "efficiency_pct", "measured_pct", "from", "to"]
    assert_usage_matches(page, rows, group)
    if group == "user":
        assert len(rows) == 53  # every page, not the first 50
        assert "'" + FORMULA in {r["user"] for r in rows}
    accounts = {r["account"] for r in rows} if group == "account" else set()
    assert ("acct9" in accounts) == ("from" in params)


def test_users_json_link_gives_the_pages_rows(client_for, usage):
    """The page's JSON link is the API's usage endpoint for the same grouping and period."""
    client = client_for("staff")
    for params in ({}, {"by": "account", "range": "24h"}):
        page = client.get("/users/", params)
        link = page.context["api_url"]
        assert link.startswith("/api/v1/usage/?group=")
        assert f'href="{link.replace("&", "&amp;")}"' in page.content.decode()
        body = client.get(link).json()
        assert body["count"] == len(body["results"])  # one request holds every row
        assert dt.datetime.fromisoformat(body["from"]) == page.context["range"].start
        rows = csv_rows(client, "/users/", params)
        group = params.get("by", "user")
        assert [(r["name"], r["jobs"], r["wasted_gpu_hours"]) for r in body["results"]] == [
            (r[group].removeprefix("'"), int(r["jobs"]), float(r["wasted_gpu_hours"]))
            for r in rows]


def test_a_researchers_users_csv_is_their_own_row(client_for, usage):
    f.job("alice", external_id="4000", efficiency={"allocated": 2.0, "used": 1.0})
    rows = csv_rows(client_for("alice"), "/users/", {})
    assert [(r["user"], r["jobs"]) for r in rows] == [("alice", "1")]
    bad = client_for("alice").get("/users/", {"range": "ages", "format": "csv"})
    assert bad.status_code == 400 and b"range" in bad.content


def test_the_users_page_links_to_its_csv(client_for, usage):
    page = client_for("staff").get("/users/", {"by": "account", "range": "24h", "page": 1})
    assert b'href="?by=account&amp;range=24h&amp;format=csv"' in page.content
