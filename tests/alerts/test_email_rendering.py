"""What an alert email looks like: the evidence in words and units, and the HTML part as a
mail client shows it (headless Chromium; the screenshot lands in test-output/email/)."""

import datetime as dt
import html
import re
from html.parser import HTMLParser

import pytest
from django.utils import timezone

from clusterui.alerts.emails import evidence_rows
from clusterui.alerts.tasks import send_alerts
from tests.alerts.factories import make_efficiency, make_finding, make_job
from tests.services import OUTPUT

# A finding's evidence as the detectors write it: figures, a bit mask, nested breakdowns.
EVIDENCE = {
    "util_mean_pct": 8.04, "window_min": 60.0, "gpus": 8, "sustained": True,
    "sm_active_mean_pct": None, "cpu_used_pct_of_allocated": 97.14,
    "gpu_hours_wasted": 12.46, "reason_bits": 96, "per_node": {"gpu-a001": 1},
    "traffic_peak_pct": 92.5, "clock_mhz": 1320.0,
    "idle_gpus": [{"node": "gpu-a001", "index": i, "util_mean_pct": 0.3} for i in (1, 2)],
    "events": [{"ts": "2026-11-22T10:00:00", "kind": "xid", "code": 79, "node": "gpu-a001",
                "index": 1}],
    "xid_codes": [79, 48],
}


def test_evidence_is_said_in_words_and_units():
    """Each figure with its label and unit, as the job page says it: the email kept its
    own words, so "7.94 %" by mail was "7.9 %" on the page and a rate in GB/s there Gb/s."""
    rows = dict(evidence_rows(EVIDENCE))
    assert rows == {
        "Mean utilization (NVML)": "8.0 %", "Window": "60 min", "GPUs": "8", "Sustained": "yes",
        "Mean SM activity": "not reported", "Host CPU used, of allocation": "97.1 %",
        "GPU-hours wasted": "12.46 GPU-h", "Peak traffic": "92.5 %", "SM clock": "1,320 MHz",
        "Idle GPUs": "gpu-a001 · GPU 1: 0.3 %; gpu-a001 · GPU 2: 0.3 %",
        "Latest events": "10:00 Xid 79 on gpu-a001 · GPU 1", "Xid codes": "79, 48",
    }  # bit masks and nested breakdowns are left to the job page
    assert list(rows) == sorted(rows, key=str.lower)  # jsonb keeps no key order


class _Evidence(HTMLParser):
    """The job page's evidence list (``<dl class="evidence">``): label -> its value, a list's
    items joined with "; " as the email joins them."""

    def __init__(self):
        super().__init__()
        self.rows, self._in, self._tag, self._label, self._items = {}, False, None, None, []

    def handle_starttag(self, tag, attrs):
        if tag == "dl" and ("class", "evidence") in attrs:
            self._in = True
        elif self._in and tag in ("dt", "dd", "li"):
            self._tag = tag
            if tag == "dd":
                self._items = [""]
            elif tag == "li":
                self._items.append("")

    def handle_endtag(self, tag):
        if tag == "dl":
            self._in = False
        elif self._in and tag == "dd":
            self.rows[self._label] = "; ".join(i.strip() for i in self._items if i.strip())
            self._tag = None

    def handle_data(self, data):
        if self._tag == "dt":
            self._label = data.strip()
        elif self._tag in ("dd", "li"):
            self._items[-1] += data


def test_the_email_says_the_evidence_as_the_job_page_does(smtp, cast, client):
    """The same finding, sent through a real SMTP server and opened on its job page: every
    figure in the email's text and HTML parts reads as the page's evidence list says it."""
    job = make_job("alice")
    make_finding(job, evidence=EVIDENCE)
    assert send_alerts()["sent"] == 1
    [mail] = smtp.received
    body = mail.text.replace("\r\n", "\n")  # SMTP line ends
    text = body.split("The numbers behind it:\n", 1)[1].split("\nWHY", 1)[0]
    by_text = {line[2:34].rstrip(): line[35:] for line in text.splitlines() if line.strip()}
    by_html = dict(re.findall(r'<tr><td style="[^"]*">([^<]*)</td><td align="right" '
                              r'style="[^"]*">([^<]*)</td></tr>', mail.html))
    by_html = {html.unescape(k): html.unescape(v) for k, v in by_html.items()}

    client.force_login(cast["owner"])
    parser = _Evidence()
    parser.feed(client.get(f"/jobs/{job.pk}/").content.decode())
    page = parser.rows

    assert len(by_text) == 12 and by_text == by_html
    assert {label: page[label] for label in by_text} == by_text
    # what the email leaves to the page: bit masks and nested breakdowns
    assert set(page) - set(by_text) >= {"Per node"}


