"""Issue 19, charts that show the evidence: the node and job pages draw each GPU's NVLink
traffic against its NVLink capacity, its PCIe traffic, and its tensor and DRAM activity
(GPM) beside SM activity; a GPU without GPM or NVLink says so instead of drawing zeros.

The figures are read from the page's HTML, as charts.js reads them."""

import datetime as dt
import html as html_lib
import json
import re

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from clusterui.inventory.models import Gpu
from tests import rows as f
from tests.web.plotly_data import present

pytestmark = pytest.mark.django_db

GB = 1e9
NVLINK_RX, NVLINK_TX = 300 * GB, 290 * GB  # of 450 GB/s per direction (rows.node's H100)
PCIE_RX, PCIE_TX = 12 * GB, 3 * GB
TENSOR, DRAM = 40.0, 25.0


def embedded(html: str, name: str) -> dict | None:
    """The figure the page embeds for chart ``name``, or None when it embeds none."""
    found = re.search(rf'<script id="fig-{name}" type="application/json">(.*?)</script>', html,
                      re.S)
    return json.loads(found.group(1)) if found else None


def flat(values: list, expected: float) -> bool:
    """Every bucket holds ``expected`` (float32 in the figure)."""
    return bool(values) and values == pytest.approx([expected] * len(values), rel=1e-4)


def line_name(trace) -> str:
    """What the hover calls a line: a link's receive and transmit lines share their GPU's
    name (one legend entry) and name themselves "<GPU> rx" / "<GPU> tx" in the hover."""
    extra = re.search(r"<extra>(.*)</extra>", trace["hovertemplate"])
    return html_lib.unescape(extra.group(1)) if extra else trace["name"]


def traces(fig) -> dict[str, list]:
    return {line_name(t): present(t["y"]) for t in fig["data"]}


def with_links(gpus, *, gpm=True):
    """Set the link and GPM columns of the samples ``rows.gpu_samples`` wrote (it writes
    NVLink transmit and receive alike, and neither PCIe nor tensor nor DRAM activity);
    ``gpm=False``: the GPUs report no GPM metric at all, as before Hopper."""
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE telemetry_gpusample SET nvlink_rx_bytes_per_s = %s, "
            "nvlink_tx_bytes_per_s = %s, pcie_rx_bytes_per_s = %s, pcie_tx_bytes_per_s = %s, "
            "tensor_active_pct = %s, dram_active_pct = %s, "
            "sm_active_pct = CASE WHEN %s THEN sm_active_pct END WHERE gpu_id = ANY(%s)",
            [NVLINK_RX, NVLINK_TX, PCIE_RX, PCIE_TX, TENSOR if gpm else None,
             DRAM if gpm else None, gpm, [g.id for g in gpus]])


@pytest.fixture
def nvlink_node(db):
    """Two H100s (NVLink 450 GB/s per direction) moving 300 GB/s in, 290 GB/s out."""
    now = timezone.now()
    n = f.node("gpu-l001", gpus=2)
    gpus = list(n.gpus.order_by("index"))
    started = now - dt.timedelta(minutes=20)
    job = f.job("alice", gpus=gpus, started_at=started, external_id="700001")
    f.gpu_samples(gpus, started, now, job=job)
    with_links(gpus)
    return n, job


def test_the_node_page_draws_nvlink_traffic_against_each_gpus_capacity(client_for,
                                                                       nvlink_node):
    node, _ = nvlink_node
    html = client_for("alice").get(reverse("node-detail", args=[node.pk])).content.decode()

    nvlink = embedded(html, "nvlink")
    values = traces(nvlink)
    assert list(values) == ["GPU 0 rx", "GPU 0 tx", "GPU 1 rx", "GPU 1 tx"]
    for gpu in ("GPU 0", "GPU 1"):
        assert flat(values[f"{gpu} rx"], 300.0)
        assert flat(values[f"{gpu} tx"], 290.0)
    # Receive solid, transmit dotted, in the GPU's colour; one legend entry per GPU.
    by_name = {line_name(t): t for t in nvlink["data"]}
    rx, tx = by_name["GPU 0 rx"], by_name["GPU 0 tx"]
    assert (rx["line"]["dash"], tx["line"]["dash"]) == ("solid", "dot")
    assert rx["line"]["color"] == tx["line"]["color"]
    assert rx["name"] == tx["name"] == rx["legendgroup"] == tx["legendgroup"] == "GPU 0"
    assert (rx["showlegend"], tx["showlegend"]) == (True, False)
    # The capacity line at 450 GB/s, labelled as the memory and power limits are.
    assert [s["y0"] for s in nvlink["layout"]["shapes"]] == [pytest.approx(450.0)]
    assert [a["text"] for a in nvlink["layout"]["annotations"]] == [
        "NVLink capacity 450 GB/s per direction"]
    assert nvlink["layout"]["yaxis"]["title"]["text"] == "GB/s"

    pcie = traces(embedded(html, "pcie"))
    assert flat(pcie["GPU 1 rx"], 12.0)
    assert flat(pcie["GPU 1 tx"], 3.0)
    assert not embedded(html, "pcie")["layout"].get("shapes")  # no PCIe capacity known

    assert flat(traces(embedded(html, "tensor"))["GPU 1"], TENSOR)
    assert flat(traces(embedded(html, "dram"))["GPU 0"], DRAM)
    # Beside SM activity (0.8 x the factory's 50 % utilization).
    assert flat(traces(embedded(html, "sm"))["GPU 0"], 40.0)
    assert "NVLink traffic" in html and "Tensor activity (GPM)" in html


