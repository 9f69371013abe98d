"""What the ingest log says about the pipeline's health: gaps, refusals, drops."""

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
