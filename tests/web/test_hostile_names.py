"""Names a node reports (a job's name, user, account and partition, the node's own name, a
GPU's model, a NIC's name), stored as they came through validation, on every page that
shows them: autoescaping already keeps their tags out; here, their bidirectional overrides
(which make "‮gnp.exe" read "exe.png" and reorder the rest of a heading), escape sequences
and line separators must not reach the page, in its HTML or in a chart's JSON, and the name
must still be there, readable. A page added later that shows one of these names without
``oneline`` fails here."""

import datetime as dt
import json
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from clusterui.findings.models import Finding, JobEfficiency
from clusterui.gpuhealth.models import GpuHealth
from clusterui.ingest.models import RejectedBatch
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.inventory.models import Gpu, Nic, Node
from clusterui.jobs.models import Job
from collectors.client.report import one_line
from tests import rows as f
from tests.factories import node_batch

pytestmark = pytest.mark.django_db

# Each forged name carries a right-to-left override, an isolate, an escape sequence, a line
# separator and a C1 control, around a word the page must still show.
OVERRIDES = "\u202e\u2067\x1b[31m\u2028\x85"


def forged(word: str) -> str:
    return f"{word}{OVERRIDES}{word[::-1]}\u202c"


NAMES = {"job": forged("trainjob"), "user": forged("mallory"), "account": forged("acctnlp"),
         "partition": forged("partgpu"), "node": forged("gpunode"), "model": forged("modelh100"),
         "nic": forged("mlxport"), "cluster": forged("clustera"),
         "namespace": forged("nsteam"), "owner": forged("ownerjob")}

# A character that must not reach the page, raw or as a JSON escape in a chart's data.
NOT_SHOWN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e"
                       "\u2066-\u2069]")
ESCAPED = re.compile(r"\\u(00[01][0-9a-f]|007f|00[89][0-9a-f]|202[89a-e]|206[6-9])", re.I)


@pytest.fixture
def forged_cluster(users):
    # Where a cluster has no ingest key, its batches are unsigned: the cluster's name is
    # whatever the first batch said.
    envelope = node_batch(node=NAMES["node"], job="7801", samples=6, cluster=NAMES["cluster"])
    for gpu in envelope["gpus"]:
        gpu["model"] = NAMES["model"]
    envelope["nics"][0]["name"] = NAMES["nic"]
    envelope["jobs"][0].update(name=NAMES["job"], user=NAMES["user"], account=NAMES["account"],
                               partition=NAMES["partition"])
    batch = validate_batch(envelope)
    assert not batch.rejected_total, batch.rejected
    store_batch(batch)
    node = Node.objects.get()
    job = Job.objects.get(external_id="7801")
    assert (node.name, job.name, job.user) == (NAMES["node"], NAMES["job"], NAMES["user"])
    gpus = list(Gpu.objects.filter(node=node).order_by("index"))
    now = timezone.now()
    f.gpu_samples(gpus, now - dt.timedelta(minutes=30), now, job=job, every_s=60)
    f.nic_samples(list(Nic.objects.filter(node=node)), now - dt.timedelta(minutes=30), now,
                  every_s=60)
    # A finding as the detectors word them: the node's and the job's names in its text.
    f.finding(job, title=f"Straggler: node {node.name} holds back the job",
              evidence={"nodes": [node.name], "job name": job.name})
    f.finding(None, kind="fabric_link", node=node,
              title=f"Fabric link down on {node.name}")
    f.job(NAMES["user"], account=NAMES["account"], name=NAMES["job"],
          efficiency={"allocated": 8, "used": 1})
    pod = Job.objects.create(
        cluster=job.cluster, scheduler="kubernetes", external_id="pod-7801", user="",
        namespace=NAMES["namespace"], owner_kind="Job", owner_name=NAMES["owner"],
        name="trainer-0", state="running", started_at=now - dt.timedelta(hours=1),
        first_seen=now - dt.timedelta(hours=1), last_seen=now)
    JobEfficiency.objects.create(job=pod, computed_at=now, window_start=pod.started_at,
                                 window_end=now, gpus=1, gpu_hours_allocated=1.0,
                                 gpu_hours_used=0.5, gpu_hours_wasted=0.5, util_source="util")
    # A batch refused whole keeps the names it claimed: anyone who can reach the queue
    # writes these, signed or not.
    RejectedBatch.objects.create(cluster=NAMES["cluster"], node=NAMES["node"],
                                 reason="unknown schema 7")
    GpuHealth.objects.create(gpu=gpus[0], ts=now, changed_at=now, remap_pending=True,
                             remap_failure=False)  # on the drain list
    return {"node": node, "job": job, "gpu": gpus[0], "pod": pod}


