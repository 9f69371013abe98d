"""What the ingest log says about the pipeline's health: gaps, refusals, drops, clocks.

Every query reads a recent window of the log by ``received_at`` (its indexes), never the
whole log: the log is pruned (``pruning.py``) and the page must stay fast at any size.
"""

import datetime as dt
import re

from django.conf import settings
from django.db import connection

# Per-node lists on the page show the worst this many nodes.
LIST_LIMIT = 100


def _of_cluster(column: str, cluster: str) -> tuple[str, list]:
    """A condition keeping ``column`` (a node id) to the nodes of ``cluster`` ("": every
    cluster), and its parameters: the page follows the navigation's cluster choice."""
    if not cluster:
        return "", []
    return (f" AND {column} IN (SELECT cn.id FROM inventory_node cn JOIN inventory_cluster cc"
            " ON cc.id = cn.cluster_id WHERE cc.name = %s)", [cluster])


def window_start(now: dt.datetime) -> dt.datetime:
    """Where the page's window of the log begins (INGEST_HEALTH_WINDOW_S before now)."""
    return now - dt.timedelta(seconds=settings.INGEST_HEALTH_WINDOW_S)


def gaps_by_node(since: dt.datetime | None = None, cluster: str = "") -> list[dict]:
    """Batches that never arrived, per node, for the collector runs (boot ids) that sent
    anything since ``since``: each run numbers its batches 1, 2, 3, ...; the numbers
    missing between the lowest and the highest received are lost data
    (``last_seq - first_seq + 1 - batches``, kept per run by the writer in ``IngestRun``:
    no scan of the log, and pruning old log rows never makes a gap). A late batch that
    arrives fills its own gap."""
    if since is None:
        from django.utils import timezone

        since = window_start(timezone.now())
    scope, scope_args = _of_cluster("r.node_id", cluster)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT c.name, n.name, SUM(r.last_seq - r.first_seq + 1 - r.batches)::bigint
            FROM ingest_ingestrun r
            JOIN inventory_node n ON n.id = r.node_id
            JOIN inventory_cluster c ON c.id = n.cluster_id
            WHERE r.last_received >= %s AND r.last_seq - r.first_seq + 1 - r.batches > 0
            {scope}
            GROUP BY c.name, n.name
            ORDER BY 3 DESC, n.name LIMIT %s
            """,
            [since, *scope_args, LIST_LIMIT],
        )
        return [{"cluster": c, "node": n, "missing": m} for c, n, m in cur.fetchall()]


def batch_rates(now: dt.datetime, cluster: str = "") -> dict:
    """Batches and GPU samples per second over the last minute and five minutes, and the
    ingest delay (arrival minus the collector's send time) over the last five minutes."""
    m1 = now - dt.timedelta(minutes=1)
    scope, scope_args = _of_cluster("node_id", cluster)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT count(*) FILTER (WHERE received_at >= %s),
                   count(*),
                   COALESCE(sum(gpu_samples) FILTER (WHERE received_at >= %s), 0),
                   percentile_cont(0.5) WITHIN GROUP (
                       ORDER BY extract(epoch FROM received_at - sent_at)),
                   max(extract(epoch FROM received_at - sent_at))
            FROM ingest_ingestbatch WHERE received_at >= %s {scope}
            """,
            [m1, m1, now - dt.timedelta(minutes=5), *scope_args],
        )
        last_min, last_5, samples_min, delay_p50, delay_max = cur.fetchone()
    return {
        "batches_per_s_1m": last_min / 60.0,
        "batches_per_s_5m": last_5 / 300.0,
        "gpu_samples_per_s_1m": samples_min / 60.0,
        "delay_p50_s": delay_p50,
        "delay_max_s": delay_max,
    }


def rejected_by_reason(since: dt.datetime, cluster: str = "") -> list[dict]:
    """Items refused inside stored batches, and whole batches refused, by reason. A whole
    batch refused is counted under the cluster it named (it may name none)."""
    scope, scope_args = _of_cluster("b.node_id", cluster)
    refused_scope, refused_args = (" AND cluster = %s", [cluster]) if cluster else ("", [])
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT r.key, sum(r.value::bigint)::bigint, 'item'
            FROM ingest_ingestbatch b, jsonb_each_text(b.rejected_reasons) r
            WHERE b.received_at >= %s AND b.rejected > 0 {scope}
            GROUP BY r.key
            UNION ALL
            SELECT reason, count(*), 'batch' FROM ingest_rejectedbatch
            WHERE received_at >= %s {refused_scope} GROUP BY reason
            ORDER BY 2 DESC LIMIT 500
            """,
            [since, *scope_args, since, *refused_args],
        )
        return [{"reason": r, "count": n, "scope": scope} for r, n, scope in cur.fetchall()]


