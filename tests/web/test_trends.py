"""The trends page: GPU-hours, used GPU-hours and energy per user, account, partition or
cluster, by day, week or month, read from the hourly job rollups that compaction writes
from the raw samples (written here as ingest stores them)."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.accounts.leaders import account_leaders
from clusterui.telemetry import compaction
from clusterui.web.trends import bucket_starts
from tests import rows as f

pytestmark = pytest.mark.django_db


def _ten_oclock(t: dt.datetime) -> dt.datetime:
    return timezone.localtime(t).replace(hour=10, minute=0, second=0, microsecond=0)


@pytest.fixture
def history():
    """Two hours of alice's 2-GPU job (NVML 50 %, SM activity 40 %, 450 W per GPU) three
    days ago at 10:00, and one hour of bob's 1-GPU job (NVML 90 %, 72 %, 610 W) ten days
    ago, both ended; rolled up by compaction."""
    now = timezone.now()
    node = f.node("trend-a", gpus=3, latest=False)
    gpus = list(node.gpus.order_by("index"))
    # At 10:00 local time: a two-hour job started late in the evening would run into the
    # next day and be counted on two (the test failed between 22:00 and midnight).
    a0 = _ten_oclock(now - dt.timedelta(days=3))
    b0 = _ten_oclock(now - dt.timedelta(days=10))
    alice = f.job("alice", account="nlp", gpus=gpus[:2], state="ended", started_at=a0,
                  ended_at=a0 + dt.timedelta(hours=2))
    bob = f.job("bob", account="vision", gpus=gpus[2:], state="ended", started_at=b0,
                ended_at=b0 + dt.timedelta(hours=1))
    f.gpu_samples(gpus[:2], a0, a0 + dt.timedelta(hours=2), job=alice,
                  util=lambda g, k: 50.0)
    f.gpu_samples(gpus[2:], b0, b0 + dt.timedelta(hours=1), job=bob, util=lambda g, k: 90.0)
    result = compaction.compact(now)
    assert result.rows == 2 * 720 + 360 and not result.held_back
    return {"alice": alice, "bob": bob, "a0": a0, "b0": b0}


def by_name(response) -> dict:
    return {r["group"].name: r["group"] for r in response.context["rows"]}


def test_per_account_by_day_from_the_rollups(client_for, history):
    response = client_for("staff").get(reverse("trends"), {"by": "account", "period": "30d"})
    assert response.status_code == 200
    groups = by_name(response)
    assert set(groups) == {"nlp", "vision"}
    nlp, vision = groups["nlp"], groups["vision"]
    assert nlp.gpu_hours == pytest.approx(4.0)  # 2 GPUs x 2 h
    assert nlp.used_gpu_hours == pytest.approx(4.0 * 0.40, rel=1e-4)  # SM activity 40 %
    assert nlp.efficiency_pct == pytest.approx(40.0, rel=1e-4)
    assert nlp.energy_kwh == pytest.approx(2 * 450 * 2 / 1000, rel=1e-4)  # 2 GPUs, 2 h
    assert vision.gpu_hours == pytest.approx(1.0)
    assert vision.energy_kwh == pytest.approx(610 / 1000, rel=1e-4)
    # The day each job ran holds its figures; every other day is empty.
    columns = response.context["columns"]
    row = next(r for r in response.context["rows"] if r["group"].name == "nlp")
    day = timezone.localtime(history["a0"]).strftime("%b %d")
    assert [c for c, v in zip(columns, row["cells"], strict=True) if v] == [day]
    assert len(columns) == 30
    # The chart stacks the same figures per day.
    chart = response.context["charts"]["trend"]
    nlp_trace = next(t for t in chart["data"] if t["name"] == "nlp")
    assert sum(nlp_trace["y"]) == pytest.approx(4.0)


def test_energy_by_user_by_week(client_for, history):
    response = client_for("staff").get(reverse("trends"), {"by": "user", "period": "12w",
                                                           "metric": "energy_kwh"})
    assert response.status_code == 200
    assert {n: round(g.energy_kwh, 3) for n, g in by_name(response).items()} == {
        "alice": 1.8, "bob": 0.61}
    assert response.context["totals"]["energy_kwh"] == pytest.approx(2.41, rel=1e-4)
    assert "kWh" in response.content.decode()


def test_per_cluster_and_partition(client_for, history):
    for by, name in (("cluster", "test"), ("partition", "gpu")):
        response = client_for("staff").get(reverse("trends"), {"by": by})
        assert list(by_name(response)) == [name]
        assert by_name(response)[name].gpu_hours == pytest.approx(5.0)


def test_per_kubernetes_namespace_the_pods_only(client_for, history):
    """By namespace, as the users page: the jobs that have one (bob's becomes a pod in
    "ml-team"); alice's Slurm job has none and is not counted, and the page says so."""
    type(history["bob"]).objects.filter(pk=history["bob"].pk).update(
        scheduler="kubernetes", namespace="ml-team", account="")
    response = client_for("staff").get(reverse("trends"), {"by": "namespace"})
    assert response.status_code == 200
    assert list(by_name(response)) == ["ml-team"]
    assert by_name(response)["ml-team"].gpu_hours == pytest.approx(1.0)
    assert response.context["totals"]["gpu_hours"] == pytest.approx(1.0)
    text = " ".join(response.content.decode().split())
    assert "Kubernetes jobs only: a Slurm job has no namespace." in text
    assert '<a href="?by=namespace" class="on">Namespace</a>' in text


