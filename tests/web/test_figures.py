"""The figure functions, called without a request (plain data in, Plotly figures out)."""

import datetime as dt
import json

import pytest

from clusterui.inventory.models import Gpu, Nic
from clusterui.telemetry.series import Series
from clusterui.web import derived
from clusterui.web.figures import heatmap, timeseries, usage
from clusterui.web.figures.common import points_per_series, to_json
from clusterui.web.snapshot import GpuCell
from clusterui.web.templatetags.web_format import figure_script
from tests.web.plotly_data import matrix, values

T0 = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def series(values: dict, n: int, step: int = 10) -> Series:
    return Series(start=T0, end=T0 + dt.timedelta(seconds=n * step), step=step,
                  ts=[T0 + dt.timedelta(seconds=i * step) for i in range(n)], values=values)


def cells(nodes: int, gpus: int, util=42.0):
    return [GpuCell(node_id=n + 1, node=f"gpu-a{n + 1:04d}", index=g, model="H100", util=util,
                    sm_active=None, job_id=None, allocated=g % 2 == 0)
            for n in range(nodes) for g in range(gpus)]


def test_heatmap_at_1000_nodes_stays_small_and_clickable():
    fig = to_json(heatmap.utilization_heatmap(cells(1000, 8)))
    util = fig["data"][1]
    z, nodes = matrix(util["z"]), matrix(util["customdata"])
    assert len(z) == 10 * 8 + 9  # ten bands of 100 nodes, blank rows between
    assert all(len(row) == 100 for row in z)
    assert nodes[7][0] == 1  # band 1: node 1 GPU 7 at row 7
    assert nodes[8][0] is None  # the blank row
    assert nodes[9][0] == 101  # band 2 starts at node 101
    assert nodes[9 * 9][0] == 901  # band 10 starts at node 901
    assert "text" not in util  # no in-cell labels at this size
    assert fig["layout"]["height"] < 1200
    assert len(fig.text) < 500_000  # 8,000 cells with their hover text


def test_heatmap_cells_say_free_or_busy_and_mark_missing_samples():
    cs = cells(2, 2)
    cs[3].util = None
    fig = to_json(heatmap.utilization_heatmap(cs))
    util, missing = fig["data"][1], fig["data"][0]
    assert util["text"] == [["42", "42"], ["free", ""]]
    assert matrix(missing["z"]) == [[None, None], [None, 1]]
    assert matrix(util["z"]) == [[42, 42], [42, None]]
    assert "no current sample" in missing["hovertext"][1][1]
    assert util["hovertext"][1][0] == "gpu-a0001 GPU 1, free"
    assert heatmap.utilization_heatmap([]) is None


def test_per_gpu_chart_has_one_trace_per_gpu_and_capacity_lines():
    s = series({1: {"mem_used_mib": [1024.0, 2048.0]}, 2: {"mem_used_mib": [None, 4096.0]},
                3: {"mem_used_mib": [None, None]}}, 2)
    fig = to_json(timeseries.per_gpu_chart(
        s, "mem_used_mib", {1: "GPU 0", 2: "GPU 1", 3: "GPU 2"}, y_title="GiB",
        scale=timeseries.GIB_PER_MIB, capacities={1: 81920, 2: 81920},
        capacity_label="capacity {:,.0f} GiB"))
    assert [t["name"] for t in fig["data"]] == ["GPU 0", "GPU 1"]  # GPU 2 never reported
    assert values(fig["data"][0]["y"]) == [1.0, 2.0]
    assert values(fig["data"][1]["y"]) == [None, 4.0]  # a gap stays a gap
    assert [s["y0"] for s in fig["layout"]["shapes"]] == [80.0]
    assert fig["layout"]["annotations"][0]["text"] == "capacity 80 GiB"
    # Evenly spaced buckets: the first one (server-local wall time, UTC here) and the step.
    assert (fig["data"][0]["x0"], fig["data"][0]["dx"]) == ("2026-11-22 12:00:00", 10_000)