def spool_drops(since: dt.datetime, cluster: str = "") -> list[dict]:
    """Batches the collectors' full spools dropped, as they reported them, per node."""
    scope, scope_args = _of_cluster("b.node_id", cluster)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT n.name, sum(b.spool_dropped)::bigint FROM ingest_ingestbatch b
            JOIN inventory_node n ON n.id = b.node_id
            WHERE b.received_at >= %s AND b.spool_dropped > 0 {scope}
            GROUP BY n.name ORDER BY 2 DESC LIMIT %s
            """,
            [since, *scope_args, LIST_LIMIT],
        )
        return [{"node": n, "dropped": d} for n, d in cur.fetchall()]


def queue_depth() -> dict:
    """Messages waiting in the ingest queue and reserved by workers, from the broker."""
    import redis

    from clusterui.ingest import deadletter
    from clusterui.ingest.queue import ReliableQueue

    try:
        client = deadletter.client(timeout=2)
        bulk = ReliableQueue(client, settings.INGEST_QUEUE, consumer_id="health-page")
        # Reserved: taken by a consumer and not yet committed (bulk consumers' in-flight
        # lists, Celery workers' unacked messages).
        return {"queued": int(client.llen(settings.INGEST_QUEUE)),
                "reserved": int(client.hlen("unacked")) + bulk.inflight(),
                "consumers": bulk.consumers(),
                "dead_letters": int(client.llen(deadletter.KEY)),
                "recent_dead": deadletter.recent(client), "error": None}
    except redis.exceptions.RedisError as exc:
        return {"queued": None, "reserved": None, "consumers": None, "dead_letters": None,
                "recent_dead": [], "error": f"broker unreachable: {exc}"}


def batches_by_key(since: dt.datetime, cluster: str = "") -> list[dict]:
    """Batches per cluster and signing key: a key rotation is done when the old key's
    count falls to zero."""
    scope, scope_args = _of_cluster("node_id", cluster)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT c.name, b.key_id, sum(b.n)::bigint, count(*), max(b.last)
            FROM (
                -- Per node first (index-only, by received_at): the join sees one row per
                -- node and key, not one per batch.
                SELECT node_id, key_id, count(*) AS n, max(received_at) AS last
                FROM ingest_ingestbatch WHERE received_at >= %s {scope} GROUP BY 1, 2
            ) b JOIN inventory_node n ON n.id = b.node_id
            JOIN inventory_cluster c ON c.id = n.cluster_id
            GROUP BY 1, 2 ORDER BY 1, 2
            """,
            [since, *scope_args],
        )
        return [{"cluster": c, "key_id": k, "batches": b, "nodes": n, "last": last}
                for c, k, b, n, last in cur.fetchall()]


def signature_versions(since: dt.datetime, cluster: str = "") -> dict:
    """Batches per signature version since ``since`` ("unsigned", "1", "2"; "unknown" for
    batches stored before versions were recorded), and the nodes that still sign with
    version 1, most batches first: version 1 can be turned off (docs/protocol.md) when this
    list stays empty."""
    scope, scope_args = _of_cluster("node_id", cluster)
    with connection.cursor() as cur:
        # Per node and version first (index-only, by received_at), as batches_by_key.
        cur.execute(
            f"""
            SELECT c.name, n.name, b.v, b.batches, b.last
            FROM (
                SELECT node_id, signature_version AS v, count(*) AS batches,
                       max(received_at) AS last
                FROM ingest_ingestbatch WHERE received_at >= %s {scope} GROUP BY 1, 2
            ) b JOIN inventory_node n ON n.id = b.node_id
            JOIN inventory_cluster c ON c.id = n.cluster_id
            ORDER BY b.batches DESC, 1, 2
            """,
            [since, *scope_args],
        )
        rows = cur.fetchall()
    totals: dict[str, dict] = {}
    v1_nodes = []
    for cluster, node, version, batches, last in rows:
        name = VERSION_NAMES.get(version, str(version))
        total = totals.setdefault(name, {"version": name, "batches": 0, "nodes": 0})
        total["batches"] += batches
        total["nodes"] += 1
        if version == 1 and len(v1_nodes) < LIST_LIMIT:
            v1_nodes.append({"cluster": cluster, "node": node, "batches": batches,
                             "last": last})
    return {"versions": sorted(totals.values(), key=lambda t: t["version"]),
            "v1_nodes": v1_nodes,
            "v1_node_count": totals.get("1", {"nodes": 0})["nodes"]}


