"""Alert emails: three templates each (``templates/emails/<name>-subject.txt``,
``-body.txt`` and ``-body.html``), rendered from the database at send time."""

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.core.mail.message import make_msgid
from django.template.loader import render_to_string
from django.urls import reverse

from clusterui.alerts import digest, jobend, jobreport
from clusterui.alerts.choices import DIGEST, JOB_END, EmailStatus, RecipientRole, category_label
from clusterui.alerts.models import AlertEmail
from clusterui.alerts.preferences import unsubscribe_url
from clusterui.fabric.health import is_port_evidence, port_evidence_text
from clusterui.findings.choices import Severity
from clusterui.findings.models import JobEfficiency

EFFICIENCY_FIELDS = ("job", "gpus", "gpu_hours_allocated", "gpu_hours_used", "gpu_hours_wasted",
                     "window_start", "window_end", "measured_from")  # + partly_measured


def make_message(name: str, to: str, context: dict, headers: dict) -> EmailMultiAlternatives:
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", context).split())
    text = re.sub(r"\n{3,}", "\n\n", render_to_string(f"emails/{name}-body.txt", context)).strip()
    html = render_to_string(f"emails/{name}-body.html", context)
    message = EmailMultiAlternatives(subject, text + "\n", to=[to], headers=headers)
    message.attach_alternative(html, "text/html")
    return message


def build(email: AlertEmail, *, limit_reached: bool = False) -> EmailMultiAlternatives:
    """The message for a queued email, with its personal unsubscribe link."""
    unsubscribe = unsubscribe_url(email.to, email.category)
    context = {
        "email": email,
        "site_url": settings.SITE_URL,
        "preferences_url": settings.SITE_URL + reverse("alert-preferences"),
        "findings_url": settings.SITE_URL + reverse("findings"),
        "unsubscribe_url": unsubscribe,
        "category_label": category_label(email.category),
        "limit_reached": limit_reached,
        "daily_limit": settings.ALERT_DAILY_LIMIT,
    }
    headers = {
        "Message-ID": make_msgid("clusterui", domain=urlsplit(settings.SITE_URL).hostname),
        "List-Unsubscribe": f"<{unsubscribe}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        "Auto-Submitted": "auto-generated",
        "X-Auto-Response-Suppress": "All",
        "X-ClusterUI-Category": email.category,
    }
    if email.category == DIGEST:
        context.update(digest.context())
        return make_message("digest", email.to, context, headers)
    if email.category == JOB_END:
        context.update(job_end_context(email))
        return make_message("job-end", email.to, context, headers)
    context.update(finding_context(email))
    thread = _first_in_thread(email)
    if thread:  # an escalation threads under the first email about this job and kind
        headers["In-Reply-To"] = headers["References"] = thread
    return make_message("finding", email.to, context, headers)


def finding_context(email: AlertEmail) -> dict:
    finding = email.finding
    job = finding.job
    efficiency = (JobEfficiency.objects.filter(job=job).only(*EFFICIENCY_FIELDS).first()
                  if job is not None else None)
    if job is not None:
        target = f"job {job.external_id}"
        link = settings.SITE_URL + reverse("job-detail", args=[job.pk])
    elif finding.node_id:
        target = f"node {finding.node.name}"
        link = settings.SITE_URL + reverse("node-detail", args=[finding.node_id])
    else:
        target, link = "the cluster", settings.SITE_URL + reverse("home")
    previous = email.previous_severity
    return {
        "finding": finding,
        "job": job,
        "efficiency": efficiency,
        "target": target,
        "link": link,
        "severity": Severity(finding.severity),
        "escalated_from": Severity(previous) if previous else None,
        "evidence": evidence_rows(finding.evidence),
        "why_you": _why_you(email, job),
    }


def job_end_context(email: AlertEmail) -> dict:
    """The job's report (the API's answers, printed as ``clusterui jobstats`` prints them)
    and what the HTML part shows of it."""
    job = email.job
    report = jobreport.answers(job.pk)
    detail = report["job"]
    eff = detail["efficiency"] or {}
    share = jobend.wasted_share(job.efficiency)
    _wanted, why = jobend.decide(job, email.to)
    return {
        "job": job,
        "report": jobreport.text(report),
        "efficiency": eff,
        "findings": detail["findings"],
        "wasted_pct": None if share is None else 100.0 * share,
        "run_time_min": jobend.runtime_s(job) / 60.0,
        "target": f"job {job.external_id}",
        "link": jobreport.job_url(job),
        "why_you": why,
        "threshold_pct": 100.0 * settings.JOBEND_EMAIL_WASTE_SHARE,
    }


def _why_you(email: AlertEmail, job) -> str:
    if email.role == RecipientRole.OWNER:
        return f"you own {('job ' + job.external_id) if job else 'this job'}"
    if email.role == RecipientRole.ACCOUNT_MANAGER and job is not None:
        return f"you manage the account {job.account}"
    return "you are a ClusterUI administrator"


