"""The navigation's cluster selector (clusterui/web/cluster_choice.py): shown only where
there is more than one cluster; a choice scopes the overview, nodes, jobs, findings, users
and trends pages and is kept until another is made; "All clusters" undoes it."""

import csv
import io

import pytest

from clusterui.findings.models import Finding
from tests import rows as f

pytestmark = pytest.mark.django_db
PICKER = 'id="cluster-picker"'


@pytest.fixture
def two_clusters():
    a, b = f.node("a-001", gpus=2, cluster_name="gpu-a"), f.node("b-001", gpus=3,
                                                                  cluster_name="gpu-b")
    ja = f.job("alice", gpus=a.gpus.all(), cluster_name="gpu-a", external_id="11",
               efficiency={"allocated": 4, "used": 1})
    jb = f.job("alice", gpus=b.gpus.all(), cluster_name="gpu-b", external_id="22",
               efficiency={"allocated": 6, "used": 1})
    return {"ja": ja, "jb": jb, "fa": f.finding(ja), "fb": f.finding(jb)}


def job_ids(response) -> set[str]:
    return {j.external_id for j in response.context["jobs"]}


def test_a_single_cluster_shows_no_selector(client_for):
    f.job("alice", external_id="1")
    page = client_for("alice").get("/jobs/")
    assert page.status_code == 200 and PICKER not in page.content.decode()


def test_a_choice_scopes_the_pages_and_is_kept(client_for, two_clusters):
    client = client_for("alice")
    everything = client.get("/jobs/")
    html = everything.content.decode()
    assert PICKER in html and '<option value="" selected>All clusters</option>' in html
    assert job_ids(everything) == {"11", "22"}

    chosen = client.get("/jobs/", {"cluster": "gpu-b"})
    assert job_ids(chosen) == {"22"}
    assert '<option value="gpu-b" selected>gpu-b</option>' in chosen.content.decode()
    # Kept: the other pages, without the parameter, are on gpu-b too.
    assert job_ids(client.get("/jobs/")) == {"22"}
    assert [x.pk for x in client.get("/findings/").context["findings"]] == [
        two_clusters["fb"].pk]
    nodes = client.get("/nodes/")
    assert [r.name for r in nodes.context["rows"]] == ["b-001"]
    home = client.get("/")
    assert home.context["snap"].gpus == 3 and "Cluster gpu-b, now" in home.content.decode()
    assert [r["name"] for r in client.get("/users/").context["rows"]] == ["alice"]
    assert client.get("/users/").context["totals"]["gpu_hours"] == 6
    assert "cluster=gpu-b" in client.get("/users/").context["api_url"]  # its JSON link too
    text = b"".join(client.get("/jobs/?format=csv").streaming_content).decode()
    assert [r["job_id"] for r in csv.DictReader(io.StringIO(text))] == ["22"]

    # "All clusters" undoes it.
    assert job_ids(client.get("/jobs/", {"cluster": ""})) == {"11", "22"}
    assert job_ids(client.get("/jobs/")) == {"11", "22"}
    assert client.get("/").context["snap"].gpus == 5


def test_an_unknown_cluster_is_named_and_not_kept(client_for, two_clusters):
    client = client_for("alice")
    client.get("/jobs/", {"cluster": "gpu-b"})
    response = client.get("/jobs/", {"cluster": "gpu-z"})
    assert response.status_code == 400
    assert "no cluster is named &#x27;gpu-z&#x27;" in response.content.decode()
    assert job_ids(client.get("/jobs/")) == {"22"}  # the last good choice stands


def test_staff_overview_findings_of_a_cluster_include_its_nodes(client_for, two_clusters):
    node_b = two_clusters["jb"].gpus.first().node
    f.finding(None, "gpu_errors", node=node_b, severity="critical")
    client = client_for("staff")
    home = client.get("/", {"cluster": "gpu-a"})
    assert home.context["open_findings"] == 1
    home = client.get("/", {"cluster": "gpu-b"})
    assert home.context["open_findings"] == 2
    assert Finding.objects.count() == 3


def test_a_leader_is_told_whose_jobs_the_pages_show(client_for, two_clusters, settings):
    from clusterui.accounts.leaders import account_leaders

    settings.ACCOUNT_LEADERS = account_leaders({"ACCOUNT_LEADERS": "nlp=bob;gpu-b/cv=bob"})
    client = client_for("bob")
    said = "your jobs and those of the accounts you lead (nlp, gpu-b/cv)"
    jobs = client.get("/jobs/")
    assert said in jobs.content.decode() and job_ids(jobs) == {"11", "22"}
    assert said in client.get("/findings/").content.decode()
    assert "GPU-hours wasted today are your jobs' and those of the accounts you lead " \
           "(nlp, gpu-b/cv)" in client.get("/").content.decode()
    assert "the accounts you lead" not in client_for("alice").get("/jobs/").content.decode()
