"""``docs/grafana/clusterui.json`` without Grafana: a dashboard whose every panel reads the
Prometheus data source chosen in its ``datasource`` variable and only series ``/metrics``
exports, with the panels issue 18 asks for. That each query returns data from a real
Prometheus is ``test_prometheus_scrape.py``'s (it scrapes a live server with data)."""

from tests.prometheus import dashboard
from tests.prometheus.test_prometheus_scrape import SERIES

DS = {"type": "prometheus", "uid": "${datasource}"}


def test_the_data_source_is_a_variable():
    board = dashboard.load()
    variables = dashboard.variables(board)
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    cluster = variables["cluster"]
    assert cluster["datasource"] == DS
    assert cluster["query"]["query"] == "label_values(clusterui_node_gpus, cluster)"
    for panel in dashboard.panels(board):
        assert panel["datasource"] == DS, panel["title"]
        assert panel["targets"], panel["title"]
        assert all(t["datasource"] == DS for t in panel["targets"]), panel["title"]


def test_every_query_reads_only_series_that_metrics_exports():
    board = dashboard.load()
    used = set()
    for title, expr in dashboard.queries(board):
        names = set(dashboard.SERIES_NAME.findall(expr))
        assert names, f"{title}: {expr} reads no ClusterUI series"
        assert names <= SERIES, f"{title}: {sorted(names - SERIES)} are not exported"
        used |= names
    # What the dashboard is for: GPUs busy and idle-allocated, waste, findings, ingest health,
    # silent nodes.
    assert {"clusterui_node_gpus_busy", "clusterui_node_gpus_idle_allocated",
            "clusterui_running_jobs_wasted_gpu_hours", "clusterui_findings_open",
            "clusterui_ingest_broker_up", "clusterui_ingest_queue_messages",
            "clusterui_ingest_batches_per_second", "clusterui_ingest_delay_max_seconds",
            "clusterui_ingest_refused_5m", "clusterui_node_silent"} <= used


def test_the_layout_is_grafanas():
    board = dashboard.load()
    ids = [p["id"] for p in board["panels"]] + [
        p["id"] for r in board["panels"] for p in r.get("panels", [])]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, panel["title"]
    refs = [[t["refId"] for t in p["targets"]] for p in dashboard.panels(board)]
    assert all(len(r) == len(set(r)) for r in refs)
    assert board["uid"] and board["schemaVersion"] >= 36
