"""Time-series charts for the node and job pages, from ``clusterui.telemetry.series``
data. Each function returns a figure, or None when there is nothing to draw (the page
then says why instead of showing an empty frame)."""

import plotly.graph_objects as go

from clusterui.web.figures.common import (
    CAPACITY,
    MUTED,
    color,
    has_values,
    layout,
    local_time,
    local_times,
    scaled,
)

PCT_RANGE = (0, 102)
GIB_PER_MIB = 1 / 1024
GBIT_PER_BYTE = 8 / 1e9


def _capacity_line(fig, value: float, label: str) -> None:
    """A dashed horizontal line, labelled, at a capacity or limit."""
    fig.add_hline(y=value, line={"color": CAPACITY, "width": 1.2, "dash": "dash"},
                  annotation={"text": label, "font": {"size": 10, "color": CAPACITY},
                              "xanchor": "left", "x": 0, "yanchor": "bottom"})


def per_gpu_chart(series, metric: str, labels: dict[int, str], *, y_title: str,
                  scale: float = 1.0, y_range=None, capacities: dict[int, float] | None = None,
                  capacity_label: str = "capacity {:,.0f}", hover_format: str = ".0f"
                  ) -> go.Figure | None:
    """One trace per GPU (``labels``: gpu id -> name, in display order); optional dashed
    lines at the GPUs' capacity (memory size, power limit), one per distinct value,
    labelled by ``capacity_label`` (a format string)."""
    x = local_times(series.ts)
    fig = go.Figure()
    drawn = False
    for i, (gpu_id, label) in enumerate(labels.items()):
        values = series.values.get(gpu_id, {}).get(metric, [])
        if not has_values(values):
            continue
        drawn = True
        fig.add_trace(go.Scatter(
            x=x, y=scaled(values, scale), name=label, mode="lines",
            line={"width": 1.6, "color": color(i)}, connectgaps=False,
            hovertemplate=f"%{{y:{hover_format}}}",
        ))
    if not drawn:
        return None
    for value in sorted({v * scale for v in (capacities or {}).values() if v}):
        _capacity_line(fig, value, capacity_label.format(value))
    fig.update_layout(**layout(y_title=y_title, y_range=y_range,
                               show_legend=len(labels) > 1))
    return fig


def nic_throughput_chart(series, nics) -> go.Figure | None:
    """Receive (solid) and transmit (dotted) per NIC in Gb/s, against each link's
    capacity (dashed)."""
    x = local_times(series.ts)
    fig = go.Figure()
    drawn = False
    for i, nic in enumerate(nics):
        row = series.values.get(nic.id, {})
        for metric, dash, word in (("rx_bytes_per_s", "solid", "rx"),
                                   ("tx_bytes_per_s", "dot", "tx")):
            values = row.get(metric, [])
            if not has_values(values):
                continue
            drawn = True
            fig.add_trace(go.Scatter(
                x=x, y=scaled(values, GBIT_PER_BYTE), name=f"{nic.name} {word}", mode="lines",
                line={"width": 1.5, "color": color(i), "dash": dash},
                legendgroup=nic.name, hovertemplate="%{y:.1f} Gb/s"))
    if not drawn:
        return None
    for cap in sorted({n.link_bytes_per_s for n in nics if n.link_bytes_per_s}):
        names = [n.name for n in nics if n.link_bytes_per_s == cap]
        who = names[0] if len(names) == 1 else f"{len(names)} links"
        _capacity_line(fig, cap * GBIT_PER_BYTE,
                       f"capacity {cap * GBIT_PER_BYTE:,.0f} Gb/s ({who})")
    fig.update_layout(**layout(y_title="Gb/s"))
    return fig


