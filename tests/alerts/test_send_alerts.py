"""``clusterui.alerts.send_alerts`` called directly, against a real SMTP server: who gets
which email, what it says, and that a job and kind is emailed once (again on escalation)."""

import re
from collections import Counter
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from clusterui.alerts.choices import EmailStatus
from clusterui.alerts.models import AlertEmail, OptOut
from clusterui.alerts.tasks import send_alerts
from clusterui.findings.models import Finding
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.jobs.models import Job
from tests.alerts.factories import make_finding, make_job, make_node, make_user
from tests.factories import node_batch

pytestmark = pytest.mark.django_db


def job_link(text: str) -> str:
    return re.search(r"^Open job \d+: (\S+)\s*$", text, re.M).group(1)


def test_the_owner_gets_one_email_saying_what_why_how_much_and_what_to_do(smtp, cast):
    job = make_job("alice", name="llama-ft")
    finding = make_finding(job)

    assert send_alerts()["sent"] == 1

    [mail] = smtp.received
    assert mail.envelope_to == ["alice@example.org"]
    assert mail.message["To"] == "alice@example.org"
    assert mail.subject == (f'[ClusterUI] Warning: Low GPU utilization on job {job.external_id} '
                            f'"llama-ft" (12.5 GPU-h wasted)')
    for part in (mail.text, mail.html):
        assert "The job&#x27;s 8 GPUs" in part or "The job's 8 GPUs" in part  # what happened
        assert "12.5" in part  # how much is wasted
        assert "Mean utilization" in part and "7.9 %" in part  # the evidence, readable
        assert "most of the GPU time allocated to it went unused" in part  # why
        assert "ask for fewer GPUs next time" in part  # what to do
        assert f"http://clusterui.test/jobs/{job.pk}/" in part  # the job page
        assert "/alerts/unsubscribe/" in part
    assert mail.message.get_body(("plain",))["Content-Type"].startswith("text/plain")
    assert mail.message.get_body(("html",))["Content-Type"].startswith("text/html")
    # (long headers are folded: unfolded, they keep a leading space)
    assert mail.message["List-Unsubscribe"].strip().startswith(
        "<http://clusterui.test/alerts/unsubscribe/")
    assert mail.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert mail.message["Auto-Submitted"] == "auto-generated"

    finding.refresh_from_db()
    assert finding.emailed_at is not None and finding.emailed_severity == "warning"
    email = AlertEmail.objects.get()
    assert (email.status, email.to, email.role, email.attempts) == (
        EmailStatus.SENT, "alice@example.org", "owner", 1)
    assert email.subject == mail.subject and email.message_id == mail.message["Message-ID"].strip()


def test_its_link_opens_the_job_page_for_its_recipient_only(smtp, cast, client):
    job = make_job("alice")
    make_finding(job)
    send_alerts()
    link = job_link(smtp.received[0].text)
    assert link == f"http://clusterui.test/jobs/{job.pk}/"

    client.force_login(cast["owner"])
    page = client.get(urlsplit(link).path)
    assert page.status_code == 200
    assert job.external_id in page.content.decode()

    client.force_login(cast["outsider"])
    assert client.get(urlsplit(link).path).status_code == 404


def test_recipients_follow_the_settings(smtp, settings, cast):
    settings.ALERT_EMAIL_PATTERN = "{user}@hpc.example.org"
    settings.ALERT_NOTIFY_ADMINS = True
    settings.ADMINS = [("Ops", "ops@example.org"), ("Night", "Night@Example.org")]
    settings.ALERT_ACCOUNT_MANAGERS = {"nlp": ["lead@example.org"], "vision": ["v@example.org"]}
    job = make_job("bob", account="nlp")  # bob has no login: the pattern gives his address
    make_finding(job)

    send_alerts()

    by_address = {m.envelope_to[0]: m for m in smtp.received}
    assert sorted(by_address) == ["bob@hpc.example.org", "lead@example.org",
                                  "night@example.org", "ops@example.org"]
    assert all(len(m.envelope_to) == 1 for m in smtp.received)  # each their own email
    assert "because you own job" in by_address["bob@hpc.example.org"].text
    assert "because you manage the account nlp" in by_address["lead@example.org"].text
    assert "because you are a ClusterUI administrator" in by_address["ops@example.org"].text
    # Every link is personal: each unsubscribes its own recipient.
    assert len({m.message["List-Unsubscribe"] for m in smtp.received}) == 4