def pages(forged_cluster) -> dict[str, str]:
    node, job, gpu = forged_cluster["node"], forged_cluster["job"], forged_cluster["gpu"]
    other = Job.objects.exclude(pk=job.pk).get(scheduler="slurm")
    return {
        "overview": reverse("home"),
        "nodes": reverse("nodes"),
        "node": reverse("node-detail", args=[node.pk]),
        "node history": reverse("node-history"),
        "fabric": reverse("fabric"),
        "GPU": reverse("gpu-detail", args=[gpu.pk]),
        "jobs": reverse("jobs"),
        "job": reverse("job-detail", args=[job.pk]),
        "compare": reverse("job-compare") + f"?job={job.pk}&job={other.pk}",
        "users": reverse("users"),
        "accounts": reverse("users") + "?by=account",
        "trends": reverse("trends"),
        "findings": reverse("findings"),
        "ingest health": reverse("ingest-health"),
        "drain list": reverse("drain-list"),
        "namespaces": reverse("namespaces"),
        "pod": reverse("job-detail", args=[forged_cluster["pod"].pk]),
    }


def test_no_page_shows_a_node_reported_name_with_its_overrides_or_controls(forged_cluster,
                                                                           client_for):
    assert Finding.objects.count() == 2
    client = client_for("staff")
    shown: dict[str, set[str]] = {}
    seen = []
    for page, url in pages(forged_cluster).items():
        response = client.get(url)
        assert response.status_code == 200, (page, response.status_code)
        # A form's values stay as stored (choosing that cluster must match it); they are
        # not shown. Everything shown is checked.
        html = re.sub(r'value="[^"]*"', 'value=""', response.content.decode())
        for found in (*NOT_SHOWN.finditer(html), *ESCAPED.finditer(html)):
            seen.append(f"{page}: {found.group()!r} in "
                        f"{html[found.start() - 60:found.end() + 10]!r}")
        shown[page] = {what for what, name in NAMES.items() if name[:6] in html}
    assert not seen, "\n".join(seen)
    # The names are still there to read, on the pages that show them.
    assert {"job", "user", "account", "partition", "node", "model", "cluster"} <= shown["job"]
    assert "cluster" in shown["overview"]  # in the cluster selector (two clusters)
    assert {"node", "model", "nic"} <= shown["node"]
    assert {"node", "model", "job", "user"} <= shown["GPU"]
    assert {"job", "user", "account"} <= shown["jobs"]
    assert {"job", "user"} <= shown["compare"]
    assert "user" in shown["users"] and "account" in shown["accounts"]
    assert "node" in shown["findings"] and "node" in shown["nodes"]
    assert "node" in shown["drain list"]
    assert {"node", "cluster"} <= shown["ingest health"]
    assert "namespace" in shown["namespaces"] and {"namespace", "owner"} <= shown["pod"]
    assert {"namespace", "owner"} <= shown["jobs"]


def test_a_chart_labels_a_node_reported_name_as_the_page_does(forged_cluster, client_for):
    client = client_for("staff")

    def strings(url: str) -> list[str]:
        html = client.get(url).content.decode()
        texts = re.findall(r'<script id="[^"]*" type="application/json">(.*?)</script>', html,
                           re.S)
        found = []

        def walk(value):
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, dict | list):
                for v in value.values() if isinstance(value, dict) else value:
                    walk(v)

        for text in texts:
            walk(json.loads(text))
        return found

    # The overview's heatmap names the node on its axis and in its hover text; the node
    # page's traffic chart names the NIC in its legend, both as ``oneline`` shows them.
    overview = strings(reverse("home"))
    assert one_line(NAMES["node"]) in overview
    assert any(s.startswith(one_line(NAMES["node"]) + " GPU 0") for s in overview)
    node = strings(reverse("node-detail", args=[forged_cluster["node"].pk]))
    assert one_line(NAMES["nic"]) + " rx" in node
    for s in overview + node:
        assert not NOT_SHOWN.search(s), s