def activity_chart(series, *, gpu_util, gpu_sm, nic_pct, nvlink_pct) -> go.Figure | None:
    """GPU activity and link traffic on one time axis and one 0-100 % scale: a
    communication-bound run shows its GPUs low while its links run near capacity."""
    x = local_times(series.ts)
    fig = go.Figure()
    traces = (
        (nic_pct, "NIC traffic, % of link capacity", "#D55E00", "tozeroy", "solid"),
        (nvlink_pct, "NVLink traffic, % of capacity", "#CC79A7", "tozeroy", "solid"),
        (gpu_util, "GPU utilization (mean over GPUs)", "#0072B2", None, "solid"),
        (gpu_sm, "SM activity (mean over GPUs)", "#009E73", None, "dot"),
    )
    for values, name, colour, fill, dash in traces:
        if not has_values(values):
            continue
        trace = {"x": x, "y": values, "name": name, "mode": "lines",
                 "line": {"width": 2 if fill is None else 1.2, "color": colour, "dash": dash},
                 "hovertemplate": "%{y:.0f} %"}
        if fill:
            trace.update(fill=fill, opacity=0.5)
        fig.add_trace(go.Scatter(**trace))
    if not fig.data:
        return None
    fig.update_layout(**layout(height=300, y_title="% (busy or of capacity)",
                               y_range=PCT_RANGE))
    return fig


def host_cpu_chart(series, job_id: int, *, cpus_per_node: float | None) -> go.Figure | None:
    """The job's host CPU use per node against its allocation: a GPU job with its cores
    saturated and its GPUs waiting is starved by its data loader."""
    values = series.values.get(job_id, {}).get("cpu_cores_used", [])
    if not has_values(values):
        return None
    fig = go.Figure(go.Scatter(
        x=local_times(series.ts), y=values, name="cores used (mean per node)", mode="lines",
        line={"width": 1.8, "color": "#0072B2"}, fill="tozeroy", fillcolor="rgba(0,114,178,.12)",
        hovertemplate="%{y:.1f} cores"))
    if cpus_per_node:
        _capacity_line(fig, cpus_per_node, f"allocated {cpus_per_node:g} cores per node")
    fig.update_layout(**layout(y_title="CPU cores", show_legend=False))
    return fig


def jobs_timeline(allocations, start, end) -> go.Figure | None:
    """The jobs on a node over time, one row per GPU (a Gantt chart). ``allocations``:
    dicts with job_id, label, user, gpu_index, start, end (datetimes), in any order."""
    if not allocations:
        return None
    fig = go.Figure()
    by_job: dict[int, list[dict]] = {}
    for a in allocations:
        by_job.setdefault(a["job_id"], []).append(a)
    rows = sorted({a["gpu_index"] for a in allocations})
    for i, (job_id, items) in enumerate(sorted(by_job.items(),
                                               key=lambda kv: min(a["start"] for a in kv[1]))):
        bases, lengths, ys, hover = [], [], [], []
        for a in items:
            s, e = max(a["start"], start), min(a["end"], end)
            if e <= s:
                continue
            bases.append(local_time(s))
            lengths.append((e - s).total_seconds() * 1000)
            ys.append(f"GPU {a['gpu_index']}")
            hover.append(f"<b>job {a['label']}</b> · {a['user']}<br>{a['name']}<br>"
                         f"{local_time(a['start'])[:16]} → "
                         f"{'running' if a['running'] else local_time(a['end'])[:16]}")
        if not bases:
            continue
        fig.add_trace(go.Bar(
            base=bases, x=lengths, y=ys, orientation="h", name=f"job {items[0]['label']}",
            marker={"color": color(i), "line": {"width": 0}}, text=[items[0]["label"]] * len(ys),
            textposition="inside", insidetextanchor="start", textfont={"color": "#fff"},
            customdata=[job_id] * len(ys), hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
        ))
    if not fig.data:
        return None
    fig.update_layout(**layout(
        height=max(150, 34 * len(rows) + 60), show_legend=False, barmode="overlay", bargap=0.25,
        hovermode="closest",
        yaxis={"categoryorder": "array", "categoryarray": [f"GPU {g}" for g in rows],
               "autorange": "reversed", "gridcolor": "rgba(0,0,0,0)",
               "tickfont": {"color": MUTED}},
    ))
    fig.update_xaxes(type="date", range=[local_time(start), local_time(end)])
    return fig
