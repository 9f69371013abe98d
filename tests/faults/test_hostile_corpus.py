"""The hostile corpus (``tests/faults/hostile.py``) through the real queue, transport and
parser: every case goes onto the ``ingest`` Redis list between two good batches, and a real
bulk consumer process (``manage.py ingest_worker``, signatures required) reads them all.

What must hold: the consumer never crashes; every good batch, and every good row around a
bad one, is stored; every refusal (an item, a whole batch, a message set aside) is visible
with its reason on the ingest health page; a job name with a right-to-left override is
stored as sent and shown without it. The counts are written to
``test-output/faults/hostile-corpus.json``.
"""

import html
import json
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from clusterui.ingest import deadletter
from clusterui.ingest.auth import check_signature, forget_keys
from clusterui.ingest.models import IngestBatch, IngestKey, RejectedBatch
from clusterui.ingest.validate import validate_batch
from clusterui.ingest.writer import store_batch
from clusterui.inventory.models import Gpu
from clusterui.jobs.models import Job
from collectors.client.report import one_line
from tests.faults import hostile
from tests.services import OUTPUT, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _store(envelope: dict) -> None:
    refusal = check_signature(envelope)
    assert refusal is None, refusal
    store_batch(validate_batch(envelope))


def _gpu_rows(node: str) -> tuple[int, int]:
    with connection.cursor() as cur:
        cur.execute(
            """SELECT count(*), count(DISTINCT (s.gpu_id, s.ts)) FROM telemetry_gpusample s
               JOIN inventory_gpu g ON g.id = s.gpu_id JOIN inventory_node n ON n.id = g.node_id
               JOIN inventory_cluster c ON c.id = n.cluster_id
               WHERE n.name = %s AND c.name = %s""", [node, hostile.CLUSTER])
        return cur.fetchone()


def _reasons(batches) -> Counter:
    found = Counter()
    for b in batches:
        found.update({k: int(v) for k, v in b.rejected_reasons.items()})
    return found


