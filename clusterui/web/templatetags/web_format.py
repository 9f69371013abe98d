"""Number, duration and evidence formatting for the web templates."""

import datetime as dt
import numbers

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from clusterui.fabric.health import is_port_evidence, port_evidence_text
from clusterui.web.colors import text_on, viridis
from collectors.client.report import one_line

register = template.Library()


@register.filter
def oneline(value) -> str:
    """A name a node reported (a job's name, user, account, partition; a node's, GPU's or
    NIC's name; a finding's text, which quotes them), on a page or in an email: on one line,
    without control characters, escape sequences or bidirectional overrides
    (``collectors.client.report.one_line``). In HTML autoescaping still applies after it; it
    is there for the overrides, which reorder the rest of a line in HTML as in text, and
    make a name read as another ("\u202egnp.exe" reads "exe.png")."""
    return "" if value is None else one_line(value)


@register.filter
def job_who(job) -> str:
    """Whose a job is, on one line: its user and its account (Slurm) or namespace
    (Kubernetes, whose jobs have no user), those known, joined by " · "; "" when none is."""
    return " · ".join(one_line(p) for p in (job.user, job.account or job.namespace) if p)


@register.simple_tag
def figure_script(chart, element_id: str):
    """A chart's JSON in a ``<script type="application/json">`` for charts.js: like
    ``json_script``, with <, > and & escaped so the text cannot close the tag, but without
    encoding the figure a second time."""
    text = (chart.text.replace("<", "\\u003C").replace(">", "\\u003E")
            .replace("&", "\\u0026"))
    return format_html('<script id="{}" type="application/json">{}</script>', element_id,
                       mark_safe(text))


@register.filter
def duration(value) -> str:
    """A timedelta (or seconds) as "3 d 4 h", "2 h 05 min", "12 min", "40 s"."""
    if value is None or value == "":
        return "–"
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"


@register.filter
def gbps(bytes_per_s) -> str:
    """A rate in bytes/s as network people read it: bits per second."""
    if bytes_per_s is None:
        return "–"
    bits = float(bytes_per_s) * 8
    for unit, size in (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bits >= size:
            return f"{bits / size:,.1f} {unit}".replace(".0 ", " ")
    return f"{bits:,.0f} b/s"


@register.filter
def gib(mib) -> str:
    if mib is None:
        return "–"
    return f"{float(mib) / 1024:,.1f} GiB"


@register.filter
def hours(value) -> str:
    """GPU-hours with a precision that fits their size."""
    return amount(value)


@register.filter
def amount(value) -> str:
    """A quantity (GPU-hours, kWh) with a precision that fits its size."""
    if value is None:
        return "–"
    value = float(value)
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:,.1f}"
    return f"{value:,.2f}"


@register.filter
def kwh(joules) -> str:
    if joules is None:
        return "–"
    value = float(joules) / 3.6e6
    return f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


@register.filter
def pct(value, digits=0) -> str:
    if value is None:
        return "–"
    return f"{float(value):.{int(digits)}f} %"


@register.filter
def util_style(value) -> str:
    """Inline style colouring a utilization (0-100) on the viridis scale."""
    if value is None:
        return ""
    f = float(value) / 100
    return f"background:{viridis(f)};color:{text_on(f)}"


@register.filter
def bar_width(value, total) -> str:
    """``value`` as a % of ``total`` for a CSS width, clipped to 0-100."""
    try:
        share = 100.0 * float(value) / float(total)
    except (TypeError, ValueError, ZeroDivisionError):
        return "0%"
    return f"{max(0.0, min(100.0, share)):.1f}%"


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None