# How the page and /metrics name IngestBatch.signature_version's values.
VERSION_NAMES = {None: "unknown", 0: "unsigned"}


def duplicates_by_reason(since: dt.datetime, cluster: str = "") -> list[dict]:
    """Samples not stored because they were stored already (a collector restarted with a
    new boot id and resent its spool, ...), by section."""
    scope, scope_args = _of_cluster("b.node_id", cluster)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT r.key, sum(r.value::bigint)::bigint, count(DISTINCT b.node_id)
            FROM ingest_ingestbatch b, jsonb_each_text(b.duplicate_reasons) r
            WHERE b.received_at >= %s AND b.duplicates > 0 {scope}
            GROUP BY r.key ORDER BY 2 DESC
            """,
            [since, *scope_args],
        )
        return [{"reason": r, "count": n, "nodes": k} for r, n, k in cur.fetchall()]


# Refusal reasons that mean the node's clock (or its data's times) is off: samples in the
# future, older than retention, a batch spanning too long (validation and the writer).
# Refusals that a wrong clock causes: samples in the future, older than retention or the
# batch's span, and a sent_at the server cannot believe.
TIME_REASONS = re.compile(r"future|older than|retention|span|behind the batch|"
                          r"beyond the latest day|^sent_at:")


def clock_off_nodes(now: dt.datetime, since: dt.datetime, cluster: str = "") -> list[dict]:
    """Nodes whose clock looks wrong, with the evidence: their latest batch (of the last 10
    minutes) was sent more than INGEST_CLOCK_TOLERANCE_S after it arrived, or batches in
    the window had samples refused for their time."""
    tolerance = settings.INGEST_CLOCK_TOLERANCE_S
    nodes: dict[int, dict] = {}

    def entry(node_id, cluster, name):
        return nodes.setdefault(node_id, {
            "cluster": cluster, "node": name, "ahead_s": None, "sent_at": None,
            "received_at": None, "refused": 0, "reasons": []})

    scope, scope_args = _of_cluster("node_id", cluster)
    b_scope, b_scope_args = _of_cluster("b.node_id", cluster)
    with connection.cursor() as cur:
        cur.execute(
            f"""
            SELECT b.node_id, c.name, n.name, b.sent_at, b.received_at
            FROM (
                SELECT DISTINCT ON (node_id) node_id, sent_at, received_at
                FROM ingest_ingestbatch WHERE received_at >= %s {scope}
                ORDER BY node_id, received_at DESC
            ) b
            JOIN inventory_node n ON n.id = b.node_id
            JOIN inventory_cluster c ON c.id = n.cluster_id
            WHERE b.sent_at > b.received_at + make_interval(secs => %s)
            """,
            [max(since, now - dt.timedelta(minutes=10)), *scope_args, tolerance],
        )
        for node_id, cluster, name, sent, received in cur.fetchall():
            e = entry(node_id, cluster, name)
            e.update(ahead_s=(sent - received).total_seconds(), sent_at=sent,
                     received_at=received)
        cur.execute(
            f"""
            SELECT b.node_id, c.name, n.name, r.key, sum(r.value::bigint)::bigint,
                   (array_agg(b.rejected_examples ->> r.key ORDER BY b.received_at DESC))[1],
                   max(b.received_at)
            FROM ingest_ingestbatch b, jsonb_each_text(b.rejected_reasons) r,
                 inventory_node n, inventory_cluster c
            WHERE b.received_at >= %s AND b.rejected > 0 AND r.key ~ %s
              AND n.id = b.node_id AND c.id = n.cluster_id {b_scope}
            GROUP BY 1, 2, 3, 4
            """,
            [since, TIME_REASONS.pattern, *b_scope_args],
        )
        for node_id, cluster, name, reason, count, example, last in cur.fetchall():
            e = entry(node_id, cluster, name)
            e["refused"] += count
            e["reasons"].append({"reason": reason, "count": count, "example": example,
                                 "last": last})
    return sorted(nodes.values(), key=lambda e: (-(e["ahead_s"] or 0), -e["refused"],
                                                 e["cluster"], e["node"]))
