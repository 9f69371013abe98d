"""Fixtures for the collector tests; the tree builders live in sysfs_trees.py."""

import os

import pytest


@pytest.fixture
def roots(tmp_path):
    out = {name: str(tmp_path / name) for name in ("sys", "proc", "cgroup", "jobmap")}
    for path in out.values():
        os.makedirs(path)
    return out