def test_gpus_without_gpm_or_nvlink_say_so_on_the_node_page(client_for):
    """A PCIe A100 (before Hopper: no GPM; no NVLink): no tensor, DRAM or NVLink chart,
    each card says why; PCIe traffic is still drawn."""
    now = timezone.now()
    n = f.node("gpu-c002", gpus=2, model="NVIDIA A100-PCIE-40GB")
    gpus = list(n.gpus.order_by("index"))
    Gpu.objects.filter(node=n).update(nvlink_bytes_per_s=None)
    f.gpu_samples(gpus, now - dt.timedelta(minutes=10), now)
    with_links(gpus, gpm=False)
    with connection.cursor() as cur:
        cur.execute("UPDATE telemetry_gpusample SET nvlink_rx_bytes_per_s = NULL, "
                    "nvlink_tx_bytes_per_s = NULL")

    response = client_for("alice").get(reverse("node-detail", args=[n.pk]))
    html = response.content.decode()

    for name in ("tensor", "dram", "sm", "nvlink"):
        assert embedded(html, name) is None, name
        assert f'<div class="chart-empty" id="chart-{name}">' in html, name
    assert html.count("Not reported: these GPUs have no GPM counters") == 3
    assert "No NVLink traffic reported: these GPUs have no NVLink" in html
    assert flat(traces(embedded(html, "pcie"))["GPU 0 rx"], 12.0)


def test_the_job_page_draws_the_same_evidence_over_the_jobs_life(client_for, nvlink_node):
    _, job = nvlink_node
    html = client_for("alice").get(reverse("job-detail", args=[job.pk])).content.decode()

    nvlink = embedded(html, "nvlink")
    values = traces(nvlink)
    assert flat(values["GPU 1 rx"], 300.0)
    assert flat(values["GPU 1 tx"], 290.0)
    assert [s["y0"] for s in nvlink["layout"]["shapes"]] == [pytest.approx(450.0)]
    # The whole job: its first bucket is where the job's range starts (30 s before it).
    assert nvlink["data"][0]["x0"] == embedded(html, "util")["data"][0]["x0"]
    assert flat(traces(embedded(html, "pcie"))["GPU 0 tx"], 3.0)
    assert flat(traces(embedded(html, "tensor"))["GPU 0"], TENSOR)
    assert flat(traces(embedded(html, "dram"))["GPU 1"], DRAM)
    assert flat(traces(embedded(html, "sm"))["GPU 1"], 40.0)


def test_a_job_on_gpus_with_and_without_gpm_names_those_that_do_not_report(client_for):
    """Two nodes, one of H100s, one of PCIe A100s (no GPM, no NVLink): the tensor and DRAM
    charts draw the H100s and name the A100s as not reporting, not as zeros; the NVLink
    chart draws the H100s' capacity only; the node strips stay."""
    now = timezone.now()
    hopper = f.node("gpu-h001", gpus=2)
    ampere = f.node("gpu-p001", gpus=2, model="NVIDIA A100-PCIE-40GB")
    Gpu.objects.filter(node=ampere).update(nvlink_bytes_per_s=None)
    gpus = [*hopper.gpus.order_by("index"), *ampere.gpus.order_by("index")]
    started = now - dt.timedelta(minutes=20)
    job = f.job("alice", gpus=gpus, started_at=started)
    f.gpu_samples(gpus, started, now, job=job)
    with_links(gpus[:2])
    with_links(gpus[2:], gpm=False)
    with connection.cursor() as cur:
        cur.execute("UPDATE telemetry_gpusample SET nvlink_rx_bytes_per_s = NULL, "
                    "nvlink_tx_bytes_per_s = NULL WHERE gpu_id = ANY(%s)",
                    [[g.id for g in gpus[2:]]])

    html = client_for("alice").get(reverse("job-detail", args=[job.pk])).content.decode()

    for name, value in (("tensor", TENSOR), ("dram", DRAM), ("sm", 40.0)):
        fig = embedded(html, name)
        values = traces(fig)
        assert list(values) == ["gpu-h001 · GPU 0", "gpu-h001 · GPU 1"], name
        assert all(flat(v, value) for v in values.values()), name
        notes = [a["text"] for a in fig["layout"]["annotations"]]
        assert notes == ["not reported by gpu-p001 · GPU 0, gpu-p001 · GPU 1"], name
    nvlink = embedded(html, "nvlink")
    assert {t["name"] for t in nvlink["data"]} == {
        "gpu-h001 · GPU 0", "gpu-h001 · GPU 1"}
    assert [s["y0"] for s in nvlink["layout"]["shapes"]] == [pytest.approx(450.0)]
    # The nodes strip compares the nodes in one quantity all of them report: NVML
    # utilization, both nodes a row (with SM activity, the A100 node's row was left out and
    # the strip, one row, was not drawn).
    strip = embedded(html, "nodes_busy")
    assert strip["data"][0]["y"] == ["gpu-h001", "gpu-p001"]
    assert strip["data"][0]["name"] == "GPU utilization (NVML)"
