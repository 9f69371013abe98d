"""MIG instances from the real collector (on the NVML simulator's MIG-enabled H100) through
ingest to the stored GPUs and the job's efficiency.

Each instance is stored as a GPU of its own under its parent, with its profile, GPU and
compute instance ids and its share of the GPU; job efficiency counts an instance as that
share, never as a whole GPU; an instance that reports no busy figure (NVML has no
utilization on MIG and this one no GPM) is neither used nor wasted.
"""

from __future__ import annotations

import datetime as dt

import pynvml
import pytest

from clusterui.findings.models import Finding, JobEfficiency
from clusterui.findings.runner import run_pass
from clusterui.ingest.tasks import ingest_envelope
from clusterui.ingest.validate import validate_batch
from clusterui.inventory.models import Gpu
from collectors.sim.scenarios import Scenario
from collectors.sim.sharing import SimMigNVML
from tests.mig_batches import collect_node

pytestmark = pytest.mark.django_db
TICKS = 30  # 5 minutes at 10 s


class NoGpm(SimMigNVML):
    """The same node without GPM: nothing says how busy an instance is."""

    def nvmlGpmQueryDeviceSupport(self, handle):
        raise pynvml.NVMLError_NotSupported()


def _collect(tmp_path, nvml_class=SimMigNVML):
    """Five minutes of a MIG-enabled H100 split into seven 1g.10gb instances, job 501 on
    instances 0 and 3."""
    return collect_node(tmp_path, "mig-h001", 7, [("501", Scenario.HEALTHY, (0, 3))],
                        nvml_class, TICKS)


def _store(batch):
    assert ingest_envelope(batch).rejected == 0
    last = batch["gpu_samples"]["rows"][-1][0]
    run_pass(now=dt.datetime.fromtimestamp(last + 30, dt.UTC))
    return last


def test_mig_instances_are_stored_under_their_parent_with_profile_and_share(tmp_path):
    _, batch = _collect(tmp_path)
    _store(batch)
    gpus = Gpu.objects.filter(node__name="mig-h001")
    [parent] = [g for g in gpus if g.parent_id is None]
    instances = [g for g in gpus if g.parent_id is not None]
    assert parent.mig_mode is True and parent.uuid.startswith("GPU-")
    assert len(instances) == 7
    assert all(g.parent_id == parent.id and g.uuid.startswith("MIG-") for g in instances)
    assert {g.mig_profile for g in instances} == {"1g.10gb"}
    assert [g.mig_share for g in instances] == [pytest.approx(1 / 7)] * 7
    assert sorted(g.mig_gi_id for g in instances) == list(range(1, 8))
    assert parent.mig_share is None and parent.mig_profile == ""


def test_job_efficiency_counts_a_mig_instance_as_its_share_of_a_gpu(tmp_path):
    start, batch = _collect(tmp_path)
    last = _store(batch)
    eff = JobEfficiency.objects.get(job__external_id="501")
    wall_h = (last - (start - 600)) / 3600
    assert eff.gpus == 2
    # two 1g instances of a 7-slice GPU: 2/7 of a GPU, not 2 GPUs
    assert eff.gpu_hours_allocated == pytest.approx(2 / 7 * wall_h)
    assert 0 < eff.gpu_hours_used < eff.gpu_hours_allocated  # GPM per GPU instance
    assert eff.gpu_hours_used + eff.gpu_hours_wasted == pytest.approx(eff.gpu_hours_allocated)
    assert all(e["mig_share"] == pytest.approx(1 / 7) for e in eff.per_gpu.values())


def test_an_instance_without_a_busy_figure_is_neither_used_nor_wasted_nor_flagged(tmp_path):
    start, batch = _collect(tmp_path, NoGpm)
    job_rows = [r for r in batch["gpu_samples"]["rows"] if r[2] == "501"]
    assert job_rows and all(r[3] is None for r in job_rows)  # util_pct: null, never 0
    last = _store(batch)
    eff = JobEfficiency.objects.get(job__external_id="501")
    assert eff.gpu_hours_allocated == pytest.approx(2 / 7 * (last - (start - 600)) / 3600)
    assert (eff.gpu_hours_used, eff.gpu_hours_wasted) == (0.0, 0.0)
    assert eff.efficiency_pct is None  # not 0 %: nothing was measured
    assert all(e["wasted_gpu_hours"] is None for e in eff.per_gpu.values())
    assert not Finding.objects.filter(job__external_id="501").exists()


def test_bad_mig_attributes_are_refused_alone_and_the_gpu_kept(tmp_path):
    _, batch = _collect(tmp_path)
    now = batch["sent_at"]
    i = next(i for i, g in enumerate(batch["gpus"]) if "parent_uuid" in g)
    batch["gpus"][i] = {**batch["gpus"][i], "mig_slices": 8, "mig_gi_id": "3"}
    checked = validate_batch(batch, now=now)
    assert dict(checked.rejected) == {
        "gpus: mig_gi_id must be a number or null, got str": 1,
        "gpus: mig_slices 8 is more than mig_slices_total 7": 1,
    }
    kept = checked.gpus[i]
    assert kept["uuid"] == batch["gpus"][i]["uuid"] and kept["mig_profile"] == "1g.10gb"
    assert kept["mig_share"] is None and kept["mig_gi_id"] is None
    assert len(checked.gpu_rows) == len(batch["gpu_samples"]["rows"])  # no sample lost
