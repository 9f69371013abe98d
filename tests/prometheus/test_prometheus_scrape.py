"""A real Prometheus (Debian's ``prometheus``; ``scripts/devstack.py prometheus`` installs it)
scrapes ``/metrics`` of a live server with the bearer token, every second; every series is
then read back through Prometheus's HTTP API (``/api/v1/query``) and compared with what the
data says; and every query of the Grafana dashboard (``docs/grafana/clusterui.json``) is
run against it and must return data.

The data, stored through the real ingest path and judged by the real detector pass:
cluster ``hand``: ``h101`` two GPUs at 90 % (NVML), ``h102`` one at 90 % and one idle, all
four held by job 4242 (so one GPU is idle-allocated, an "idle GPU" finding); each with an
InfiniBand port reporting its link (``h102``'s drops from 4X to 1X half way: degraded, a
fabric finding) and an Ethernet port that reports none; cluster
``east``: ``e001``, two GPUs, silent for an hour. One sample refused for its value, one
batch refused whole, two messages waiting in the queue, one dead letter."""

import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from clusterui.findings.choices import FindingKind, Severity
from clusterui.findings.models import JobEfficiency
from clusterui.findings.runner import run_pass
from clusterui.ingest import deadletter
from clusterui.ingest.models import IngestBatch
from clusterui.ingest.tasks import ingest_envelope
from clusterui.inventory.models import Node
from collectors.fabric import FIELDS as FABRIC_FIELDS
from tests.fabric_factories import port
from tests.findings.batches import Job, Sample, node_batch
from tests.findings.batches import Node as NodeSpec
from tests.prometheus import dashboard
from tests.services import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]

PROMETHEUS = "/usr/bin/prometheus"
OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "prometheus"
TOKEN = "metrics-test-token-0123456789"
N = 60

# Every series /metrics exposes (clusterui/prometheus/series.py).
SERIES = {
    "clusterui_node_gpus", "clusterui_node_gpus_reporting", "clusterui_node_gpus_busy",
    "clusterui_node_gpus_allocated", "clusterui_node_gpus_idle_allocated",
    "clusterui_node_silent", "clusterui_node_gpu_utilization_percent",
    "clusterui_node_gpu_power_watts", "clusterui_node_fabric_ports", "clusterui_running_jobs",
    "clusterui_running_jobs_wasted_gpu_hours", "clusterui_running_jobs_allocated_gpu_hours",
    "clusterui_running_jobs_measured_gpu_hours",
    "clusterui_findings_open", "clusterui_ingest_broker_up", "clusterui_ingest_queue_messages",
    "clusterui_ingest_reserved_messages", "clusterui_ingest_consumers",
    "clusterui_ingest_dead_letters", "clusterui_ingest_batches_per_second",
    "clusterui_ingest_delay_p50_seconds", "clusterui_ingest_delay_max_seconds",
    "clusterui_ingest_refused_5m", "clusterui_ingest_batches_by_signature_version_1h",
    # clusterui_ingest_node_signature_v1_batches_1h has a series only while a node signs
    # with version 1 (tests/ingest/test_signature_transition.py); none here.
}


