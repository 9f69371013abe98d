"""The pieces of ``benchmarks/storage_vs_peers.py``: the simulated workload
(``workload``), the exposition-format writers and the exactness check (``exposition``), and
the two peer stores built from the same samples (``prometheus``, ``victoriametrics``).

A package, not modules beside the benchmarks: ``run_all.py`` runs every
``benchmarks/*.py`` as a benchmark.
"""
