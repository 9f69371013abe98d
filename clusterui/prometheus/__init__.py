"""``/metrics``: ClusterUI's state as Prometheus series (docs/operations.md, "Prometheus")."""
