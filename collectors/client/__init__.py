"""Command-line clients of the ClusterUI server's JSON API (``clusterui jobstats``): the
standard library only, so they run on a login node beside the collector, without the
server's code."""
