"""``/jobs/<scheduler>/<cluster>/<job id>/``, the address Open OnDemand and other sites link
to by the scheduler's job id: it redirects to the job's page for whoever may see the job,
and answers one and the same 404 for a job that is another user's and for one that does not
exist; an unknown cluster or scheduler is a 404 that says which part is wrong."""

import re
from html import unescape

import pytest
from django.urls import reverse

from clusterui.inventory.models import Cluster
from clusterui.jobs.models import Job
from tests import rows as f

pytestmark = pytest.mark.django_db


def message(response) -> str:
    """The error page's words (the page around them carries a per-request CSRF token)."""
    match = re.search(r'<div class="card empty error-page" role="alert">(.*?)</div>',
                      response.content.decode(), re.S)
    assert match, response.content.decode()[:500]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", match.group(1))).split())


@pytest.fixture
def jobs(db):
    return {"alice": f.job("alice", external_id="813006"),
            "bob": f.job("bob", external_id="813007")}


def test_a_visible_job_redirects_to_its_page(client_for, jobs):
    assert reverse("job-by-scheduler-id", args=["slurm", "test", "813006"]) == (
        "/jobs/slurm/test/813006/")
    for who in ("alice", "staff"):
        response = client_for(who).get("/jobs/slurm/test/813006/")
        assert response.status_code == 302
        assert response["Location"] == f"/jobs/{jobs['alice'].pk}/"
    response = client_for("staff").get("/jobs/slurm/test/813007/", follow=True)
    assert response.status_code == 200 and response.context["job"] == jobs["bob"]


def test_another_users_job_and_a_missing_one_are_the_same_404(client_for, jobs):
    client = client_for("alice")
    hidden = client.get("/jobs/slurm/test/813007/")  # bob's
    missing = client.get("/jobs/slurm/test/999999/")
    assert hidden.status_code == missing.status_code == 404
    said = message(hidden)
    assert said == message(missing).replace("999999", "813007")
    assert "No slurm job 813007 on test that you may see" in said
    assert "/jobs/" not in hidden.get("Location", "")


def test_an_unknown_cluster_or_scheduler_is_a_404_that_names_it(client_for, jobs):
    client = client_for("alice")
    response = client.get("/jobs/slurm/nowhere/813006/")
    assert response.status_code == 404
    assert "no cluster 'nowhere' (its clusters: test)" in message(response)
    response = client.get("/jobs/pbs/test/813006/")
    assert response.status_code == 404
    assert "no scheduler 'pbs'" in message(response)
    # The other parts must match too: the same id under another scheduler is not the job.
    Job.objects.filter(pk=jobs["alice"].pk).update(scheduler="kubernetes")
    assert client.get("/jobs/slurm/test/813006/").status_code == 404
    assert client.get("/jobs/kubernetes/test/813006/").status_code == 302


def test_a_nul_in_the_address_is_a_404_not_a_database_error(client_for, jobs):
    client = client_for("alice")
    for path in ("/jobs/slurm/test/813%00006/", "/jobs/slurm/te%00st/813006/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "has no NUL character" in message(response)


def test_the_same_id_on_two_clusters_is_two_jobs(client_for, jobs):
    other = f.job("alice", external_id="made-on-test")
    Job.objects.filter(pk=other.pk).update(cluster=Cluster.objects.create(name="east"),
                                           external_id="813006")
    client = client_for("alice")
    assert client.get("/jobs/slurm/east/813006/")["Location"] == f"/jobs/{other.pk}/"
    assert client.get("/jobs/slurm/test/813006/")["Location"] == f"/jobs/{jobs['alice'].pk}/"


def test_signed_out_it_asks_to_sign_in_first(client, jobs):
    response = client.get("/jobs/slurm/test/813006/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/jobs/slurm/test/813006/")
