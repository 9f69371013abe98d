"""The demo's mail: the SMTP sink (run as ``make demo`` runs it) keeps what it receives in a
Maildir, and /demo/mail/ shows it: staff everything, a user what was sent to them."""

import mailbox
import subprocess
import sys

import pytest

from clusterui.alerts.tasks import send_alerts
from tests.alerts.factories import make_finding, make_job
from tests.services import ROOT, free_port, wait_for


@pytest.fixture
def sink(tmp_path, settings):
    port = free_port()
    maildir = tmp_path / "mail"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterui.alerts.smtpsink", "--port", str(port), "--maildir",
         str(maildir)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert f"SMTP sink on 127.0.0.1:{port}" in line, line
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 5
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.DEMO_MAILBOX_DIR = str(maildir)
        yield maildir
    finally:
        proc.terminate()
        assert proc.wait(10) == 0  # SIGTERM stops it cleanly


@pytest.mark.django_db
def test_the_sink_keeps_mail_and_the_mailbox_shows_it_to_whom_it_may_concern(sink, cast,
                                                                            client):
    job = make_job("alice", name="llama-ft")
    make_finding(job)
    make_finding(make_job("carol", name="resnet"))
    assert send_alerts()["sent"] == 2

    box = mailbox.Maildir(sink, create=False)
    wait_for(lambda: len(box) == 2, timeout=10, what="two messages in the Maildir")
    envelope_to = sorted(str(m["X-Envelope-To"]) for m in box)
    assert envelope_to == ["alice@example.org", "carol@example.org"]

    client.force_login(cast["staff"])
    listing = client.get("/demo/mail/").content.decode()
    assert "llama-ft" in listing and "resnet" in listing and "Demo only" in listing

    client.force_login(cast["owner"])
    listing = client.get("/demo/mail/").content.decode()
    assert "llama-ft" in listing and "resnet" not in listing
    [key] = [k for k in box.keys() if "alice" in str(box[k]["To"])]
    message = client.get(f"/demo/mail/{key}/")
    assert message.status_code == 200
    page = message.content.decode()
    assert "Text part" in page and "HTML part" in page
    assert f"/jobs/{job.pk}/" in page
    assert 'sandbox="allow-popups allow-popups-to-escape-sandbox"' in page

    client.force_login(cast["colleague"])  # carol may not read alice's mail
    assert client.get(f"/demo/mail/{key}/").status_code == 404
    assert client.get("/demo/mail/no-such-key/").status_code == 404


@pytest.mark.django_db
def test_the_mailbox_is_off_unless_the_demo_turns_it_on(client, cast, settings):
    settings.DEMO_MAILBOX_DIR = ""
    client.force_login(cast["staff"])
    assert client.get("/demo/mail/").status_code == 404
    assert "Mail (demo)" not in client.get("/settings/alerts/").content.decode()


@pytest.mark.django_db
def test_the_nav_links_to_the_mailbox_in_the_demo(client, cast, settings, tmp_path):
    settings.DEMO_MAILBOX_DIR = str(tmp_path)
    client.force_login(cast["owner"])
    assert "Mail (demo)" in client.get("/settings/alerts/").content.decode()
    assert "No email yet" in client.get("/demo/mail/").content.decode()
