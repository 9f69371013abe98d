"""A Kubernetes job's pod facts (contract 1: namespace, pod, owner_kind, owner_name), from a
batch the real collector built against a real pod-resources server: stored on the job, the
idle allocated GPU included, each bad value refused alone."""

import time

import pytest

from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.jobs.models import Job
from tests.collectors import kubelet_fixtures as k


@pytest.mark.django_db(transaction=True)
def test_pods_land_with_namespace_pod_and_owner(clean_samples, tmp_path):
    ingest_envelope(k.collector_batch(tmp_path, time.time()))
    jobs = {j.external_id: j for j in Job.objects.prefetch_related("gpus")}
    assert set(jobs) == {k.TRAINER_UID, k.EVAL_UID}
    trainer, evaluation = jobs[k.TRAINER_UID], jobs[k.EVAL_UID]
    assert (trainer.scheduler, trainer.namespace, trainer.pod, trainer.owner_kind,
            trainer.owner_name) == ("kubernetes", *k.TRAINER, "Deployment", "trainer")
    assert (evaluation.namespace, evaluation.pod, evaluation.owner_kind,
            evaluation.owner_name) == (*k.EVAL, "Job", "eval-28474560")
    # The evaluation pod runs nothing on its GPU: allocated all the same.
    assert [g.uuid for g in evaluation.gpus.all()] == [k.UUID[2]]
    assert sorted(g.uuid for g in trainer.gpus.all()) == k.UUID[:2]


@pytest.mark.django_db(transaction=True)
def test_a_pods_user_label_makes_the_job_its_users(clean_samples, tmp_path):
    """With ``kubelet_user_label`` the pod's label (or annotation) is the job's user: the
    job is on that user's jobs page and no one else's (docs/operations.md, "Who sees
    which jobs"), as a Slurm job is its submitter's."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    ingest_envelope(k.collector_batch(tmp_path, time.time(), user_label=k.USER_LABEL))
    trainer = Job.objects.get(external_id=k.TRAINER_UID)
    evaluation = Job.objects.get(external_id=k.EVAL_UID)
    assert (trainer.user, evaluation.user) == (k.TRAINER_USER, k.EVAL_USER)
    alice = get_user_model().objects.create_user(k.TRAINER_USER, password="pw")
    assert list(Job.objects.visible_to(alice)) == [trainer]
    web = Client()
    web.force_login(alice)
    page = web.get("/jobs/").content.decode()
    assert f"/jobs/{trainer.pk}/" in page and f"/jobs/{evaluation.pk}/" not in page


@pytest.mark.django_db(transaction=True)
def test_a_later_report_without_the_owner_keeps_it(clean_samples, tmp_path):
    now = time.time()
    ingest_envelope(k.collector_batch(tmp_path / "a", now - 20))
    later = k.collector_batch(tmp_path / "b", now - 10, owners=False)  # /pods not answering
    later["agent"]["boot_id"] = "later"
    ingest_envelope(later)
    trainer = Job.objects.get(external_id=k.TRAINER_UID)
    assert (trainer.namespace, trainer.owner_kind, trainer.owner_name) == (
        "ml-team", "Deployment", "trainer")


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("namespace", "n" * 64, "jobs: namespace longer than 63 characters"),
    ("pod", ["trainer"], "jobs: pod must be a string, got list"),
    ("owner_kind", "K" * 64, "jobs: owner_kind longer than 63 characters"),
    ("owner_name", "o" * 254, "jobs: owner_name longer than 253 characters"),
])  # fmt: skip
def test_a_bad_pod_fact_is_refused_alone(tmp_path, field, value, reason):
    now = time.time()
    envelope = k.collector_batch(tmp_path, now)
    job = next(j for j in envelope["jobs"] if j["id"] == k.EVAL_UID)
    job[field] = value
    batch = validate_batch(envelope, now=now)
    assert dict(batch.rejected) == {reason: 1}
    clean = batch.jobs[k.EVAL_UID]  # the job and its other facts land
    assert clean[field] == ""
    others = {"namespace", "pod", "owner_kind", "owner_name"} - {field}
    assert all(clean[key] for key in others)
    assert len(batch.gpu_rows) == 4