def test_a_django_users_own_address_wins_over_the_pattern(smtp, settings, cast):
    settings.ALERT_EMAIL_PATTERN = "{user}@hpc.example.org"
    make_finding(make_job("alice"))
    send_alerts()
    assert [m.envelope_to for m in smtp.received] == [["alice@example.org"]]


def test_an_owner_without_any_address_is_not_emailed(smtp, cast):
    make_finding(make_job("nobody"))
    assert send_alerts()["queued"] == 0
    assert smtp.received == []


def test_one_email_per_job_and_kind_and_again_only_when_it_escalates(smtp, cast):
    job = make_job("alice")
    finding = make_finding(job)
    send_alerts()
    # The detector updates the open finding every pass: no new email.
    Finding.objects.filter(pk=finding.pk).update(wasted_gpu_hours=14.0, last_seen=timezone.now())
    send_alerts()
    assert smtp.count() == 1

    Finding.objects.filter(pk=finding.pk).update(severity="critical", wasted_gpu_hours=20.0)
    send_alerts()
    assert smtp.count() == 2
    first, escalation = smtp.received
    assert escalation.subject.startswith("[ClusterUI] Now critical (was warning): Low GPU")
    assert "went from warning to critical" in escalation.text
    assert escalation.message["In-Reply-To"].strip() == first.message["Message-ID"].strip()

    # Closed and opened again (same job, same kind, not worse): still no new email.
    Finding.objects.filter(pk=finding.pk).update(state="closed", closed_at=timezone.now())
    make_finding(job, severity="critical")
    send_alerts()
    assert smtp.count() == 2
    # Another kind on the same job is news.
    make_finding(job, kind="idle_gpu", evidence={"idle_gpus": 7, "busy_gpus": 1})
    send_alerts()
    assert smtp.count() == 3
    assert "Idle allocated GPU" in smtp.received[-1].subject


def test_findings_below_the_minimum_severity_wait_until_they_escalate(smtp, settings, cast):
    assert settings.ALERT_MIN_SEVERITY == "warning"
    finding = make_finding(make_job("alice"), severity="info")
    send_alerts()
    assert smtp.received == []
    Finding.objects.filter(pk=finding.pk).update(severity="warning")
    send_alerts()
    [mail] = smtp.received
    assert mail.subject.startswith("[ClusterUI] Warning:")  # news to them, not an escalation


def test_a_category_turned_off_is_not_emailed(smtp, cast):
    OptOut.objects.create(address="alice@example.org", category="low_utilization")
    job = make_job("alice")
    make_finding(job)
    make_finding(job, kind="throttling", evidence={"throttled_pct": 64.0, "sm_clock_mhz": 1310})
    send_alerts()
    assert [m.subject.split(":")[1].split(" on ")[0].strip() for m in smtp.received] == [
        "Thermal or power throttling"]
    skipped = AlertEmail.objects.get(category="low_utilization")
    assert (skipped.status, skipped.status_detail) == ("skipped", "turned off by the recipient")


def test_a_node_finding_has_no_owner_and_goes_to_the_admins(smtp, settings, cast):
    assert settings.ALERT_NOTIFY_ADMINS is False  # not only as copies
    settings.ADMINS = [("Ops", "ops@example.org")]
    node = make_node("gpu-a017")
    make_finding(node=node, kind="gpu_errors", severity="critical",
                 wasted=0.0, evidence={"xid_count": 3, "last_xid": 79})
    send_alerts()
    [mail] = smtp.received
    assert f"Open node gpu-a017: http://clusterui.test/nodes/{node.pk}/" in mail.text
    assert mail.envelope_to == ["ops@example.org"]
    assert mail.subject == "[ClusterUI] Critical: GPU errors on node gpu-a017"
    assert "Xid count" in mail.text and "79" in mail.text


def test_nothing_is_sent_when_alert_emails_are_off(smtp, settings, cast):
    settings.ALERT_EMAILS_ENABLED = False
    finding = make_finding(make_job("alice"))
    send_alerts()
    finding.refresh_from_db()
    assert smtp.received == [] and finding.emailed_at is None