# What the detectors' evidence keys mean to a reader; others are spelled out from the key.
LABELS = {
    "gpus": "GPUs", "nodes": "Nodes", "window_min": "Window", "count": "Error events",
    "events": "Latest events",
    "threshold_pct": "Threshold", "util_mean_pct": "Mean utilization (NVML)",
    "sm_active_mean_pct": "Mean SM activity", "busy_source": "Busy measured by",
    "busy_mean_pct": "Mean busy", "nic_mean_pct": "Mean NIC traffic, of capacity",
    "nvlink_mean_pct": "Mean NVLink traffic, of capacity", "cpus_per_node": "CPUs per node",
    "cpu_used_pct_of_allocated": "Host CPU used, of allocation",
    "sm_threshold_pct": "SM activity threshold", "util_threshold_pct": "Utilization threshold",
    "xid_codes": "Xid codes", "idle_gpus": "Idle GPUs", "working_gpus": "Working GPUs",
    "idle_threshold_pct": "Idle below", "idle_gpu_hours_wasted": "GPU-hours wasted by idle GPUs",
    "gpu_hours_used": "GPU-hours used", "gpu_hours_wasted": "GPU-hours wasted",
    "gpu_hours_allocated": "GPU-hours allocated", "reasons": "Reasons", "clock_mhz": "SM clock",
    "reason_bits": "Reason bits", "clock_threshold_pct": "Clock threshold, of reference",
    "reference_clock_mhz": "Reference clock", "share_threshold_pct": "Time-throttled threshold",
    "throttled_share_pct": "Time throttled", "link": "Link", "sustained": "Sustained",
    "traffic_mean_pct": "Mean traffic, of capacity", "traffic_peak_pct": "Peak traffic",
    "dips_with_traffic": "Utilization dips at peak traffic",
    "correlation_points": "Samples correlated", "traffic_threshold_pct": "Traffic threshold",
    "traffic_high_share_pct": "Time above threshold",
    "busy_traffic_correlation": "Busy-traffic correlation",
    "clock_pct_of_reference": "Clock, of reference",
    "node_port_errors": "Its port error counters' rise",
    "node_port_errors_total": "Its port errors, total",
    "peers_port_errors_max": "Most port errors on a peer",
    "port_errors_threshold": "Port errors threshold",
    "error_traffic_ratio_threshold": "Erroring port traffic ratio",
    "measured_pct": "Share of the run measured",
    # A straggler's: "its" is the node that holds the job back, "peers" the job's others.
    "node_busy_pct": "Its GPUs busy", "peers_busy_pct": "Peers' GPUs busy (median)",
    "busy_gap_pct": "Busy gap, it less its peers",
    "node_throttled_share_pct": "Its time throttled",
    "node_throttle_reasons": "Its throttle reasons",
    "node_throttled_clock_mhz": "Its SM clock while throttled",
    "node_fabric_pct": "Its fabric traffic, of capacity",
    "peers_fabric_pct": "Peers' fabric traffic (median)",
    "lost_gpu_hours": "GPU-hours lost", "lost_basis": "Lost GPU-hours counted as",
    "exclude": "Resubmit with", "drain": "Drain with",
    "busy_gap_threshold_pct": "Busy gap threshold", "wait_gap_threshold_pct": "Wait gap threshold",
    "fabric_ratio_threshold": "Fabric traffic ratio threshold",
    "per_node": "Per node",
}
WORDS = {"pct": "", "util": "utilization", "gpu": "GPU", "gpus": "GPUs", "sm": "SM",
         "nic": "NIC", "nvlink": "NVLink", "cpu": "CPU", "cpus": "CPUs", "mib": "", "mem": "memory",
         "xid": "Xid", "w": "", "c": "", "s": "", "mhz": "", "min": "", "corr": "correlation",
         "pcie": "PCIe"}
UNITS = (
    ("_hours", "{:,.2f} h"),
    ("_mib", "{:,.0f} MiB"), ("_w", "{:,.0f} W"), ("_c", "{:.0f} °C"), ("_mhz", "{:,.0f} MHz"),
    ("_min", "{:,.0f} min"), ("_s", "{:,.0f} s"),
)
LIST_SHOWN = 8


def _label(key: str) -> str:
    if key in LABELS:
        return LABELS[key]
    words = [WORDS.get(w, w) for w in key.split("_")]
    text = " ".join(w for w in words if w)
    return text[:1].upper() + text[1:]


def _number(key: str, value) -> str:
    if key.endswith("_bits"):
        return f"0x{int(value):x}"
    if key.endswith("_bytes_per_s"):
        return gbps(value)
    if "gpu_hours" in key:
        return f"{value:,.2f} GPU-h"
    if "_pct" in key:
        return f"{value:.1f} %"
    for suffix, fmt in UNITS:
        if key.endswith(suffix):
            return fmt.format(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3g}"


def _lower_first(label: str) -> str:
    """"Time throttled" -> "time throttled", but "SM clock" stays."""
    return label if label[1:2].isupper() else label[:1].lower() + label[1:]


def _item(entry: dict) -> str:
    """One GPU or event of a list in the evidence: "gpu-a009 · GPU 1: 0.0 %"."""
    if is_port_evidence(entry):
        return port_evidence_text(entry)
    parts = [str(entry["node"])] if entry.get("node") else []
    if entry.get("index") is not None:
        parts.append(f"GPU {entry['index']}")
    where = " · ".join(parts)
    if "ts" in entry:
        what = f"{entry.get('kind', 'event')} {entry.get('code') or ''}".replace("xid", "Xid")
        return f"{str(entry['ts'])[11:16]} {what.strip()} on {where}".strip()
    rest = {k: v for k, v in entry.items() if k not in ("node", "index")}
    if len(rest) == 1:
        text = ", ".join(_value(k, v) for k, v in rest.items())
    else:
        text = ", ".join(f"{_lower_first(_label(k))} {_value(k, v)}" for k, v in rest.items())
    return f"{where}: {text}" if where and text else where or text


def _value(key: str, value):
    if value is None:
        return "not reported"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Number):
        return _number(key, value)
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, dict) for v in value):
            items = [_item(v) for v in value[:LIST_SHOWN]]
            if len(value) > LIST_SHOWN:
                items.append(f"and {len(value) - LIST_SHOWN} more")
            return [one_line(item) for item in items]
        return one_line(", ".join(str(v) for v in value)) if value else "none"
    if isinstance(value, dict):
        return one_line(_item(value))
    if isinstance(value, str) and not value.strip():
        return "none"  # an empty list said as text (no throttle reasons)
    return one_line(value)


@register.filter
def evidence_items(evidence) -> list[tuple[str, object]]:
    """A finding's evidence as (label, value) pairs in the detector's order; a value is a
    formatted string, or a list of them for a list of GPUs or events. Evidence names nodes,
    NICs and jobs as they reported themselves: each value is on one line (``oneline``)."""
    if not isinstance(evidence, dict):
        return []
    return [(_label(k), _value(k, v)) for k, v in evidence.items()]


@register.filter
def is_list(value) -> bool:
    return isinstance(value, list)


@register.filter
def port_verdict(port, threshold) -> str:
    """A fabric port's one word (``fabric.health.PortHealth.verdict``) at the page's error
    threshold."""
    return port.verdict(int(threshold))