def test_nothing_to_draw_is_none():
    s = series({1: {"util_pct": [None, None]}}, 2)
    assert timeseries.per_gpu_chart(s, "util_pct", {1: "GPU 0"}, y_title="%") is None
    assert timeseries.activity_chart(s, gpu_util=[None, None], gpu_sm=[None, None],
                                     nic_pct=[None, None], nvlink_pct=[None, None]) is None
    assert timeseries.jobs_timeline([], T0, T0) is None
    assert usage.usage_bars([]) is None


def test_link_load_is_the_busier_direction_against_capacity():
    nics = [Nic(id=1, name="mlx5_0:1", kind="infiniband", link_bytes_per_s=50e9),
            Nic(id=2, name="mlx5_1:1", kind="infiniband", link_bytes_per_s=50e9),
            Nic(id=3, name="eth0", kind="ethernet", link_bytes_per_s=3.125e9)]
    fabric = derived.fabric_nics(nics)
    assert [n.name for n in fabric] == ["mlx5_0:1", "mlx5_1:1"]  # management Ethernet left out
    s = series({1: {"rx_bytes_per_s": [45e9, None], "tx_bytes_per_s": [10e9, None]},
                2: {"rx_bytes_per_s": [5e9, 20e9], "tx_bytes_per_s": [25e9, 10e9]}}, 2)
    assert derived.nic_load_pct(s, fabric) == [70.0, 40.0]  # (45 + 25) / 100; 20 / 50

    gpus = [Gpu(id=7, nvlink_bytes_per_s=450e9), Gpu(id=8, nvlink_bytes_per_s=None)]
    g = series({7: {"nvlink_tx_bytes_per_s": [405e9, None], "nvlink_rx_bytes_per_s": [90e9, None]},
                8: {"nvlink_tx_bytes_per_s": [1e9, 1e9], "nvlink_rx_bytes_per_s": [1e9, 1e9]}}, 2)
    assert derived.nvlink_load_pct(g, gpus) == [90.0, None]


def test_activity_chart_puts_gpus_and_links_on_one_axis():
    s = series({}, 3)
    fig = timeseries.activity_chart(s, gpu_util=[10.0, 90.0, 12.0], gpu_sm=[None] * 3,
                                    nic_pct=[92.0, 3.0, 91.0], nvlink_pct=[None] * 3)
    data = to_json(fig)["data"]
    assert [t["name"] for t in data] == ["NIC traffic, % of link capacity",
                                         "GPU utilization (NVML), mean over GPUs"]
    assert (data[0]["x0"], data[0]["dx"]) == (data[1]["x0"], data[1]["dx"])
    assert fig.layout.yaxis.range == (0, 102)


def test_jobs_timeline_clips_bars_to_the_range():
    allocs = [{"job_id": 5, "label": "812345", "user": "alice", "name": "ft", "gpu_index": 0,
               "start": T0 - dt.timedelta(hours=1), "end": T0 + dt.timedelta(minutes=30),
               "running": False}]
    fig = timeseries.jobs_timeline(allocs, T0, T0 + dt.timedelta(hours=1)).to_plotly_json()
    bar = fig["data"][0]
    assert list(bar["base"]) == ["2026-11-22 12:00:00"]
    assert list(bar["x"]) == [30 * 60 * 1000]
    assert list(bar["customdata"]) == [5]


def test_many_gpus_share_a_chart_s_point_budget():
    assert points_per_series(1) == 600 and points_per_series(8) == 600
    assert points_per_series(16) == 600 and points_per_series(32) == 300
    assert points_per_series(1024) == 60