def test_no_input_stops_ingest_or_loses_the_good_data_around_it(broker, make_worker,
                                                              client):
    IngestKey.objects.create(cluster=hostile.CLUSTER, key_id=hostile.KEY_ID,
                             secret=hostile.SECRET)
    IngestKey.objects.create(cluster=hostile.OTHER_CLUSTER, key_id=hostile.OTHER_KEY_ID,
                             secret=hostile.OTHER_SECRET)
    forget_keys()
    # What the forgeries aim at: another cluster's GPU and bob's job, stored beforehand.
    other = hostile.batch("other-node", cluster=hostile.OTHER_CLUSTER)
    other["gpus"][0]["uuid"] = "GPU-other-cluster-0"
    _store(hostile.sign(other, secret=hostile.OTHER_SECRET, key_id=hostile.OTHER_KEY_ID,
                        cluster=hostile.OTHER_CLUSTER))
    bobs = hostile.batch("bob-node")
    bobs["jobs"][0].update({"id": "bobs-job", "user": "bob"})
    for row in bobs["gpu_samples"]["rows"]:
        row[2] = "bobs-job"
    for row in bobs["job_samples"]["rows"]:
        row[1] = "bobs-job"
    _store(hostile.sign(bobs))

    cases = hostile.build()
    assert len(cases) >= 100
    now = time.time()
    # The good node's batches follow one another (2 samples 10 s apart, 20 s per batch).
    first = now - 20 * (len(cases) + 3)
    items = [hostile.good_message(1, first)]
    for k, case in enumerate(cases, start=2):
        items += [case.raw, hostile.good_message(k, first + 20 * (k - 1))]
    goods = len(cases) + 1
    broker.lpush("ingest", *items)  # the consuming end is the right: oldest first

    worker = make_worker(kind="bulk", extra_env={
        "INGEST_REQUIRE_SIGNATURE": "1",
        "INGEST_MAX_MESSAGE_BYTES": str(hostile.MAX_MESSAGE_BYTES),
    })
    pid = worker.proc.pid

    def drained():
        held = broker.llen("ingest") + sum(
            broker.llen(k) for k in broker.scan_iter("clusterui:ingest:consumer:*:inflight:*"))
        return held == 0 and IngestBatch.objects.filter(node__name="good-node").count() == goods

    started = time.monotonic()
    wait_for(drained, timeout=240, interval=0.5, what="the corpus to be consumed")
    drain_s = time.monotonic() - started

    # 0 consumer crashes: the same process, alive, no traceback, no restart.
    log = worker.log()
    assert worker.proc.poll() is None and worker.proc.pid == pid
    assert "Traceback" not in log, log[-3000:]
    assert "restarting" not in log.lower(), log[-3000:]

    # Every good batch stored whole.
    good = IngestBatch.objects.filter(node__name="good-node")
    assert sorted(good.values_list("seq", flat=True)) == list(range(1, goods + 1))
    assert set(good.values_list("gpu_samples", flat=True)) == {16}
    assert set(good.values_list("rejected", flat=True)) == {0}

    dead = [json.loads(raw) for raw in broker.lrange(deadletter.KEY, 0, -1)]
    outcomes, lost, problems = Counter(), 0, []
    by_node: dict[str, list] = {}
    for case in cases:
        by_node.setdefault(case.node, []).append(case)
    for case in cases:
        batches = list(IngestBatch.objects.filter(node__name=case.node,
                                                  node__cluster__name=hostile.CLUSTER)
                       ) if case.node else []
        stored_rows, distinct_rows = _gpu_rows(case.node) if case.node else (0, 0)
        if case.expect == "stored":
            outcomes["stored"] += 1
            if not batches:
                problems.append(f"{case.name}: not stored")
                lost += case.gpu_rows
                continue
            if len(by_node[case.node]) == 1 and stored_rows != case.gpu_rows:
                problems.append(f"{case.name}: {stored_rows} GPU rows stored, "
                                f"{case.gpu_rows} expected")
                lost += max(0, case.gpu_rows - stored_rows)
            if stored_rows != distinct_rows:
                problems.append(f"{case.name}: {stored_rows - distinct_rows} duplicate rows")
            refused = sum(b.rejected for b in batches)
            if refused < case.refused:
                problems.append(f"{case.name}: {refused} items refused, {case.refused} "
                                "expected")
            if case.refused:
                outcomes["refused per item"] += 1
            reasons = _reasons(batches)
            if case.reason and case.refused and not any(case.reason in r for r in reasons):
                problems.append(f"{case.name}: no reason with {case.reason!r} in "
                                f"{dict(reasons)}")
        elif case.expect == "refused":
            outcomes["refused whole"] += 1
            if batches:
                problems.append(f"{case.name}: stored, should be refused")
            if not RejectedBatch.objects.filter(reason__contains=case.reason).exists():
                problems.append(f"{case.name}: no refusal with {case.reason!r}")
        elif case.expect == "dead":
            outcomes["dead-lettered"] += 1
            if not any(case.reason in entry["reason"] for entry in dead):
                problems.append(f"{case.name}: no dead letter with {case.reason!r} in "
                                f"{[e['reason'][:80] for e in dead]}")
    # A duplicate is stored once whatever batch key carries it.
    replays = [c for c in cases if c.kind == "duplicates" and c.name.startswith(
        ("original", "redelivered", "same samples"))]
    if _gpu_rows(replays[0].node) != (16, 16):
        problems.append(f"replays: {_gpu_rows(replays[0].node)} rows stored for 16 samples")
    # Identity: the forged reports changed nothing that is not the forger's own.
    if Job.objects.get(external_id="bobs-job").user != "bob":
        problems.append("bob's job changed owner")
    moved = Gpu.objects.select_related("node__cluster").get(uuid="GPU-other-cluster-0")
    if (moved.node.cluster.name, moved.node.name) != (hostile.OTHER_CLUSTER, "other-node"):
        problems.append(f"another cluster's GPU moved to {moved.node}")

    # Every refusal visible with its reason on the ingest health page.
    staff = get_user_model().objects.create_user("ops", password="pw", is_staff=True)
    client.force_login(staff)
    page = html.unescape(client.get("/ingest/health/").content.decode())
    reasons = set(_reasons(IngestBatch.objects.filter(rejected__gt=0)))
    reasons |= set(RejectedBatch.objects.values_list("reason", flat=True))
    reasons |= {entry["reason"][:120] for entry in dead}
    missing = sorted(r for r in reasons if r[:120] not in page)
    if missing:
        problems.append(f"{len(missing)} refusal reasons not on the health page: "
                        f"{missing[:10]}")

    # A job name with a right-to-left override came through the queue as sent; its page
    # and the jobs list show it on one line, without the override (docs/web-ui.md).
    rtl = Job.objects.get(name__contains="\u202e")
    for url in (f"/jobs/{rtl.pk}/", "/jobs/?state=running"):
        shown = client.get(url).content.decode()
        if "\u202e" in shown or one_line(rtl.name) not in html.unescape(shown):
            problems.append(f"{url}: the job's name is not shown as {one_line(rtl.name)!r}")

    figures = {
        "cases": len(cases), "by_class": dict(Counter(c.kind for c in cases)),
        "good_batches_between": goods, "outcomes": dict(outcomes),
        "dead_letters": len(dead), "refused_batches": RejectedBatch.objects.count(),
        "items_refused_in_stored_batches": sum(
            IngestBatch.objects.values_list("rejected", flat=True)),
        "consumer_crashes": 0 if worker.proc.poll() is None else 1,
        "good_rows_lost": lost, "problems": problems, "drain_seconds": round(drain_s, 1),
    }
    (OUTPUT / "faults").mkdir(parents=True, exist_ok=True)
    (OUTPUT / "faults" / "hostile-corpus.json").write_text(json.dumps(figures, indent=2))
    assert not problems, "\n".join(problems)
