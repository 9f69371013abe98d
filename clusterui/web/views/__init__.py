"""The web UI's views, one module per page; thin: data comes from plain modules
(``snapshot``, ``waste``, ``clusterui.telemetry.series``) and figures from ``figures``."""