def test_names_cannot_inject_markup():
    allocs = [{"job_id": 5, "label": "<img src=x onerror=alert(1)>", "user": "eve",
               "name": "</script><script>alert(1)</script>", "gpu_index": 0,
               "start": T0, "end": T0 + dt.timedelta(minutes=30), "running": False}]
    chart = to_json(timeseries.jobs_timeline(allocs, T0, T0 + dt.timedelta(hours=1)))
    assert "<img" not in chart.text and "<script>" not in chart.text
    html = figure_script(chart, "fig-jobs")
    assert html.count("</script>") == 1 and html.endswith("</script>")
    inner = html[html.index(">") + 1:-len("</script>")]
    assert json.loads(inner)["data"][0]["hovertext"][0].startswith("<b>job &lt;img")


@pytest.mark.parametrize("nodes", [1, 16, 48, 49, 64, 99, 100, 150, 1000])
def test_heatmap_has_a_column_per_node_and_labels_only_where_they_fit(nodes):
    """Between 49 and 99 nodes the heatmap was padded to 100 columns: phantom x labels
    ("86…99") and overlapping cell numbers. Checked on the figure's data, not pixels."""
    fig = to_json(heatmap.utilization_heatmap(cells(nodes, 8)))
    util = fig["data"][1]
    ids = matrix(util["customdata"])
    columns = len(ids[0])
    assert columns == min(nodes, 48 if nodes <= 48 else 100)
    first_band = {n for row in ids[:8] for n in row}
    assert first_band == set(range(1, columns + 1))  # no column without a node in band 1
    shown = {n for row in ids for n in row} - {None}
    assert shown == set(range(1, nodes + 1))  # every node once
    xaxis = fig["layout"]["xaxis"]
    assert len(xaxis["tickvals"]) == len(xaxis["ticktext"])  # no tick without its name
    if nodes <= 48:
        assert xaxis["ticktext"] == [f"gpu-a{n:04d}" for n in range(1, nodes + 1)]
        assert len(util["text"][0]) == nodes  # in-cell numbers, one per column
    else:  # no in-cell numbers and no per-node ticks: they would overlap
        assert "text" not in util and xaxis["tickvals"] == []
        bands = fig["layout"]["yaxis"]["ticktext"]
        assert bands[0].startswith("gpu-a0001") and bands[-1].endswith(f"gpu-a{nodes:04d}")


def test_node_strip_has_one_row_per_node_on_the_shared_time_axis():
    from clusterui.web.figures import nodestrip

    s = series({}, 3)
    fig = to_json(nodestrip.node_strip(
        s, [("gpu-a001", [48.0, 47.0, None]), ("gpu-a002", [80.0, 79.0, 81.0]),
            ("gpu-<b>", [49.0, None, 50.0])], quantity="SM activity (GPM)"))
    strip = fig["data"][0]
    assert strip["type"] == "heatmap"
    assert strip["y"] == ["gpu-a001", "gpu-a002", "gpu-&lt;b&gt;"]  # names escaped
    assert matrix(strip["z"]) == [[48, 47, None], [80, 79, 81], [49, None, 50]]
    assert (strip["x0"], strip["dx"]) == (timeseries.time_axis(s)["x0"], 10_000)
    assert (strip["zmin"], strip["zmax"]) == (0, 100)
    assert "SM activity (GPM) <b>%{z:.0f} %</b>" in strip["hovertemplate"]
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"  # the first node on top
    # One node, or nodes without data: nothing to compare, no strip.
    assert nodestrip.node_strip(s, [("gpu-a001", [1.0, 2.0, 3.0])], quantity="x") is None
    assert nodestrip.node_strip(s, [("a", [1.0, 2.0, 3.0]), ("b", [None] * 3)],
                                quantity="x") is None


def test_node_strip_of_a_256_node_job_stays_on_one_screen():
    from clusterui.web.figures import nodestrip

    rows = [(f"gpu-a{i:04d}", [50.0] * 60) for i in range(256)]
    fig = to_json(nodestrip.node_strip(series({}, 60), rows, quantity="x"))
    assert len(matrix(fig["data"][0]["z"])) == 256
    assert fig["layout"]["height"] <= nodestrip.MAX_HEIGHT
