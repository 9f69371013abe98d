"""Who sees which jobs (clusterui/jobs/visibility.py): an account leader sees every job of
the account, a colleague who leads nothing sees only their own, staff see all; a user's
scheduler name is per cluster. Checked where a user meets it: the web pages, their CSV
exports, the JSON API (the one ``clusterui jobstats`` reads), usage and trends."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from clusterui.accounts.leaders import account_leaders
from clusterui.accounts.models import ClusterLogin
from clusterui.api.tokens import create_token
from clusterui.jobs.models import Job
from clusterui.web import trends
from clusterui.web.snapshot import cluster_snapshot
from tests import rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def cast(settings):
    """alice runs a job in nlp; dave runs one in nlp and one in vision; erin leads nlp;
    bob leads nothing; admin is staff."""
    settings.ACCOUNT_LEADERS = account_leaders({"ACCOUNT_LEADERS": "nlp=erin"})
    User = get_user_model()
    users = {name: User.objects.create_user(name, f"{name}@example.org", "pw")
             for name in ("alice", "bob", "dave", "erin")}
    users["admin"] = User.objects.create_user("admin", "admin@example.org", "pw",
                                              is_staff=True)
    jobs = {
        "alice-nlp": rows.job("alice", account="nlp", external_id="1001",
                              efficiency={"allocated": 4, "used": 1}),
        "dave-nlp": rows.job("dave", account="nlp", external_id="1002",
                             efficiency={"allocated": 2, "used": 2}),
        "dave-vision": rows.job("dave", account="vision", external_id="1003",
                                efficiency={"allocated": 8, "used": 1}),
    }
    for j in jobs.values():
        rows.finding(j)
    return users, jobs


def web(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api(user) -> APIClient:
    _, key = create_token(user, "tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def csv_ids(response, column="job_id") -> set[str]:
    assert response.status_code == 200, response.content
    text = b"".join(response.streaming_content).decode()
    return {r[column] for r in csv.DictReader(io.StringIO(text))}


EXPECTED = {
    "erin": {"1001", "1002"},  # leads nlp: every nlp job, not vision's
    "bob": set(),  # leads nothing, runs nothing
    "dave": {"1002", "1003"},  # his own, in both accounts
    "admin": {"1001", "1002", "1003"},
}


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_the_same_jobs_on_every_surface(cast, who):
    users, jobs = cast
    user, expected = users[who], EXPECTED[who]
    by_id = {j.external_id: j for j in jobs.values()}
    assert {j.external_id for j in Job.objects.visible_to(user)} == expected

    # The jobs page, its CSV export and each job's page.
    page = web(user).get("/jobs/")
    assert page.status_code == 200
    for external_id, job in by_id.items():
        assert (f"/jobs/{job.pk}/" in page.content.decode()) == (external_id in expected)
        detail = web(user).get(f"/jobs/{job.pk}/")
        assert detail.status_code == (200 if external_id in expected else 404)
    assert csv_ids(web(user).get("/jobs/?format=csv")) == expected

    # The findings page's CSV.
    assert csv_ids(web(user).get("/findings/?format=csv")) == expected

    # The API: the list, by scheduler id as jobstats asks, a job, its findings.
    client = api(user)
    listed = client.get("/api/v1/jobs/?limit=100").json()["results"]
    assert {j["external_id"] for j in listed} == expected
    for external_id, job in by_id.items():
        found = client.get(f"/api/v1/jobs/?external_id={external_id}").json()["results"]
        assert len(found) == (external_id in expected)
        assert client.get(f"/api/v1/jobs/{job.pk}/").status_code == (
            200 if external_id in expected else 404)
    findings = client.get("/api/v1/findings/?limit=100").json()["results"]
    assert {f["job"]["external_id"] for f in findings} == expected

    # Usage per account: the accounts of the visible jobs, with their figures.
    usage = client.get("/api/v1/usage/?group=account").json()["results"]
    expected_hours = {}
    for external_id in expected:
        job = by_id[external_id]
        expected_hours[job.account] = expected_hours.get(job.account, 0) + \
            job.efficiency.gpu_hours_allocated
    assert {r["name"]: r["gpu_hours"] for r in usage} == expected_hours


def test_a_leader_of_an_account_on_one_cluster_sees_it_there_only(settings):
    settings.ACCOUNT_LEADERS = account_leaders({"ACCOUNT_LEADERS": "gpu-b/nlp=erin"})
    erin = get_user_model().objects.create_user("erin")
    on_a = rows.job("alice", account="nlp", cluster_name="gpu-a")
    on_b = rows.job("alice", account="nlp", cluster_name="gpu-b")
    assert list(Job.objects.visible_to(erin)) == [on_b]
    assert on_a not in Job.objects.visible_to(erin)


def test_a_user_mapped_to_another_name_on_one_cluster(settings):
    """alice is 'alice' on gpu-a and 'asmith' on gpu-b, where 'alice' is someone else."""
    alice = get_user_model().objects.create_user("alice")
    mine_a = rows.job("alice", cluster_name="gpu-a", account="x")
    someone_elses_b = rows.job("alice", cluster_name="gpu-b", account="x")
    mine_b = rows.job("asmith", cluster_name="gpu-b", account="x")
    rows.job("asmith", cluster_name="gpu-a", account="x")  # another asmith on gpu-a
    assert set(Job.objects.visible_to(alice)) == {mine_a, someone_elses_b}  # unmapped
    ClusterLogin.objects.create(user=alice, cluster=rows.cluster("gpu-b"),
                                scheduler_user="asmith")
    alice = get_user_model().objects.get(pk=alice.pk)  # a new request, a new user object
    assert set(Job.objects.visible_to(alice)) == {mine_a, mine_b}
    response = api(alice).get("/api/v1/jobs/?limit=100")
    assert {j["id"] for j in response.json()["results"]} == {mine_a.pk, mine_b.pk}
    assert web(alice).get(f"/jobs/{someone_elses_b.pk}/").status_code == 404


def test_trends_and_the_overview_grid_follow_the_same_rule(cast, settings):
    users, jobs = cast
    node = rows.node("gpu-a001", gpus=3)
    gpus = list(node.gpus.order_by("index"))
    for gpu, key in zip(gpus, ("alice-nlp", "dave-nlp", "dave-vision"), strict=True):
        rows.GpuLatest.objects.filter(gpu=gpu).update(job=jobs[key])
    shown = {c.job_id for c in cluster_snapshot(users["erin"]).cells if c.job_id}
    assert shown == {jobs["alice-nlp"].pk, jobs["dave-nlp"].pk}
    assert all(c.allocated for c in cluster_snapshot(users["erin"]).cells)
    # Trends run their own SQL: the rule's SQL form must be valid and the same rule.
    for who in ("erin", "bob", "dave"):
        trends.trends(users[who], "account", "30d")


def test_the_sql_form_selects_the_same_jobs_as_the_orm(settings):
    """Trends read the rule as SQL: every part of it (own name, a name on one cluster, an
    account everywhere, an account on one cluster) selects what the ORM's form does."""
    from django.db import connection

    from clusterui.jobs.visibility import rule_for

    settings.ACCOUNT_LEADERS = account_leaders(
        {"ACCOUNT_LEADERS": "vision=alice;gpu-b/cv=alice"})
    alice = get_user_model().objects.create_user("alice")
    ClusterLogin.objects.create(user=alice, cluster=rows.cluster("gpu-b"),
                                scheduler_user="asmith")
    for cluster in ("gpu-a", "gpu-b"):
        for user in ("alice", "asmith", "bob"):
            for account in ("nlp", "vision", "cv"):
                rows.job(user, account=account, cluster_name=cluster)
    rule = rule_for(get_user_model().objects.get(pk=alice.pk))
    orm = set(Job.objects.filter(rule.q()).values_list("id", flat=True))
    condition, params = rule.sql("j")
    with connection.cursor() as cur:
        cur.execute(f"SELECT j.id FROM jobs_job j WHERE {condition}", params)
        sql = {r[0] for r in cur.fetchall()}
    assert sql == orm
    seen = {(j.cluster.name, j.user, j.account) for j in Job.objects.filter(id__in=orm)}
    assert seen == (
        {("gpu-a", "alice", a) for a in ("nlp", "vision", "cv")}  # her name on gpu-a
        | {("gpu-b", "asmith", a) for a in ("nlp", "vision", "cv")}  # her name on gpu-b
        | {(c, u, "vision") for c in ("gpu-a", "gpu-b") for u in ("alice", "asmith", "bob")}
        | {("gpu-b", u, "cv") for u in ("alice", "asmith", "bob")})
