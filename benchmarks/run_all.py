#!/usr/bin/env python
"""``make bench``: every ``benchmarks/*.py`` in turn, then the detectors' scenario report.

Each benchmark prints its own figures (and uses its own scratch database where it needs one;
``storage_vs_peers`` also installs Debian's prometheus and victoria-metrics where missing, and
its helpers live in ``benchmarks/peers/``, a package, so they are not run here;
``ingest_health`` keeps its 10-million-row ingest log, ``<database>_ingest_health``, and
reuses it for a few hours).
The scenario report (``manage.py scenario_report``) runs against a scratch database too,
created, migrated and dropped here, so a demo's database is never touched. The exit status
is 1 when any of them failed.

    python benchmarks/run_all.py [NAME ...]    # only the benchmarks whose file name matches
"""

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASE_DB = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui")
SCENARIO_DB = "clusterui_bench_scenarios"
# The runs of a benchmark under ``make bench``, one argument list each (default: one run,
# none): the steady-state ingest run alternates with the tree issue 17 was filed on and
# prints the ratio of their rates (its ISSUE_TREE); the storage rig runs GPU samples alone
# (issue 17's comparison), then with two InfiniBand ports per node of four GPUs.
RUNS = {"ingest_steady": [["--against"]],
        "storage_vs_peers": [[], ["--nics-per-node", "2"]]}


def run(title: str, command: list[str], env: dict | None = None) -> bool:
    print(f"\n=== {title} ===", flush=True)
    began = time.monotonic()
    code = subprocess.call(command, cwd=ROOT, env=env)
    print(f"--- {title}: {'ok' if code == 0 else f'FAILED (exit {code})'} "
          f"in {time.monotonic() - began:.0f} s", flush=True)
    return code == 0


def _admin(sql: str) -> None:
    import psycopg

    admin = BASE_DB.rsplit("/", 1)[0].replace("postgres://", "postgresql://", 1) + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql)


def scenario_report() -> bool:
    env = dict(os.environ, DATABASE_URL=BASE_DB.rsplit("/", 1)[0] + "/" + SCENARIO_DB,
               DEBUG="1", LOG_LEVEL="WARNING")
    _admin(f"DROP DATABASE IF EXISTS {SCENARIO_DB} WITH (FORCE)")
    _admin(f"CREATE DATABASE {SCENARIO_DB}")
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env,
                       check=True)
        return run("scenario report (manage.py scenario_report)",
                   [sys.executable, "manage.py", "scenario_report"], env)
    finally:
        _admin(f"DROP DATABASE IF EXISTS {SCENARIO_DB} WITH (FORCE)")


def main(argv: list[str]) -> int:
    scripts = sorted(p for p in HERE.glob("*.py") if p.name not in {"run_all.py", "__init__.py"})
    if argv:
        scripts = [p for p in scripts if any(name in p.stem for name in argv)]
    ok = [run(" ".join([p.stem, *arguments]), [sys.executable, str(p), *arguments])
          for p in scripts for arguments in RUNS.get(p.stem, [[]])]
    if not argv or any(name in "scenario_report" for name in argv):
        ok.append(scenario_report())
    print(f"\n{sum(ok)} of {len(ok)} benchmarks ran cleanly.")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
