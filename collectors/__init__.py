"""ClusterUI node collector."""

__version__ = "0.1.0"