# A job's user is whatever its node reported. Names that would make the address pattern
# point elsewhere, at several addresses, or at none that parses.
HOSTILE_USERS = ["mallory@evil.example", "bob,mallory@evil.example", "bob mallory",
                 "<mallory@evil.example>", '"bob"@evil.example', "bob.", ".bob", "b..ob",
                 "-bob", "bob\r\nBcc: mallory@evil.example", "bob;mallory@evil.example"]


def test_only_a_plain_user_name_reported_by_a_node_fills_in_the_address_pattern(smtp,
                                                                                settings):
    settings.ALERT_EMAIL_PATTERN = "{user}@hpc.example.org"
    settings.ALERT_NOTIFY_ADMINS = True
    settings.ADMINS = [("Ops", "ops@example.org")]
    settings.ALERT_DAILY_LIMIT = 100  # the admins get every one of these findings
    for i, user in enumerate([*HOSTILE_USERS, "bob.smith", "_svc-train1"]):
        envelope = node_batch(node=f"gpu-u{i:02d}", job=f"77{i:02d}")
        envelope["jobs"][0]["user"] = user
        batch = validate_batch(envelope)
        assert not batch.rejected_total, batch.rejected  # stored as reported
        store_batch(batch)
        make_finding(Job.objects.get(external_id=f"77{i:02d}"))

    send_alerts()

    to = Counter(m.envelope_to[0] for m in smtp.received)
    assert all(len(m.envelope_to) == 1 for m in smtp.received)
    # Every finding reached the admins; the owners' addresses only the two plain names'.
    assert to == {"ops@example.org": len(HOSTILE_USERS) + 2, "bob.smith@hpc.example.org": 1,
                  "_svc-train1@hpc.example.org": 1}


def test_an_address_that_cannot_be_sent_to_fails_alone(smtp, settings):
    # An account's address as an administrator typed it into the database: no form checked it.
    make_user("carl", email="carl@@example.org")
    make_finding(make_job("carl"))
    make_finding(make_job("bob"))
    settings.ALERT_EMAIL_PATTERN = "{user}@hpc.example.org"

    send_alerts()

    assert [m.envelope_to for m in smtp.received] == [["bob@hpc.example.org"]]
    failed = AlertEmail.objects.get(to="carl@@example.org")
    assert failed.status == EmailStatus.FAILED
    assert failed.status_detail == "not a valid email address: carl@@example.org"
    send_alerts()  # not tried again
    assert smtp.count() == 1


# A job name and account as a node may report them: validation stores them as they are (a
# name is free text), so the text email must not let them write lines, colours or reordered
# text of their own into what ClusterUI says.
FORGED_NAME = ("train\nACTION REQUIRED: your account is locked, sign in at "
               "http://evil.example\r\n\x1b[8mhidden\x1b[0m \u202eevil\u202c\u2028end")
FORGED_ACCOUNT = "nlp\nBcc-me: mallory"


def test_a_node_reported_name_stays_on_its_own_line_of_the_text_email(smtp, cast):
    envelope = node_batch(node="gpu-n01", job="7801")
    envelope["jobs"][0].update(name=FORGED_NAME, account=FORGED_ACCOUNT, user="alice")
    batch = validate_batch(envelope)
    assert not batch.rejected_total, batch.rejected
    store_batch(batch)
    job = Job.objects.get(external_id="7801")
    assert job.name == FORGED_NAME  # kept as reported: the page shows it escaped
    make_finding(job)

    assert send_alerts()["sent"] == 1
    [mail] = smtp.received
    text = mail.text
    lines = text.splitlines()
    assert not any(line.startswith(("ACTION REQUIRED", "Bcc-me", "end")) for line in lines)
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]",
                         text)
    assert ('Job:        7801 "train ACTION REQUIRED: your account is locked, sign in at '
            'http://evil.example [8mhidden [0m  evil end" (Slurm, cluster test)') in lines
    assert "User:       alice · account nlp Bcc-me: mallory · partition gpu" in lines
    # The subject was already folded to one line; the HTML part shows the name without
    # the escape sequences and overrides.
    assert "\n" not in mail.subject and "ACTION REQUIRED" in mail.subject
    assert "ACTION REQUIRED" in mail.html
    assert not re.search("[\x1b\u202a-\u202e\u2066-\u2069]", mail.html)