def _with_links(batch: dict, degrade: bool) -> dict:
    """The batch's InfiniBand port (NIC 0) with its link in every row, at 400 Gb/s (4X)
    throughout, or from half way at 100 Gb/s (1X); the Ethernet port's fields null."""
    section = batch["nic_samples"]
    section["fields"] = [*section["fields"], *FABRIC_FIELDS]
    ticks = sorted({row[0] for row in section["rows"]})
    half = ticks[len(ticks) // 2]
    rows = []
    for row in section["rows"]:
        link = port(link_width=1, link_gbps=100.0) if degrade and row[0] >= half else port()
        rows.append(row + [link.get(f) if row[1] == 0 else None for f in FABRIC_FIELDS])
    section["rows"] = rows
    return batch


def _store(broker) -> dict:
    """The data above; returns what the test compares with."""
    now = time.time()
    times = [now - 10 * (N - k) for k in range(N)]  # the last 10 minutes, up to now
    job = Job("4242", gpus=[0, 1], started_at=now - 20 * 60)
    busy = [Sample(util=90.0, sm=70.0) for _ in times]
    idle = [Sample(util=0.0, sm=0.0) for _ in times]
    refused = 0
    for seq, (name, gpus) in enumerate((("h101", (busy, busy)), ("h102", (busy, idle))), 1):
        batch = _with_links(node_batch(NodeSpec(name), seq=seq, times=times, jobs=[job],
                                       gpu=dict(enumerate(gpus)), owner={0: "4242", 1: "4242"},
                                       nic={0: [(1e8, 1e8)] * N, 1: [(1e6, 1e6)] * N}),
                            degrade=name == "h102")
        if name == "h101":  # one sample out of range: refused, the rest stored
            bad = list(batch["gpu_samples"]["rows"][-1])
            bad[0], bad[3] = times[-1] - 5, 250.0
            batch["gpu_samples"]["rows"].append(bad)
        refused += ingest_envelope(batch).rejected
    silent = node_batch(NodeSpec("e001"), seq=1, times=times[:10], jobs=[], cluster="east",
                        gpu={0: busy[:10], 1: busy[:10]}, owner={})
    assert ingest_envelope(silent).rejected == 0
    hour_ago = dt.datetime.fromtimestamp(now - 3600, dt.UTC)
    Node.objects.filter(name="e001").update(reported_at=hour_ago, last_seen=hour_ago)
    assert ingest_envelope({"schema": 99, "cluster": "hand"}) is None  # refused whole
    run_pass(now=dt.datetime.fromtimestamp(times[-1] + 1, dt.UTC))

    broker.rpush(django_settings.INGEST_QUEUE, b"waiting-1", b"waiting-2")
    deadletter.push("clusterui.ingest", [{"bad": True}], "test: set aside")
    delays = [(b.received_at - b.sent_at).total_seconds() for b in IngestBatch.objects.all()]
    eff = JobEfficiency.objects.get(job__external_id="4242")
    return {"refused_items": refused, "batches": len(delays),
            "delay_p50": statistics.median(delays), "delay_max": max(delays),
            "wasted": eff.gpu_hours_wasted, "allocated": eff.gpu_hours_allocated,
            "measured": eff.gpu_hours_allocated * eff.measured_pct / 100,
            "stored_at": time.time()}


@pytest.fixture
def prometheus(live_server, tmp_path):
    """Prometheus scraping the live server's /metrics every second; yields its query URL."""
    assert os.path.exists(PROMETHEUS), (
        "Debian's prometheus is missing: python scripts/devstack.py prometheus installs it")
    target = urllib.parse.urlsplit(live_server.url).netloc
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                   "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": "clusterui", "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", "credentials": TOKEN},
            "static_configs": [{"targets": [target]}],
        }],
    }))
    log = open(tmp_path / "prometheus.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}", tmp_path / "prometheus.log"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(tmp_path / "tsdb", ignore_errors=True)


def query(base: str, promql: str, at: float | None = None) -> list[dict]:
    params = {"query": promql}
    if at is not None:
        params["time"] = f"{at:.3f}"
    url = f"{base}/api/v1/query?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def values(base: str, promql: str, at: float, *labels: str) -> dict:
    """{(label values...): value} of an instant query."""
    return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1])
            for r in query(base, promql, at)}


