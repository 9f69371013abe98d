"""Build the project's wheels into dist/ (``make dist``).

- ``clusterui``: the server (Django, Celery workers, the simulator for the demo); built
  from the repository root.
- ``clusterui-collector``: what a GPU node installs; built from ``collectors/``.
- ``clusterui-collector-sim``: the simulator alone, the collector's ``sim`` extra; built from
  ``collectors/sim/``.

Each is built from a clean copy of its sources in a temporary directory: setuptools writes
``build/`` and ``*.egg-info`` next to the sources it builds, and a ``collectors/build`` left
in the tree would end up inside the server's wheel.

    python scripts/dist.py [--out DIR] [clusterui|collector|sim ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")


def _server(tmp: Path) -> Path:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tmp / name)
    for name in ("clusterui", "collectors"):
        shutil.copytree(ROOT / name, tmp / name, ignore=_SKIP)
    return tmp


def _collector(tmp: Path) -> Path:
    src = tmp / "collectors"
    shutil.copytree(ROOT / "collectors", src,
                    ignore=shutil.ignore_patterns("sim", "__pycache__", "*.pyc", "build",
                                                  "*.egg-info"))
    return src


def _sim(tmp: Path) -> Path:
    src = tmp / "sim"
    shutil.copytree(ROOT / "collectors" / "sim", src, ignore=_SKIP)
    return src


TARGETS = {"clusterui": _server, "collector": _collector, "sim": _sim}


def build(targets: list[str], out: Path) -> list[Path]:
    """Build ``targets`` into ``out``; returns the wheels' paths."""
    out.mkdir(parents=True, exist_ok=True)
    wheels = []
    for target in targets:
        with tempfile.TemporaryDirectory(prefix=f"clusterui-dist-{target}-") as tmp:
            src = TARGETS[target](Path(tmp))
            scratch = Path(tmp) / "wheel"
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                            "--wheel-dir", str(scratch), str(src)], check=True)
            for wheel in scratch.glob("*.whl"):
                dest = out / wheel.name
                shutil.move(str(wheel), dest)
                wheels.append(dest)
    return wheels


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "dist"), help="output directory")
    parser.add_argument("targets", nargs="*", help=f"any of {', '.join(TARGETS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target {unknown[0]!r}: choose from {', '.join(TARGETS)}")
    for wheel in build(args.targets or list(TARGETS), Path(args.out)):
        print(os.path.relpath(wheel, os.getcwd()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
