"""``?format=csv`` on the jobs and findings lists: every row the pages show under the same
filters and in the same order, read from the rendered pages' tables (all of their pages),
with the figures the pages round."""

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