def test_a_researcher_sees_only_her_own_jobs(client_for, history):
    response = client_for("alice").get(reverse("trends"), {"by": "account"})
    assert list(by_name(response)) == ["nlp"]
    assert "Your jobs only" in response.content.decode()


def test_an_account_leader_sees_the_accounts_jobs(client_for, history, settings):
    settings.ACCOUNT_LEADERS = account_leaders({"ACCOUNT_LEADERS": "vision=alice"})
    response = client_for("alice").get(reverse("trends"), {"by": "account"})
    assert by_name(response)["vision"].gpu_hours == pytest.approx(1.0)
    assert by_name(response)["nlp"].gpu_hours == pytest.approx(4.0)
    bob = client_for("bob").get(reverse("trends"), {"by": "account"})
    assert list(by_name(bob)) == ["vision"]  # his own; he leads nothing


def test_bad_parameters_are_named(client_for, history):
    response = client_for("staff").get(reverse("trends"), {"by": "team", "period": "1y"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "by must be one of user, account, partition, cluster" in page
    assert "period must be one of 30d, 12w, 12m" in page


def test_buckets_end_with_the_current_one():
    now = dt.datetime(2026, 3, 4, 15, 0, tzinfo=dt.UTC)  # a Wednesday
    with timezone.override("UTC"):
        weeks = bucket_starts("12w", now)
        months = bucket_starts("12m", now)
        days = bucket_starts("30d", now)
    assert weeks[-1] == dt.datetime(2026, 3, 2) and weeks[0] == dt.datetime(2025, 12, 15)
    assert months[0] == dt.datetime(2025, 4, 1) and months[-1] == dt.datetime(2026, 3, 1)
    assert days[-1] == dt.datetime(2026, 3, 4) and len(days) == 30


def test_before_any_hour_is_rolled_up_the_page_says_when_one_will_be(client_for, settings):
    # A new installation (or make demo's first minutes): samples arrive, no hour has closed
    # and been rolled up yet; the page says so rather than showing an unexplained blank.
    settings.RAW_HOT_MINUTES = 10
    node = f.node("trend-new", gpus=1, latest=False)
    now = timezone.now()
    f.gpu_samples(list(node.gpus.all()), now - dt.timedelta(minutes=5), now)
    response = client_for("staff").get(reverse("trends"))
    assert response.status_code == 200 and response.context["rows"] == []
    text = " ".join(response.content.decode().split())
    assert ("No rolled-up GPU time in this period. An hour appears once it is rolled up, "
            "about 10 min after it ends.") in text
