"""Kubernetes namespaces in the UI and the API: a pod's namespace, name and owner on its job
page and in the jobs list, the jobs of one namespace, and GPU-hours per namespace (the
part accounts play for Slurm). The jobs come from a batch the real collector built against
a real pod-resources server (tests/collectors/kubelet_fixtures.py)."""

import time

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.findings.models import JobEfficiency
from clusterui.ingest.tasks import ingest_envelope
from clusterui.jobs.models import Job
from tests import rows as f
from tests.collectors import kubelet_fixtures as k

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pods(clean_samples, tmp_path):
    ingest_envelope(k.collector_batch(tmp_path, time.time()))
    now = timezone.now()
    jobs = {j.external_id: j for j in Job.objects.all()}
    # What the detector pass would have judged: the trainer used 6 of 8 GPU-hours, the
    # idle evaluation pod none of its 2.
    for uid, allocated, used in ((k.TRAINER_UID, 8.0, 6.0), (k.EVAL_UID, 2.0, 0.0)):
        JobEfficiency.objects.create(
            job=jobs[uid], computed_at=now, window_start=now, window_end=now, gpus=1,
            gpu_hours_allocated=allocated, gpu_hours_used=used,
            gpu_hours_wasted=allocated - used, util_source="util")
    f.job("alice", account="nlp")  # a Slurm job: no namespace
    return jobs


def test_job_page_shows_namespace_pod_and_owner(client_for, pods):
    page = client_for("staff").get(reverse("job-detail", args=[pods[k.TRAINER_UID].pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert '<dt>Namespace</dt><dd><a href="/jobs/?namespace=ml-team&amp;cluster=k8s">ml-team</a>' in html
    assert f"<dt>Pod</dt><dd>{k.TRAINER[1]}</dd>" in html
    assert "<dt>Owner</dt><dd>Deployment trainer</dd>" in html
    # The pod's status.startTime, from the kubelet's /pods, is the job's start.
    started = pods[k.TRAINER_UID].started_at
    assert abs(time.time() - k.TRAINER_STARTED_AGO_S - started.timestamp()) < 60
    assert f'<dt>Started</dt><dd><span title="{started.isoformat()}">' in html


def test_jobs_list_filters_by_namespace(client_for, pods):
    client = client_for("staff")
    listed = client.get(reverse("jobs"), {"namespace": "research"})
    assert [j.external_id for j in listed.context["jobs"]] == [k.EVAL_UID]
    html = listed.content.decode()
    assert '<span title="Kubernetes namespace">research</span>' in html
    assert "Job eval-28474560" in html
    found = client.get(reverse("jobs"), {"q": "trainer-7d4b"}).context["jobs"]
    assert [j.external_id for j in found] == [k.TRAINER_UID]


def test_namespace_view_sums_gpu_hours_per_namespace(client_for, pods):
    page = client_for("staff").get(reverse("namespaces"))
    assert page.status_code == 200 and page.context["group"] == "namespace"
    assert [(r["name"], r["jobs"], r["gpu_hours"], r["wasted_gpu_hours"])
            for r in page.context["rows"]] == [("ml-team", 1, 8.0, 2.0), ("research", 1, 2.0, 2.0)]  # fmt: skip
    html = page.content.decode()
    assert "<th>Namespace</th>" in html
    assert '<a href="/jobs/?namespace=research&amp;ordering=-wasted">jobs →</a>' in html


def test_api_lists_and_filters_by_namespace(client_for, pods):
    client = client_for("staff")
    body = client.get("/api/v1/jobs/", {"namespace": "ml-team"}).json()
    [job] = body["results"]
    assert (job["external_id"], job["namespace"], job["pod"], job["owner_kind"],
            job["owner_name"]) == (k.TRAINER_UID, *k.TRAINER, "Deployment", "trainer")
    usage = client.get("/api/v1/usage/", {"group": "namespace"}).json()
    assert usage["group"] == "namespace"
    assert [(r["name"], r["gpu_hours"]) for r in usage["results"]] == [("ml-team", 8.0),
                                                                        ("research", 2.0)]


def test_a_findings_job_is_named_with_its_namespace_where_a_slurm_job_names_its_user(
        client_for, pods):
    """A Kubernetes job has no user: where a finding names its job, the job's namespace
    stands where a Slurm job's user and account do (not an empty "job X · · now")."""
    from clusterui.inventory.models import Node

    trainer, slurm = pods[k.TRAINER_UID], Job.objects.get(user="alice")
    node = Node.objects.get()
    f.finding(trainer, node=node, title="Trainer's GPUs idle")
    f.finding(slurm, node=node, title="Alice's GPUs idle")
    client = client_for("staff")

    def text(page):
        assert page.status_code == 200
        return " ".join(page.content.decode().split())

    overview = text(client.get(reverse("home")))
    assert f"job {k.TRAINER_UID} · ml-team · " in overview
    assert f"job {slurm.external_id} · alice · nlp · " in overview
    assert "· ·" not in overview
    # The most wasteful jobs: the pod's user is not known, and says so.
    assert f'{k.TRAINER_UID}</a> <span class="muted small">' in overview
    row = overview.split(f'{k.TRAINER_UID}</a>', 1)[1].split("</tr>", 1)[0]
    assert "<td>–</td>" in row

    listed = text(client.get(reverse("findings")))
    assert '<div class="muted small">ml-team</div>' in listed
    assert '<div class="muted small">alice · nlp</div>' in listed

    node_page = text(client.get(reverse("node-detail", args=[node.pk])))
    assert f"job {k.TRAINER_UID} · ml-team</span>" in node_page
    assert f"job {slurm.external_id} · alice · nlp</span>" in node_page


def test_a_pods_page_says_its_start_was_not_reported_and_links_no_empty_user(client_for,
                                                                            pods):
    """A pod whose start was not reported (a collector without ``kubelet_pods_url`` knows
    no status.startTime): the page says so beside when ClusterUI first saw it, instead of
    calling that the start, and its empty user is no link (``?user=`` would list every
    job)."""
    trainer = pods[k.TRAINER_UID]
    Job.objects.filter(pk=trainer.pk).update(started_at=None)
    trainer.refresh_from_db()
    page = client_for("staff").get(reverse("job-detail", args=[trainer.pk]))
    html = " ".join(page.content.decode().split())
    first_seen = timezone.localtime(trainer.first_seen).strftime("%Y-%m-%d %H:%M")
    assert "<dt>Started</dt><dd><span class=\"muted\" title=\"The collector did not report " \
           "when the job started\">not reported</span>" in html
    assert f"· first seen {first_seen}</span>" in html
    assert "<dt>Duration</dt><dd><span title=" in html and ">at least</span>" in html
    assert "<dt>User</dt><dd>–</dd>" in html and "?user=\"" not in html

    slurm = Job.objects.get(user="alice")  # started_at known: as before
    html = " ".join(client_for("staff").get(reverse("job-detail", args=[slurm.pk]))
                    .content.decode().split())
    started = timezone.localtime(slurm.started_at).strftime("%Y-%m-%d %H:%M")
    assert f"<dt>Started</dt><dd><span title=\"{slurm.started_at.isoformat()}" in html
    assert f'">{started}</span></dd>' in html and "at least" not in html
    assert '<dt>User</dt><dd><a href="/jobs/?user=alice">alice</a></dd>' in html