def first_scrape_after(base: str, log, since: float, limit_s: float = 90) -> float:
    """The time of the first successful scrape that began after ``since``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            up = query(base, 'up{job="clusterui"}')
        except OSError:  # not listening yet
            up = []
        if up and up[0]["value"][1] == "1" and float(up[0]["value"][0]) > since:
            scraped = query(base, 'timestamp(up{job="clusterui"})')
            at = float(scraped[0]["value"][1])
            if at > since:
                return at + 0.5  # an instant query just after it reads that scrape
        time.sleep(0.5)
    pytest.fail(f"Prometheus did not scrape /metrics within {limit_s:g} s; its log:\n"
                + log.read_text()[-3000:])


def test_prometheus_scrapes_every_series(prometheus, live_server, broker, clean_samples,
                                        settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = ()
    base, log = prometheus
    expected = _store(broker)
    at = first_scrape_after(base, log, expected["stored_at"])

    names = {r["metric"]["__name__"] for r in query(base, '{__name__=~"clusterui_.*"}', at)}
    assert names == SERIES

    node = ("cluster", "node")
    assert values(base, "clusterui_node_gpus", at, *node) == {
        ("hand", "h101"): 2, ("hand", "h102"): 2, ("east", "e001"): 2}
    assert values(base, "clusterui_node_gpus_reporting", at, *node) == {
        ("hand", "h101"): 2, ("hand", "h102"): 2, ("east", "e001"): 0}
    assert values(base, "clusterui_node_gpus_busy", at, *node) == {
        ("hand", "h101"): 2, ("hand", "h102"): 1, ("east", "e001"): 0}
    assert values(base, "clusterui_node_gpus_allocated", at, *node) == {
        ("hand", "h101"): 2, ("hand", "h102"): 2, ("east", "e001"): 0}
    assert values(base, "clusterui_node_gpus_idle_allocated", at, *node) == {
        ("hand", "h101"): 0, ("hand", "h102"): 1, ("east", "e001"): 0}
    assert values(base, "clusterui_node_silent", at, *node) == {
        ("hand", "h101"): 0, ("hand", "h102"): 0, ("east", "e001"): 1}
    # A silent node's old values are not current: no utilization or power series for it.
    assert values(base, "clusterui_node_gpu_utilization_percent", at, *node) == {
        ("hand", "h101"): 90.0, ("hand", "h102"): 45.0}
    assert values(base, "clusterui_node_gpu_power_watts", at, *node) == {
        ("hand", "h101"): 600.0, ("hand", "h102"): 600.0}  # 300 W per GPU (batches.py)

    # Each node's InfiniBand port by verdict, zeros too; the Ethernet ports report no link
    # and e001 none at all: no series for them.
    ports = values(base, "clusterui_node_fabric_ports", at, *node, "verdict")
    assert {k: v for k, v in ports.items() if v} == {("hand", "h101", "healthy"): 1,
                                                     ("hand", "h102", "degraded"): 1}
    assert len(ports) == 2 * 4

    assert values(base, "clusterui_running_jobs", at, "cluster") == {("hand",): 1,
                                                                      ("east",): 0}
    wasted = values(base, "clusterui_running_jobs_wasted_gpu_hours", at, "cluster")
    assert wasted == {("hand",): pytest.approx(expected["wasted"]), ("east",): 0}
    assert expected["wasted"] > 0
    allocated = values(base, "clusterui_running_jobs_allocated_gpu_hours", at, "cluster")
    assert allocated == {("hand",): pytest.approx(expected["allocated"]), ("east",): 0}
    # The job started 20 minutes ago, its samples cover the last 10: about half measured.
    measured = values(base, "clusterui_running_jobs_measured_gpu_hours", at, "cluster")
    assert measured == {("hand",): pytest.approx(expected["measured"]), ("east",): 0}
    assert 0.4 < expected["measured"] / expected["allocated"] < 0.6

    findings = values(base, "clusterui_findings_open", at, "cluster", "kind", "severity")
    assert len(findings) == 2 * len(FindingKind.values) * len(Severity.values)  # zeros too
    assert {k: v for k, v in findings.items() if v} == {("hand", "idle_gpu", "info"): 1,
                                                        ("hand", "fabric_link", "warning"): 1}

    one = {"clusterui_ingest_broker_up": 1, "clusterui_ingest_queue_messages": 2,
           "clusterui_ingest_reserved_messages": 0, "clusterui_ingest_consumers": 0,
           "clusterui_ingest_dead_letters": 1,
           "clusterui_ingest_batches_per_second": expected["batches"] / 60,
           "clusterui_ingest_delay_p50_seconds": expected["delay_p50"],
           "clusterui_ingest_delay_max_seconds": expected["delay_max"]}
    for name, value in one.items():
        assert values(base, name, at) == {(): pytest.approx(value, abs=1e-6)}, name
    assert expected["refused_items"] == 1
    assert values(base, "clusterui_ingest_refused_5m", at, "scope") == {
        ("item",): 1, ("batch",): 1}

    # The Grafana dashboard (docs/grafana/clusterui.json): every panel's query, as Grafana
    # sends it with the cluster variable at "All", finds data, and its cluster variable's
    # label_values() finds the clusters.
    board = dashboard.load()
    for title, promql in dashboard.queries(board):
        assert query(base, promql, at), f"dashboard panel {title!r}: no series for {promql}"
    assert {r["metric"]["cluster"] for r in query(base, "clusterui_node_gpus", at)} == {
        "hand", "east"}

    # The page itself, for docs/operations.md.
    request = urllib.request.Request(f"{live_server.url}/metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        (OUTPUT / "metrics.txt").write_bytes(response.read())


def test_a_scrape_without_the_token_is_refused(prometheus, clean_samples, settings):
    """Prometheus with the wrong token sees a 401: its target is down."""
    settings.METRICS_TOKEN = "another-token-0123456789"
    settings.METRICS_ALLOWED_NETWORKS = ()
    base, log = prometheus
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            targets = json.load(urllib.request.urlopen(f"{base}/api/v1/targets", timeout=10))
        except OSError:
            targets = None
        active = targets["data"]["activeTargets"] if targets else []
        if active and active[0]["health"] == "down":
            assert "401" in active[0]["lastError"]
            assert not query(base, '{__name__=~"clusterui_.*"}')
            return
        time.sleep(0.5)
    pytest.fail("Prometheus never reported the target down; log:\n" + log.read_text()[-3000:])
