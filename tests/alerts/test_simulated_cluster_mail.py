"""From the simulated cluster to the owners' inboxes, as in the demo: the real collector code
stores an hour of history, the real detector pass opens findings, and ``send_alerts``
emails each emailed finding to the job's owner, whose link opens the job."""

import time
from collections import defaultdict
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command

from clusterui.alerts.tasks import send_alerts
from clusterui.findings.models import Finding
from clusterui.findings.runner import run_pass
from clusterui.ingest.simulate import simulated_cluster


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_simulated_clusters_findings_reach_their_owners(clean_samples, smtp, client):
    call_command("demo_users", stdout=open("/dev/null", "w"))  # alice@localhost, ...
    sim, _ = simulated_cluster(nodes=3, hours=0.5, end=time.time(), seed=3, flush=60.0)
    run_pass()
    emailed = [f for f in Finding.objects.open().select_related("job")
               if f.job and f.severity in ("warning", "critical")]
    assert emailed, "the simulated hour should raise findings worth an email"

    send_alerts()

    inbox = defaultdict(list)
    for mail in smtp.received:
        [address] = mail.envelope_to
        inbox[address].append(mail)
    for finding in emailed:
        job = finding.job
        mine = [m for m in inbox[f"{job.user}@localhost"]
                if f"on job {job.external_id}" in m.subject
                and finding.get_kind_display() in m.subject]
        assert len(mine) == 1, (finding, [m.subject for m in inbox[f"{job.user}@localhost"]])
    assert len(smtp.received) == len(emailed)
    users = {row["user"] for row in sim.job_table()}
    assert set(inbox) <= {f"{u}@localhost" for u in users}

    # The owner follows the link in the email to the job's page.
    finding = emailed[0]
    [mail] = [m for m in inbox[f"{finding.job.user}@localhost"]
              if f"on job {finding.job.external_id}" in m.subject][:1]
    link = next(line.split(": ", 1)[1] for line in mail.text.splitlines()
                if line.startswith("Open job "))
    assert link.startswith(settings.SITE_URL)
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username=finding.job.user))
    assert client.get(urlsplit(link).path).status_code == 200