def _first_in_thread(email: AlertEmail) -> str | None:
    scope = {"job": email.job_id} if email.job_id else {"finding": email.finding_id}
    return (AlertEmail.objects.filter(**scope, category=email.category, to=email.to,
                                      status=EmailStatus.SENT)
            .exclude(message_id="").order_by("sent_at").values_list("message_id", flat=True)
            .first())


# --- evidence, for people ----------------------------------------------------------------

_UNITS = [  # key suffix -> unit shown after the value
    ("_bytes_per_s", "B/s"), ("_gpu_hours", "GPU-h"), ("_pct", "%"), ("_mib", "MiB"),
    ("_gib", "GiB"), ("_bytes", "B"), ("_mhz", "MHz"), ("_w", "W"), ("_c", "°C"),
    ("_hours", "h"), ("_minutes", "min"), ("_min", "min"), ("_s", "s"),
]
_WORDS = {
    "util": "utilization", "mem": "memory", "sm": "SM", "gpu": "GPU", "gpus": "GPUs",
    "cpu": "CPU", "cpus": "CPUs", "nic": "NIC", "nvlink": "NVLink", "ib": "InfiniBand",
    "pcie": "PCIe", "xid": "Xid", "gpm": "GPM", "nvml": "NVML", "rx": "RX", "tx": "TX",
    "dram": "DRAM", "temp": "temperature", "avg": "average", "active": "activity",
}
_LEADING = {"mean", "peak", "max", "min", "average", "median", "p5", "p95", "total"}
MAX_EVIDENCE_ROWS = 14


def evidence_rows(evidence) -> list[tuple[str, str]]:
    """The finding's evidence as (label, value) pairs a person can read:
    ``{"mean_util_pct": 7.94}`` -> ``[("Mean utilization", "7.94 %")]``."""
    if not isinstance(evidence, dict):
        return []
    rows = []
    for key, value in evidence.items():
        stem, unit = str(key), ""
        if isinstance(value, dict) or stem.endswith("_bits"):
            continue  # breakdowns and bit masks belong on the job page, not in an email
        if isinstance(value, list) and value and all(map(is_port_evidence, value)):
            value = " · ".join(port_evidence_text(v) for v in value)  # a fabric link's ports
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            value = _gpu_list(value)
            if value is None:
                continue  # per-event detail (the job page lists it)
        if "_pct_of_" in stem:  # cpu_used_pct_of_allocated -> "CPU used of allocated", %
            stem, unit = stem.replace("_pct_of_", "_of_"), "%"
        for suffix, name in ([] if unit else _UNITS):
            if stem.endswith(suffix) and len(stem) > len(suffix):
                unit, stem = name, stem[: -len(suffix)]
                break
        words = [_WORDS.get(w, w) for w in stem.split("_") if w]
        if len(words) > 1 and words[-1] in _LEADING:  # util_mean -> "mean utilization"
            words.insert(0, words.pop())
        label = " ".join(words).replace("GPU hours", "GPU-hours")
        label = label[:1].upper() + label[1:]
        rows.append((label, _value(value, unit)))
    # jsonb keeps no key order: sort by label, so the same evidence always reads the same way.
    return sorted(rows, key=lambda row: row[0].lower())[:MAX_EVIDENCE_ROWS]


def _gpu_list(items: list) -> str | None:
    """``[{"node": "gpu-a001", "index": 3, "util_mean_pct": 0.4}, ...]`` ->
    "gpu-a001 GPU 3 (0.4 %), ..."; None when the items are not GPUs."""
    if not all(isinstance(i, dict) and "node" in i and "index" in i for i in items):
        return None
    shown = []
    for item in items[:6]:
        others = [(k, v) for k, v in item.items() if k not in {"node", "index"}]
        label = f"{item['node']} GPU {item['index']}"
        if len(others) == 1 and isinstance(others[0][1], int | float):
            [(key, number)] = others
            unit = next((name for suffix, name in _UNITS if key.endswith(suffix)), "")
            label += f" ({_value(number, unit)})"
        shown.append(label)
    return ", ".join(shown) + (f" and {len(items) - 6} more" if len(items) > 6 else "")


def _value(value, unit: str) -> str:
    if value is None:
        return "not reported"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if unit in {"B", "B/s"}:
            return _bytes(float(value)) + ("/s" if unit == "B/s" else "")
        return f"{_number(value)} {unit}".strip()
    if isinstance(value, list | tuple):
        items = [_value(v, unit) for v in value[:8]]
        return ", ".join(items) + (", …" if len(value) > 8 else "")
    text = str(value)
    return text if len(text) <= 240 else text[:239] + "…"


def _number(value) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.001 or value == 0 else f"{value:.2e}"


def _bytes(value: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{_number(value)} {unit}"
        value /= 1000
    return f"{value} B"  # not reached