def test_every_label_fits_the_text_parts_column():
    from clusterui.web.templatetags.web_format import LABELS

    assert [label for label in LABELS.values() if len(label) > 32] == []


def test_a_long_value_is_cut_in_the_email_not_in_the_page():
    ports = [{"name": f"mlx5_{i}:1", "kind": "infiniband", "state": 4, "phys_state": 5,
              "width": 1, "gbps": 100, "nominal_gbps": 400, "nominal_width": 4, "errors": {},
              "counters_saturated": 0, "down": False, "degraded": True, "pause_storm": False}
             for i in range(8)]  # as findings/detectors/fabric_link.py writes them
    [(label, value)] = evidence_rows({"ports": ports})
    assert len(value) == 240 and value.endswith("…") and value.startswith("mlx5_0:1 (infiniband)")


def test_evidence_that_is_not_a_mapping_shows_nothing():
    assert evidence_rows(["not", "a", "dict"]) == []
    assert evidence_rows({}) == []


def realistic_finding():
    """A low-utilization finding shaped as the detector writes it."""
    job = make_job("alice", name="llama-ft-7b", account="nlp", minutes=125)
    make_efficiency(job, allocated=16.67, wasted=15.31, gpus=8)
    start = timezone.now() - timezone.timedelta(hours=1)
    return job, make_finding(
        job, severity="critical", wasted=15.31, window_start=start,
        title="Low GPU utilization: 8.1 % on 8 GPUs",
        explanation="Over the last 60 min the job's 8 GPUs averaged 8.1 % utilization (SM "
                    "activity 5.3 %), below the 25 % threshold. Since it started it has used "
                    "1.4 of its 16.7 allocated GPU-hours: 15.3 GPU-hours wasted.",
        suggestion="Request fewer GPUs, or give each one more work: a larger batch size, more "
                   "data-loader workers, or several experiments per GPU (MPS or MIG). Release "
                   "GPUs held by interactive sessions while they are idle.",
        evidence={"window_min": 60.0, "gpus": 8, "util_mean_pct": 8.1,
                  "sm_active_mean_pct": 5.3, "threshold_pct": 25, "gpu_hours_allocated": 16.67,
                  "gpu_hours_used": 1.36, "gpu_hours_wasted": 15.31})


