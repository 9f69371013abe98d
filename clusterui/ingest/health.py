"""What the ingest log says about the pipeline's health: gaps, refusals, drops."""

import datetime as dt

from django.conf import settings
from django.db import connection


def gaps_by_node() -> list[dict]:
    """Batches that never arrived, per node: for each collector run (boot id) the sequence
    numbers run 1, 2, 3, ...; the ones missing below the highest received are lost data."""
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT c.name, n.name, SUM(b.missing)::bigint
            FROM (
                SELECT node_id, MAX(seq) - COUNT(DISTINCT seq) AS missing
                FROM ingest_ingestbatch WHERE seq >= 1
                GROUP BY node_id, boot_id
            ) b
            JOIN inventory_node n ON n.id = b.node_id
            JOIN inventory_cluster c ON c.id = n.cluster_id
            GROUP BY c.name, n.name HAVING SUM(b.missing) > 0
            ORDER BY SUM(b.missing) DESC, n.name
            """
        )
        return [{"cluster": c, "node": n, "missing": m} for c, n, m in cur.fetchall()]


def batch_rates(now: dt.datetime) -> dict:
    """Batches and GPU samples per second over the last minute and five minutes, and the
    ingest delay (arrival minus the collector's send time) over the last five minutes."""
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT count(*) FILTER (WHERE received_at >= %(m1)s),
                   count(*),
                   COALESCE(sum(gpu_samples) FILTER (WHERE received_at >= %(m1)s), 0),
                   percentile_cont(0.5) WITHIN GROUP (
                       ORDER BY extract(epoch FROM received_at - sent_at)),
                   max(extract(epoch FROM received_at - sent_at))
            FROM ingest_ingestbatch WHERE received_at >= %(m5)s
            """,
            {"m1": now - dt.timedelta(minutes=1), "m5": now - dt.timedelta(minutes=5)},
        )
        last_min, last_5, samples_min, delay_p50, delay_max = cur.fetchone()
    return {
        "batches_per_s_1m": last_min / 60.0,
        "batches_per_s_5m": last_5 / 300.0,
        "gpu_samples_per_s_1m": samples_min / 60.0,
        "delay_p50_s": delay_p50,
        "delay_max_s": delay_max,
    }


def rejected_by_reason(since: dt.datetime) -> list[dict]:
    """Items refused inside stored batches, and whole batches refused, by reason."""
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT r.key, sum(r.value::bigint)::bigint, 'item'
            FROM ingest_ingestbatch b, jsonb_each_text(b.rejected_reasons) r
            WHERE b.received_at >= %(since)s AND b.rejected > 0
            GROUP BY r.key
            UNION ALL
            SELECT reason, count(*), 'batch' FROM ingest_rejectedbatch
            WHERE received_at >= %(since)s GROUP BY reason
            ORDER BY 2 DESC LIMIT 50
            """,
            {"since": since},
        )
        return [{"reason": r, "count": n, "scope": scope} for r, n, scope in cur.fetchall()]


def spool_drops(since: dt.datetime) -> list[dict]:
    """Batches the collectors' full spools dropped, as they reported them, per node."""
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT n.name, sum(b.spool_dropped)::bigint FROM ingest_ingestbatch b
            JOIN inventory_node n ON n.id = b.node_id
            WHERE b.received_at >= %s AND b.spool_dropped > 0
            GROUP BY n.name ORDER BY 2 DESC
            """,
            [since],
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
                "dead_letters": int(client.llen(deadletter.KEY)), "error": None}
    except redis.exceptions.RedisError as exc:
        return {"queued": None, "reserved": None, "consumers": None, "dead_letters": None,
                "error": f"broker unreachable: {exc}"}


def batches_by_key(since: dt.datetime) -> list[dict]:
    """Batches per cluster and signing key: a key rotation is done when the old key's
    count falls to zero."""
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT c.name, b.key_id, count(*), count(DISTINCT b.node_id), max(b.received_at)
            FROM ingest_ingestbatch b JOIN inventory_node n ON n.id = b.node_id
            JOIN inventory_cluster c ON c.id = n.cluster_id
            WHERE b.received_at >= %s GROUP BY 1, 2 ORDER BY 1, 2
            """,
            [since],
        )
        return [{"cluster": c, "key_id": k, "batches": b, "nodes": n, "last": last}
                for c, k, b, n, last in cur.fetchall()]
