"""The overview's node x GPU heatmap: GPU utilization (NVML), or SM activity (GPM).

NVML's utilization is the share of time any kernel ran, so a GPU busy with copies alone
reads 99-100 % with no SM doing anything (seen on a real H200: ``tests/data/real-h200``);
SM activity says how much of the GPU the kernels use, on GPUs with GPM (Hopper and newer).

Nodes run along x and GPU indexes down y. A large cluster wraps into bands of
``BAND`` nodes, one under the other, so 1,000 nodes stay readable on one screen. Each
cell's ``customdata`` is its node's id: a click opens the node page (charts.js). A small
cluster's cells also show their utilization, or "free" for a GPU no job holds.
"""

from html import escape

import numpy as np
import plotly.graph_objects as go

from clusterui.web.colors import PLOTLY_SCALE
from clusterui.web.figures.common import INK, MUTED

BAND = 100  # nodes per band once a cluster has more than SINGLE_BAND_MAX
SINGLE_BAND_MAX = 48
NO_DATA = "#d5d9e0"
# The metrics a cell can be coloured by: (GpuCell attribute, hover name).
METRICS = {"util": ("util", "utilization"), "sm": ("sm_active", "SM activity")}


def _value(cell, metric: str) -> float | None:
    return getattr(cell, METRICS[metric][0])


def _label(cell, metric: str = "util") -> str:
    if cell.mig:
        return "MIG"
    value = _value(cell, metric)
    if value is None:
        return ""
    return f"{value:.0f}" if cell.allocated else "free"


def _hover(cell, metric: str = "util") -> str:
    """Who the cell is (its value comes from z). Short and ASCII: a 1,000-node cluster
    ships 8,000 of them."""
    head = f"{escape(cell.node)} GPU {cell.index}"  # names are escaped: Plotly reads tags
    if cell.mig:  # NVML gives a MIG-enabled GPU no utilization: say what is held of it
        return f"{head}: MIG, {cell.allocated_share:.0%} allocated to jobs"
    if cell.util is None:
        return f"{head}: no current sample"
    if _value(cell, metric) is None:  # reporting, but without GPM
        return f"{head}: no SM activity (no GPM on this GPU)"
    if cell.job_label:
        return f"{head}, job {escape(cell.job_label)}"
    return f"{head}, {'allocated' if cell.allocated else 'free'}"


def utilization_heatmap(cells, *, band: int = BAND, metric: str = "util") -> go.Figure | None:
    """``cells``: ``snapshot.GpuCell`` in node order, then GPU index; ``metric``: a key of
    ``METRICS``."""
    if not cells:
        return None
    nodes: list[tuple[int, str]] = []
    by_node: dict[int, dict[int, object]] = {}
    for cell in cells:
        if cell.node_id not in by_node:
            by_node[cell.node_id] = {}
            nodes.append((cell.node_id, cell.node))
        by_node[cell.node_id][cell.index] = cell
    gpus = max(c.index for c in cells) + 1
    # Up to SINGLE_BAND_MAX nodes: one named column per node, each cell labelled. More: no
    # labels (they would overlap), bands of ``band`` nodes, and never more columns than
    # nodes (70 nodes padded to 100 columns drew 30 phantom ones).
    single = len(nodes) <= SINGLE_BAND_MAX
    width = min(len(nodes), band) if not single else len(nodes)
    bands = [nodes[i:i + width] for i in range(0, len(nodes), width)]
    rows_per_band = gpus + (1 if len(bands) > 1 else 0)  # a blank row between bands

    # One matrix row per GPU index per band, plus a blank row between bands; NaN where
    # there is no cell. Numeric matrices travel as compact binary (bdata).
    rows = len(bands) * rows_per_band - (1 if len(bands) > 1 else 0)
    z = np.full((rows, width), np.nan, dtype=np.float32)
    missing = np.full((rows, width), np.nan, dtype=np.float32)
    node_ids = np.full((rows, width), np.nan, dtype=np.float32)
    text = np.full((rows, width), "", dtype=object)
    hover = np.full((rows, width), "", dtype=object)  # cells with a sample
    hover_missing = np.full((rows, width), "", dtype=object)  # cells without
    tickvals, ticktext = [], []
    for b, members in enumerate(bands):
        for col, (node_id, _name) in enumerate(members):
            for g, cell in by_node[node_id].items():
                r = b * rows_per_band + g
                node_ids[r, col] = node_id
                text[r, col] = _label(cell, metric)
                value = _value(cell, metric)
                if value is None:
                    missing[r, col] = 1
                    hover_missing[r, col] = _hover(cell, metric)
                else:
                    z[r, col] = value
                    hover[r, col] = _hover(cell, metric)
        if not single:
            tickvals.append(b * rows_per_band + (gpus - 1) / 2)
            ticktext.append(f"{escape(members[0][1])} –<br>{escape(members[-1][1])}")
    if single:
        tickvals = list(range(gpus))
        ticktext = [f"GPU {g}" for g in range(gpus)]

    common = {"customdata": node_ids, "hoverongaps": False, "showscale": False,
              "xgap": 2 if single else 1, "ygap": 2 if single else 1}
    labels = {"text": text, "texttemplate": "%{text}", "textfont": {"size": 11}} if single else {}
    traces = [
        {"type": "heatmap", "z": missing, "colorscale": [[0, NO_DATA], [1, NO_DATA]],
         "zmin": 0, "zmax": 1, "name": "no data", "hovertext": hover_missing,
         "hovertemplate": "%{hovertext}<extra></extra>", **common},
        # No colour bar: the card's legend explains the scale and "no data".
        {"type": "heatmap", "z": z, "colorscale": PLOTLY_SCALE, "zmin": 0, "zmax": 100,
         "name": METRICS[metric][1], "hovertext": hover,
         "hovertemplate": f"%{{hovertext}}<br>{METRICS[metric][1]} <b>%{{z:.0f}} %</b>"
                          "<extra></extra>",
         **common, **labels},
    ]
    row_px = 30 if single else 11
    height = max(160, row_px * rows + (90 if single else 30))
    return go.Figure(data=traces, layout=dict(
        height=height,
        margin={"l": 92 if not single else 56, "r": 10, "t": 6, "b": 70 if single else 10},
        paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12,
              "color": INK},
        xaxis={"showgrid": False, "zeroline": False, "fixedrange": True,
               "tickvals": list(range(width)) if single else [],
               "ticktext": [name for _, name in bands[0]] if single else [],
               "tickangle": -45 if width > 12 else 0, "tickfont": {"size": 11}},
        yaxis={"showgrid": False, "zeroline": False, "autorange": "reversed",
               "fixedrange": True, "tickvals": tickvals, "ticktext": ticktext,
               "tickfont": {"size": 11, "color": MUTED}},
        uirevision="keep",
        template="none",
    ))