@pytest.mark.django_db
def test_the_html_part_renders_self_contained_and_fits_a_mail_pane(smtp, cast):
    from playwright.sync_api import sync_playwright

    job, _ = realistic_finding()
    send_alerts()
    [mail] = smtp.received
    out = OUTPUT / "email"
    out.mkdir(parents=True, exist_ok=True)
    (out / "finding.eml").write_bytes(mail.message.as_bytes())
    (out / "finding.txt").write_text(f"Subject: {mail.subject}\n\n{mail.text}")
    html = mail.html

    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            page = browser.new_page(viewport={"width": 700, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.set_content(html, wait_until="load")
            assert page.evaluate("document.documentElement.scrollWidth") <= 700
            body = page.inner_text("body").lower()  # headings are upper-cased by CSS
            for needle in ("Critical", "Low GPU utilization on job", "15.3", "GPU-hours wasted",
                           "8 %", "What happened", "The numbers behind it", "Why",
                           "What to do", "Stop emails about"):
                assert needle.lower() in body, needle
            button = page.get_by_role("link", name=f"Open job {job.external_id}")
            assert button.get_attribute("href") == f"http://clusterui.test/jobs/{job.pk}/"
            page.screenshot(path=str(out / "finding.png"), full_page=True)
        finally:
            browser.close()
    assert [r for r in requests if not r.startswith(("about:", "data:"))] == []  # no fetches


@pytest.mark.django_db
def test_a_partly_measured_job_says_so_beside_its_waste(smtp, cast):
    """A job ClusterUI began measuring late (the collector came after it started): its
    waste so far takes the unmeasured time to be like the measured, and the email says so
    as the job page does, in both parts. A job measured throughout gets no such line."""
    job, _ = realistic_finding()  # started 125 min ago
    eff = job.efficiency
    eff.measured_from = eff.window_end - dt.timedelta(minutes=25)  # 20 % of the window
    eff.save()
    whole, _ = realistic_finding()
    whole.efficiency.measured_from = whole.efficiency.window_start
    whole.efficiency.save()
    send_alerts()
    mails = {m.subject.split("job ")[-1].split()[0]: m for m in smtp.received}
    late = mails[job.external_id]
    start = timezone.localtime(eff.window_start).strftime("%H:%M")
    line = (f"the samples cover 20 % of the time since the job started at {start}. For "
            "the 1 hour, 40 minutes before, these figures take the job to have run as it did "
            "since")
    assert late.subject.endswith("(about 15.3 GPU-h wasted)")
    assert mails[whole.external_id].subject.endswith(" (15.3 GPU-h wasted)")
    assert "Measured from" in late.text and line in " ".join(late.text.split())
    assert line in " ".join(re.sub(r"<[^>]+>", "", late.html).split())
    assert "Measured from" not in mails[whole.external_id].text
    assert "Measured from" not in mails[whole.external_id].html


# A straggler finding's evidence as the detector stored it in the demo (simulated cluster,
# job 813066, findings/detectors/straggler.py): 26 keys.
STRAGGLER_EVIDENCE = {
    "node": "gpu-a008",
    "drain": 'scontrol update nodename=gpu-a008 state=drain reason="straggler: erroring fabric '
             'port (ClusterUI)"',
    "nodes": 2, "exclude": "sbatch --exclude=gpu-a008 ...", "reasons": ["errors"],
    "per_node": [{"gpus": 8, "node": "gpu-a008", "busy_pct": 57.8, "fabric_pct": 14.9,
                  "port_errors": 2461, "throttled_share_pct": 0.0},
                 {"gpus": 8, "node": "gpu-a009", "busy_pct": 57.8, "fabric_pct": 21.3,
                  "port_errors": 0, "throttled_share_pct": 0.0}],
    "lost_basis": "the job's GPUs' time not busy x (1 - the node's traffic / its peers')",
    "window_min": 18.4, "busy_source": "SM activity", "busy_gap_pct": 0.0,
    "node_busy_pct": 57.8, "lost_gpu_hours": 0.62, "peers_busy_pct": 57.8,
    "node_fabric_pct": 14.9,
    "node_port_errors": {"symbol_error": 2220, "port_rcv_errors": 222, "link_error_recovery": 19},
    "peers_fabric_pct": 21.3, "reference_clock_mhz": None, "node_throttle_reasons": "",
    "peers_port_errors_max": 0, "port_errors_threshold": 10, "busy_gap_threshold_pct": 15.0,
    "fabric_ratio_threshold": 0.5, "node_port_errors_total": 2461,
    "wait_gap_threshold_pct": 5.0, "node_throttled_clock_mhz": None,
    "node_throttled_share_pct": 0.0, "error_traffic_ratio_threshold": 0.85,
}


def test_a_stragglers_email_compares_the_node_with_its_peers():
    """The email cut the table at 14 rows by label: the node's figures stayed ("Node busy
    57.8 %", "Node fabric 14.9 %"), its peers' (later in the alphabet) went, and an empty
    list of throttle reasons read as nothing at all."""
    rows = dict(evidence_rows(STRAGGLER_EVIDENCE))
    assert rows["Its fabric traffic, of capacity"] == "14.9 %"
    assert rows["Peers' fabric traffic (median)"] == "21.3 %"
    assert rows["Its GPUs busy"] == "57.8 %" and rows["Peers' GPUs busy (median)"] == "57.8 %"
    assert rows["Its throttle reasons"] == "none"
    assert rows["GPU-hours lost"] == "0.62 GPU-h"
    assert rows["Per node"].startswith("gpu-a008: GPUs 8, busy 57.8 %")
    assert all(value for value in rows.values())
    assert "Its port error counters' rise" not in rows  # a breakdown: the job page has it
    assert max(map(len, rows)) <= 32  # the text part's label column (finding-body.txt)
