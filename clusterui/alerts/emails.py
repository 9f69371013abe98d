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
from clusterui.findings.choices import Severity
from clusterui.findings.models import JobEfficiency
from clusterui.web.templatetags.web_format import evidence_items

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

MAX_EVIDENCE_ROWS = 32  # a straggler's evidence has 26: its peers' figures must not be cut
MAX_VALUE_CHARS = 240


def evidence_rows(evidence) -> list[tuple[str, str]]:
    """The finding's evidence as (label, value) pairs, in the words and units of the web
    page's evidence (``web_format.evidence_items``, one formatter for both): a list (GPUs,
    events, ports) on one line, bit masks and nested breakdowns left to the page, sorted by
    label (jsonb keeps no key order), so the same evidence always reads the same way."""
    if not isinstance(evidence, dict):
        return []
    rows = []
    for key, (label, value) in zip(evidence, evidence_items(evidence), strict=True):
        if str(key).endswith("_bits") or isinstance(evidence[key], dict):
            continue
        text = "; ".join(value) if isinstance(value, list) else str(value)
        if len(text) > MAX_VALUE_CHARS:
            text = text[:MAX_VALUE_CHARS - 1] + "…"
        rows.append((label, text))
    return sorted(rows, key=lambda row: row[0].lower())[:MAX_EVIDENCE_ROWS]
